"""Jobs for supervision tests, run by real worker subprocesses (importable from the project folder)."""

from __future__ import annotations

import os

#: What the leaking job keeps alive for the rest of its process's life.
_kept: list[bytes] = []


def leak(megabytes: int) -> int:
    """Keep ``megabytes`` of written (so resident) memory for ever, as a leak would; returns the worker's pid."""
    _kept.append(b"\x01" * (megabytes * 1024 * 1024))
    return os.getpid()

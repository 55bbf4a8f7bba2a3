"""The process was asked to stop (SIGTERM to a worker): long jobs check this between items and while they wait.
More in docs/architecture/work.md."""

from __future__ import annotations

import threading

#: Set once per process, by the worker's signal handler; never cleared (the process is on its way out).
requested = threading.Event()


def request() -> None:
    """Ask every job running in this process to stop at its next item."""
    requested.set()


def is_requested() -> bool:
    return requested.is_set()

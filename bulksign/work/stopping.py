"""The process was asked to stop (SIGTERM to a worker): long jobs check this between items and while they wait.

A worker finishes its current job before it exits (RQ's warm shutdown); a chunk job that sees
the request stops after the item in hand and hands the rest back untried, so every process
exits within seconds instead of after its chunk, its throttle waits included.
"""

from __future__ import annotations

import threading

#: Set once per process, by the worker's signal handler; never cleared (the process is on its way out).
requested = threading.Event()


def request() -> None:
    """Ask every job running in this process to stop at its next item."""
    requested.set()


def is_requested() -> bool:
    return requested.is_set()

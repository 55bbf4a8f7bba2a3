"""Several callers racing for the same row: each in its own thread and app context, released together."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from bulksign.core.extensions import db


def race(app, attempt: Callable[[int], object], *, callers: int = 4, timeout: float = 60) -> dict[int, object]:
    """``attempt(n)`` for n in 0..callers-1, each in a thread with its own session, all started at one barrier;
    their answers by n. A caller's exception is raised here; one still running after ``timeout`` s fails the test."""
    barrier = threading.Barrier(callers)
    results: dict[int, object] = {}
    errors: dict[int, BaseException] = {}

    def run(n: int) -> None:
        with app.app_context():
            try:
                barrier.wait(timeout=timeout)
                results[n] = attempt(n)
            except BaseException as exc:  # raised in the test's thread below
                errors[n] = exc
            finally:
                db.session.remove()

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(callers)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    running = [n for n, thread in enumerate(threads) if thread.is_alive()]
    assert not running, f"callers {running} still running after {timeout} s"
    if errors:
        raise errors[min(errors)]
    return results

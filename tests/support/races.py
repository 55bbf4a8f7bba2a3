"""Several callers racing for the same row: each in its own thread and app context, released together."""

from __future__ import annotations

import threading
from collections.abc import Callable

from bulksign.core.extensions import db


def race(app, attempt: Callable[[int], object], *, callers: int = 4) -> dict[int, object]:
    """``attempt(n)`` for n in 0..callers-1, each in a thread with its own session, all started at one barrier;
    their answers by n."""
    barrier, results = threading.Barrier(callers), {}

    def run(n: int) -> None:
        with app.app_context():
            barrier.wait(timeout=10)
            results[n] = attempt(n)
            db.session.remove()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results

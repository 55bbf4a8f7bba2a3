"""The reconciler's run beside a 100,000-recipient batch waiting in ``pending`` (small: 5,000).

It runs every 30 s, so it must stay cheap however big the waiting batches are: in-flight work is scanned by
the partial index of working states, waiting work a window per batch (``pipeline.top_up``), never every pending
id. Three runs: with Redis emptied (it fills the batch's windows), then with the windows full (nothing to do),
then with Redis emptied again while a chunk is claimed by a worker that is gone.
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta

from bench import Figure, bench_app
from bench.bench_pipeline import _create_batch

#: Every 30 s: a run should take a small part of that.
TARGET_MS = 1000


def _timed_reconcile(app) -> tuple[float, object]:
    from bulksign.batches.reconciler import reconcile
    from bulksign.core.extensions import db, get_redis
    from bulksign.models import utcnow

    started = time.perf_counter()
    result = reconcile(
        db.session,
        redis=get_redis(),
        app=app,
        now=utcnow() + timedelta(minutes=1),
        stale_after=timedelta(seconds=app.config["RECONCILE_AFTER_SECONDS"]),
    )
    return (time.perf_counter() - started) * 1000, result


def run(*, small: bool) -> list[Figure]:
    from sqlalchemy import select, text

    from bulksign.core.extensions import db, get_redis
    from bulksign.models import SigningRequest
    from bulksign.work.queues import get_queue

    n = 5_000 if small else 100_000
    with bench_app(pgbouncer=True) as app:
        batch_id = _create_batch(app, n)
        db.session.execute(text("ANALYZE signing_requests"))
        db.session.commit()
        label = f"{n:,} pending" + (" (small)" if small else "")
        empty_ms, empty = _timed_reconcile(app)
        queued = len(get_queue("pdf"))
        full_ms, full = _timed_reconcile(app)
        # A worker claimed a chunk and died with Redis: the chunk is in flight, nobody owns it.
        first = db.session.scalars(
            select(SigningRequest.id).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id).limit(10)
        ).all()
        db.session.execute(
            text(
                "UPDATE signing_requests SET status = 'generating', status_changed_at = now() - interval '5 minutes'"
                " WHERE id = ANY(:ids)"
            ),
            {"ids": list(first)},
        )
        db.session.commit()
        get_redis().flushall()
        lost_ms, lost = _timed_reconcile(app)
    return [
        Figure(
            f"reconcile with Redis emptied, {label}: {len(empty.renders)} ids queued in {queued} jobs",
            empty_ms,
            "ms",
            f"< {TARGET_MS} ms",
            empty_ms < TARGET_MS and 0 < len(empty.renders) < n,
        ),
        Figure(f"reconcile with the window full, {label}", full_ms, "ms", f"< {TARGET_MS} ms", full_ms < TARGET_MS),
        Figure(
            f"reconcile after a lost chunk and an emptied Redis, {label}: {len(lost.renders)} ids queued",
            lost_ms,
            "ms",
            f"< {TARGET_MS} ms",
            lost_ms < TARGET_MS and set(first) <= set(lost.renders) and not full.renders,
        ),
    ]


if __name__ == "__main__":
    for figure in run(small="--small" in sys.argv):
        print(figure)

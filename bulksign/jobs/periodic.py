"""Entry points for periodic jobs: each takes ``now`` from the clock, calls the domain, commits."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

from flask import current_app

from bulksign.batches.expiry import expire_due
from bulksign.batches.notices import queued_completion_notices
from bulksign.batches.progress import move_batches_on
from bulksign.batches.reconciler import reconcile
from bulksign.batches.reminders import queue_due_reminders
from bulksign.core.extensions import db, get_redis
from bulksign.integrations.idempotency import purge_expired
from bulksign.jobs._app import this_app
from bulksign.jobs.routing import advance_stalled
from bulksign.models import utcnow
from bulksign.work.pipeline import enqueue_sends
from bulksign.work.queues import (
    EXPIRE,
    PURGE_IDEMPOTENCY_KEYS,
    RECONCILE,
    REMIND,
    ROLLUP_BATCHES,
    RUN_PERIODIC,
    by_path,
    job,
)


@job(RUN_PERIODIC)
def run_periodic(func_path: str) -> object:
    """What the scheduler enqueues: call the periodic job declared as ``func_path`` with the current time."""
    return by_path(func_path).func(now=utcnow())


@job(ROLLUP_BATCHES)
def rollup_batches(*, now: datetime) -> int:
    """Move batches on when sending ended or nobody is left to sign, then send the notices of their ends."""
    moved = move_batches_on(db.session, now=now)
    db.session.commit()
    enqueue_sends(queued_completion_notices(db.session, batch_ids=moved))
    return len(moved)


@job(PURGE_IDEMPOTENCY_KEYS)
def purge_idempotency_keys(*, now: datetime) -> int:
    """Forget API answers kept for idempotency keys past their expiry."""
    purged = purge_expired(db.session, now=now)
    db.session.commit()
    return purged


@job(RECONCILE)
def reconcile_stuck_work(*, now: datetime) -> str:
    """Re-enqueue requests and mails whose job was lost (Redis flush) or died with its worker."""
    result = reconcile(
        db.session,
        redis=get_redis(),
        app=this_app(),
        now=now,
        stale_after=timedelta(seconds=current_app.config["RECONCILE_AFTER_SECONDS"]),
    )
    # A document several sign whose next step's job was lost.
    advanced = advance_stalled(now=now)
    return f"{result}, {advanced} next steps" if advanced else str(result)


class _CommitThenSend:
    """After each page: commit (short locks; a crash later loses nothing), then enqueue the page's sends.

    The enqueueing (RQ's per-job work, in Python) runs on one background thread, so it overlaps the
    database work of the next page instead of adding to it. If it fails, the mails are committed
    and the reconciler enqueues them.
    """

    def __init__(self):
        self.app = this_app()
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="enqueue-sends")
        self.pending = []

    def __call__(self, mail_ids: list[int]) -> None:
        db.session.commit()
        if mail_ids:
            self.pending.append(self.pool.submit(self._enqueue, list(mail_ids)))

    def _enqueue(self, mail_ids: list[int]) -> int:
        with self.app.app_context():
            return enqueue_sends(mail_ids)

    def finish(self) -> None:
        """Wait for the enqueueing of every committed page."""
        try:
            for future in self.pending:
                future.result()
        finally:
            self.pool.shutdown()


def _in_pages(domain, *, now: datetime) -> str:
    """Run a paged domain function (``on_page`` keyword) with a commit and the send enqueue after each page."""
    pages = _CommitThenSend()
    try:
        result = domain(db.session, now=now, on_page=pages)
        db.session.commit()
    finally:
        pages.finish()
    return str(result)


@job(REMIND)
def send_due_reminders(*, now: datetime) -> str:
    """Queue the automatic reminders due now, a committed page at a time."""
    return _in_pages(queue_due_reminders, now=now)


@job(EXPIRE)
def expire_requests(*, now: datetime) -> str:
    """Expire requests past their deadline and mail each batch owner one summary per wave."""
    return _in_pages(expire_due, now=now)

"""Entry points for periodic jobs: each takes ``now`` from the clock, calls the domain, commits."""
from __future__ import annotations

import importlib
from datetime import datetime

from ..batches import refresh_batch_statuses
from ..extensions import db
from ..models import utcnow


def run_periodic(func_path: str) -> object:
    """What the scheduler enqueues: import ``func_path`` and call it with the current time."""
    module_name, _, attr = func_path.rpartition(".")
    func = getattr(importlib.import_module(module_name), attr)
    return func(now=utcnow())


def rollup_batches(*, now: datetime) -> int:
    """Close batches whose requests have all been dispatched."""
    changed = refresh_batch_statuses(db.session, now=now)
    db.session.commit()
    return changed


def reconcile_stuck_work(*, now: datetime) -> str:
    """Re-enqueue requests and mails whose job was lost (Redis flush) or died with its worker."""
    from datetime import timedelta

    from flask import current_app

    from ..extensions import get_redis
    from ..reconciler import reconcile

    result = reconcile(db.session, redis=get_redis(), app=current_app._get_current_object(), now=now,
                       stale_after=timedelta(seconds=current_app.config["RECONCILE_AFTER_SECONDS"]))
    return str(result)


def _commit_and_send(mail_ids: list[int]) -> None:
    """After each page: commit (short locks, nothing lost on a crash later), then hand the mails to the queue."""
    from ..pipeline import enqueue_sends

    db.session.commit()
    enqueue_sends(mail_ids)


def send_due_reminders(*, now: datetime) -> str:
    """Queue the automatic reminders due now, a committed page at a time."""
    from ..reminders import queue_due_reminders

    result = queue_due_reminders(db.session, now=now, on_page=_commit_and_send)
    db.session.commit()
    return str(result)


def expire_requests(*, now: datetime) -> str:
    """Expire requests past their deadline and mail each batch owner one summary per wave."""
    from ..expiry import expire_due

    result = expire_due(db.session, now=now, on_page=_commit_and_send)
    db.session.commit()
    return str(result)

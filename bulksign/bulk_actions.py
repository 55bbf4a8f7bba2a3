"""Staff actions on many requests at once, through the domain function that owns each action.

The dashboard runs small selections in the request and hands large ones ("select all N
matching") to a job on the ``default`` queue, so a 100,000-row reminder never holds a web worker.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from .batches import cancel_batch, cancel_requests, retry_failed
from .models import User
from .pipeline import enqueue_sends
from .reconciler import revive_renders
from .reminders import send_manual_reminders
from .resend import resend_with_new_link

#: Actions on selected requests; ``cancel_batch`` acts on the whole batch.
ACTIONS = ("remind", "resend", "retry", "cancel")
#: Larger selections run in a job.
INLINE_LIMIT = 1000


@dataclass(frozen=True)
class BulkOutcome:
    action: str
    #: Requests the action applied to (reminded, resent, retried, cancelled).
    done: int
    #: reason → how many requests were skipped for it (reminders and resends).
    skipped: dict[str, int] = field(default_factory=dict)
    mail_ids: tuple[int, ...] = field(default=(), repr=False)
    render_ids: tuple[int, ...] = field(default=(), repr=False)
    #: The earliest and latest new deadline a resend with extra days gave.
    deadlines: tuple[datetime, datetime] | None = None


def apply_action(session: Session, *, action: str, batch_id: int, request_ids: list[int], user: User,
                 now: datetime, extend_days: int | None = None, force: bool = False) -> BulkOutcome:
    """Run one bulk action (``force``: remind even within the hour). The caller commits, then calls ``follow_up``.

    Refusals raise ``BatchActionError``.
    """
    if action == "cancel_batch":
        return BulkOutcome(action, len(cancel_batch(session, batch_id=batch_id, user=user, now=now).cancelled))
    if action == "cancel":
        return BulkOutcome(action, len(cancel_requests(session, request_ids=request_ids, user=user, now=now).cancelled))
    if action == "retry":
        retried = retry_failed(session, batch_id=batch_id, user=user, now=now, request_ids=request_ids).retried
        return BulkOutcome(action, len(retried), render_ids=tuple(retried))
    if action == "remind":
        result = send_manual_reminders(session, batch_id=batch_id, user=user, now=now, request_ids=request_ids,
                                       force=force)
        return BulkOutcome(action, result.queued, dict(result.skipped), mail_ids=tuple(result.mail_ids))
    if action == "resend":
        result = resend_with_new_link(session, request_ids=request_ids, user=user, now=now, extend_days=extend_days)
        return BulkOutcome(action, result.resent, dict(result.skipped), mail_ids=tuple(result.mail_ids),
                           deadlines=result.deadlines)
    raise ValueError(f"unknown bulk action {action!r}")


def follow_up(outcome: BulkOutcome) -> None:
    """After the commit: queue the mails and renders the action created."""
    if outcome.mail_ids:
        enqueue_sends(list(outcome.mail_ids))
    if outcome.render_ids:
        revive_renders(list(outcome.render_ids))

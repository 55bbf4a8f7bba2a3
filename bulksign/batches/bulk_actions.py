"""Staff actions on many requests at once, through the domain function that owns each action.

The dashboard and the API run small selections in the request and hand large ones ("select all N
matching", a big batch's cancel, a long id list) to a job on the ``default`` queue, so a 200,000-row
cancel never holds a web worker. The job commits one slice at a time: its row locks are brief and
the progress bar moves while it runs.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.batches import counts as batch_counts
from bulksign.batches.manual_reminders import send_manual_reminders
from bulksign.batches.progress import (
    BatchActionError,
    batch_for_action,
    batch_for_retry,
    cancel_batch,
    cancel_requests,
    counts_for,
    open_request_ids,
    retry_failed,
    stop_batch,
)
from bulksign.batches.recipients_table import RecipientFilter
from bulksign.batches.reconciler import revive_renders
from bulksign.batches.resend import resend_with_new_link
from bulksign.core.messages import N_
from bulksign.models import Batch, SigningRequest, User
from bulksign.models.status import WAITING_FOR_RECIPIENT, BatchStatus, Status
from bulksign.work.pipeline import enqueue_sends
from bulksign.work.queues import BULK_BY_FILTER, BULK_BY_IDS

#: Actions on selected requests; ``cancel_batch`` acts on the whole batch.
ACTIONS = ("remind", "resend", "retry", "cancel")
#: Larger selections run in a job.
INLINE_LIMIT = 1000
#: Requests a background bulk job acts on per commit.
JOB_SLICE = 1000


@dataclass(frozen=True)
class BulkOutcome:
    action: str
    #: Requests the action applied to (reminded, resent, retried, cancelled).
    done: int
    #: reason → how many requests were skipped for it (reminders and resends).
    skipped: dict[str, int] = field(default_factory=dict)
    mail_ids: tuple[int, ...] = field(default=(), repr=False)
    render_ids: tuple[int, ...] = field(default=(), repr=False)
    #: Requests left to the background job ``follow_up`` queues (a big batch's cancel has stopped the batch already).
    in_background: int = 0
    job: dict | None = field(default=None, repr=False)
    #: The earliest and latest new deadline a resend with extra days gave.
    deadlines: tuple[datetime, datetime] | None = None
    #: Of those resent, the requests that stay bounced: another party's returned invitation still stands.
    still_bounced: int = 0


def _awaiting_approval(session: Session, *, batch_id: int) -> bool:
    return session.scalar(select(Batch.status).where(Batch.id == batch_id)) == BatchStatus.AWAITING_APPROVAL


def apply_action(
    session: Session,
    *,
    action: str,
    batch_id: int,
    request_ids: list[int] | None,
    user: User,
    now: datetime,
    extend_days: int | None = None,
    selector: str | None = None,
    force: bool = False,
    role: str | None = None,
    inline: bool = False,
) -> BulkOutcome:
    """Run one bulk action, or prepare its job past ``INLINE_LIMIT`` requests (``inline``: the job itself runs
    it). The caller commits, then calls ``follow_up``. Refusals raise ``BatchActionError``. ``request_ids``
    None: all the batch's failed (retry), or the requests ``selector`` names (remind); ``force``: remind even
    within the hour; ``role``: remind or resend that party of each request instead of its recipient."""
    if action not in ("cancel_batch", "cancel") and _awaiting_approval(session, batch_id=batch_id):
        # A retried request would be rendered and mailed before anyone approved the batch.
        raise BatchActionError(N_("This batch is waiting for approval: nothing of it can be sent yet."), 409)
    if action == "cancel_batch":
        if (n := open_count(session, batch_id=batch_id)) > INLINE_LIMIT and not inline:
            stop_batch(session, batch_id=batch_id, user=user, now=now)
            return _later("cancel", n, batch_id=batch_id, user=user)
        return BulkOutcome(action, len(cancel_batch(session, batch_id=batch_id, user=user, now=now).cancelled))
    if request_ids is not None:
        n = len(request_ids)
    else:
        n = failed_count(session, batch_id=batch_id) if action == "retry" else waiting_count(session, batch_id=batch_id)
    if n > INLINE_LIMIT and not inline:
        # Refuse now what the job would refuse; the rest of the checks are per request, in the job.
        (batch_for_retry if action == "retry" else batch_for_action)(session, batch_id=batch_id, user=user)
        return _later(
            action,
            n,
            batch_id=batch_id,
            user=user,
            request_ids=request_ids,
            extend_days=extend_days,
            selector=selector,
            force=force,
            role=role,
        )
    if action == "cancel":
        return BulkOutcome(action, len(cancel_requests(session, request_ids=request_ids, user=user, now=now).cancelled))
    if action == "retry":
        retried = retry_failed(session, batch_id=batch_id, user=user, now=now, request_ids=request_ids).retried
        return BulkOutcome(action, len(retried), render_ids=tuple(retried))
    if action == "remind":
        result = send_manual_reminders(
            session,
            batch_id=batch_id,
            user=user,
            now=now,
            request_ids=request_ids,
            selector=selector if request_ids is None else None,
            force=force,
            role=role,
        )
        return BulkOutcome(action, result.queued, dict(result.skipped), mail_ids=tuple(result.mail_ids))
    if action == "resend":
        result = resend_with_new_link(
            session, request_ids=request_ids, user=user, now=now, extend_days=extend_days, role=role
        )
        return BulkOutcome(
            action,
            result.resent,
            dict(result.skipped),
            mail_ids=tuple(result.mail_ids),
            deadlines=result.deadlines,
            still_bounced=result.still_bounced,
        )
    raise ValueError(f"unknown bulk action {action!r}")


def run_staff_action(
    session: Session,
    *,
    action: str,
    batch_id: int,
    request_ids: list[int] | None,
    user: User,
    now: datetime,
    extend_days: int | None = None,
    selector: str | None = None,
    force: bool = False,
    role: str | None = None,
    inline: bool = False,
) -> BulkOutcome:
    """The one way views and jobs run a staff action: ``apply_action``, commit, then ``follow_up`` (mails,
    renders, the job). A refusal rolls the session back and raises ``BatchActionError`` for the caller to word."""
    try:
        outcome = apply_action(
            session,
            action=action,
            batch_id=batch_id,
            request_ids=request_ids,
            user=user,
            now=now,
            extend_days=extend_days,
            selector=selector,
            force=force,
            role=role,
            inline=inline,
        )
    except BatchActionError:
        session.rollback()
        raise
    # Jobs are enqueued only after the commit: a worker must find the rows the action wrote.
    session.commit()
    follow_up(outcome)
    return outcome


def _later(
    action: str,
    n: int,
    *,
    batch_id: int,
    user: User,
    request_ids: list[int] | None = None,
    extend_days: int | None = None,
    selector: str | None = None,
    force: bool = False,
    role: str | None = None,
) -> BulkOutcome:
    return BulkOutcome(
        action,
        0,
        in_background=n,
        job={
            "action": action,
            "batch_id": batch_id,
            "user_id": user.id,
            "request_ids": request_ids,
            "extend_days": extend_days,
            "selector": selector,
            "force": force,
            "role": role,
        },
    )


def follow_up(outcome: BulkOutcome) -> None:
    """After the commit: queue the mails and renders the action created, or the job that does the action."""
    if outcome.mail_ids:
        enqueue_sends(list(outcome.mail_ids))
    if outcome.render_ids:
        revive_renders(list(outcome.render_ids))
    if outcome.job:
        enqueue_bulk(**outcome.job)


def open_count(session: Session, *, batch_id: int) -> int:
    """How many requests a cancel of the whole batch would stop (from the counters)."""
    return counts_for(session, [batch_id])[batch_id].cancellable


def failed_count(session: Session, *, batch_id: int) -> int:
    """How many failed requests a retry of the whole batch would take up (from the counters)."""
    return batch_counts.counters(session, [batch_id])[batch_id]["failed"]


def waiting_count(session: Session, *, batch_id: int) -> int:
    """How many requests wait for their recipient (what a remind-all may reach; from the counters)."""
    counts = batch_counts.counters(session, [batch_id])[batch_id]
    return sum(counts[status] for status in WAITING_FOR_RECIPIENT)


def reachable_ids(session: Session, *, action: str, batch_id: int) -> list[int]:
    """Every request of the batch a whole-batch ``cancel`` or ``retry`` acts on, in id order."""
    if action == "cancel":
        return open_request_ids(session, batch_id=batch_id)
    if action == "retry":
        return list(
            session.scalars(
                select(SigningRequest.id)
                .where(SigningRequest.batch_id == batch_id, SigningRequest.status == Status.FAILED)
                .order_by(SigningRequest.id)
            )
        )
    raise ValueError(f"no whole-batch selection for {action!r}")


def enqueue_bulk(
    *,
    action: str,
    batch_id: int,
    user_id: int,
    request_ids: list[int] | None = None,
    flt: RecipientFilter | None = None,
    extend_days: int | None = None,
    selector: str | None = None,
    force: bool = False,
    role: str | None = None,
) -> str:
    """Run ``action`` in a background job on ``request_ids``, on the rows matching ``flt``, or (neither given)
    on the ``selector``'s requests (remind) or ``reachable_ids``; returns the job's id."""
    if flt is not None:
        handle, args = BULK_BY_FILTER, (batch_id, action, user_id, flt.status, flt.q, extend_days, force)
    else:
        handle, args = BULK_BY_IDS, (batch_id, action, user_id, request_ids, extend_days, selector, force, role)
    return handle.enqueue(*args, job_id=handle.job_id(batch_id=batch_id, action=action, nonce=uuid.uuid4().hex[:12])).id

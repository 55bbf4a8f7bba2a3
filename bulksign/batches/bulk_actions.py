"""Staff actions on many requests at once, through the domain function that owns each action; large selections
run in a job on the ``default`` queue, one slice per commit."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bulksign.batches import counts as batch_counts
from bulksign.batches.manual_reminders import send_manual_reminders
from bulksign.batches.progress import (
    CANCELLABLE,
    BatchActionError,
    CancelResult,
    batch_for_action,
    batch_for_retry,
    cancel_batch,
    cancel_reason,
    cancel_requests,
    counts_for,
    open_request_ids,
    retry_failed,
    stop_batch,
)
from bulksign.batches.recipients_table import RecipientFilter, count_matching, resolve_selection
from bulksign.batches.reconciler import revive_renders
from bulksign.batches.resend import resend_with_new_link
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.core.slicing import slices
from bulksign.models import Batch, SigningRequest, User
from bulksign.models.status import WAITING_FOR_RECIPIENT, BatchStatus, Status
from bulksign.work.pipeline import enqueue_sends
from bulksign.work.queues import BULK_BY_FILTER, BULK_BY_IDS

logger = logging.getLogger(__name__)


class BulkAction(StrEnum):
    """A staff action on many requests; ``CANCEL_BATCH`` acts on the whole batch."""

    REMIND = "remind"
    RESEND = "resend"
    RETRY = "retry"
    CANCEL = "cancel"
    CANCEL_BATCH = "cancel_batch"


#: Actions on selected requests.
ACTIONS = (BulkAction.REMIND, BulkAction.RESEND, BulkAction.RETRY, BulkAction.CANCEL)
#: The actions that cancel, and take a reason.
CANCELS = (BulkAction.CANCEL_BATCH, BulkAction.CANCEL)
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
    job: dict[str, Any] | None = field(default=None, repr=False)
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
    reason: str | None = None,
) -> BulkOutcome:
    """Run one bulk action, or prepare its job past ``INLINE_LIMIT`` requests (``inline``: the job runs it). The
    caller commits, then calls ``follow_up``; refusals raise ``BatchActionError``. ``request_ids`` None: the batch's
    failed (retry) or ``selector``'s (remind); ``role``: that party instead of the recipient."""
    if action not in CANCELS and _awaiting_approval(session, batch_id=batch_id):
        # A retried request would be rendered and mailed before anyone approved the batch.
        raise BatchActionError(N_("This batch is waiting for approval: nothing of it can be sent yet."), 409)
    reason = cancel_reason(reason) if action in CANCELS else None
    if action == BulkAction.CANCEL_BATCH:
        if (n := open_count(session, batch_id=batch_id)) > INLINE_LIMIT and not inline:
            stop_batch(session, batch_id=batch_id, user=user, now=now, reason=reason)
            return _later(BulkAction.CANCEL, n, batch_id=batch_id, user=user, reason=reason)
        return _cancelled(action, cancel_batch(session, batch_id=batch_id, user=user, now=now, reason=reason))
    if request_ids is not None:
        n = len(request_ids)
    else:
        n = (
            failed_count(session, batch_id=batch_id)
            if action == BulkAction.RETRY
            else waiting_count(session, batch_id=batch_id)
        )
    if n > INLINE_LIMIT and not inline:
        # Refuse now what the job would refuse; the rest of the checks are per request, in the job.
        (batch_for_retry if action == BulkAction.RETRY else batch_for_action)(session, batch_id=batch_id, user=user)
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
            reason=reason,
        )
    if action == BulkAction.CANCEL:
        return _cancelled(
            action, cancel_requests(session, request_ids=request_ids or [], user=user, now=now, reason=reason)
        )
    if action == BulkAction.RETRY:
        retried = retry_failed(session, batch_id=batch_id, user=user, now=now, request_ids=request_ids).retried
        return BulkOutcome(action, len(retried), render_ids=tuple(retried))
    if action == BulkAction.REMIND:
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
    if action == BulkAction.RESEND:
        resent = resend_with_new_link(
            session, request_ids=request_ids or [], user=user, now=now, extend_days=extend_days, role=role
        )
        return BulkOutcome(
            action,
            resent.resent,
            dict(resent.skipped),
            mail_ids=tuple(resent.mail_ids),
            deadlines=resent.deadlines,
            still_bounced=resent.still_bounced,
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
    reason: str | None = None,
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
            reason=reason,
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
    reason: str | None = None,
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
            "reason": reason,
        },
    )


def _cancelled(action: str, result: CancelResult) -> BulkOutcome:
    return BulkOutcome(action, len(result.cancelled), mail_ids=result.mail_ids)


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
    return batch_counts.counters(session, [batch_id])[batch_id][Status.FAILED]


def waiting_count(session: Session, *, batch_id: int) -> int:
    """How many requests wait for their recipient (what a remind-all may reach; from the counters)."""
    counts = batch_counts.counters(session, [batch_id])[batch_id]
    return sum(counts[status] for status in WAITING_FOR_RECIPIENT)


def cancellable_count(session: Session, *, request_ids: Sequence[int]) -> int:
    """How many of these requests a cancel would stop."""
    return sum(
        session.scalar(
            select(func.count())
            .select_from(SigningRequest)
            .where(SigningRequest.id.in_(part), SigningRequest.status.in_(CANCELLABLE))
        )
        or 0
        for part in slices(list(request_ids))
    )


def reachable_ids(session: Session, *, action: str, batch_id: int) -> list[int]:
    """Every request of the batch a whole-batch ``cancel`` or ``retry`` acts on, in id order."""
    if action == BulkAction.CANCEL:
        return open_request_ids(session, batch_id=batch_id)
    if action == BulkAction.RETRY:
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
    reason: str | None = None,
) -> str:
    """Run ``action`` in a background job on ``request_ids``, on the rows matching ``flt``, or (neither given)
    on the ``selector``'s requests (remind) or ``reachable_ids``; returns the job's id."""
    args: tuple[Any, ...]
    if flt is not None:
        handle, args = BULK_BY_FILTER, (batch_id, action, user_id, flt.status, flt.q, extend_days, force, reason)
    else:
        handle = BULK_BY_IDS
        args = (batch_id, action, user_id, request_ids, extend_days, selector, force, role, reason)
    return handle.enqueue(*args, job_id=handle.job_id(batch_id=batch_id, action=action, nonce=uuid.uuid4().hex[:12])).id


@dataclass(frozen=True)
class SelectionOutcome:
    """A staff action on a selection: done at once (``outcome``), or left to a worker (``queued``: the rows
    matching)."""

    outcome: BulkOutcome | None = None
    queued: int = 0


def act_on_selection(
    session: Session,
    *,
    action: str,
    batch_id: int,
    request_ids: list[int],
    select_all: bool,
    flt: RecipientFilter,
    user: User,
    now: datetime,
    extend_days: int | None = None,
    force: bool = False,
    reason: str | None = None,
) -> SelectionOutcome:
    """``action`` on the ticked rows, or on every row matching ``flt`` (``select_all``): a worker's job past
    ``INLINE_LIMIT`` rows, else ``run_staff_action`` at once; ``cancel_batch`` takes the whole batch.
    BatchActionError for an unknown action or an empty selection."""
    ids: list[int] = []
    if action != BulkAction.CANCEL_BATCH:
        if action not in ACTIONS:
            raise BatchActionError(N_("Choose an action for the selected recipients."))
        if select_all:
            matching = count_matching(session, batch_id=batch_id, flt=flt)
            if matching > INLINE_LIMIT:
                # The job by filter takes a status and a search only (jobs.bulk): a "waiting for <role>" selection
                # is resolved here, so the job acts on those rows, not on every row of that status.
                waiting = None
                if flt.waiting_for:
                    resolved = resolve_selection(session, batch_id=batch_id, request_ids=[], select_all=True, flt=flt)
                    waiting = list(resolved.request_ids)
                enqueue_bulk(
                    action=action,
                    batch_id=batch_id,
                    user_id=user.id,
                    flt=None if waiting is not None else flt,
                    request_ids=waiting,
                    extend_days=extend_days,
                    force=force,
                    reason=reason,
                )
                log(logger, logging.INFO, "bulk action queued", batch_id=batch_id, action=action, requests=matching)
                return SelectionOutcome(queued=matching)
        selection = resolve_selection(
            session, batch_id=batch_id, request_ids=request_ids, select_all=select_all, flt=flt
        )
        ids = list(selection.request_ids)
        if not ids:
            raise BatchActionError(N_('Select at least one recipient (tick the rows, or "select all matching") first.'))
    outcome = run_staff_action(
        session,
        action=action,
        batch_id=batch_id,
        request_ids=ids,
        user=user,
        now=now,
        extend_days=extend_days,
        force=force,
        reason=reason,
    )
    log(logger, logging.INFO, "bulk action", batch_id=batch_id, action=action, requests=len(ids), user_id=user.id)
    return SelectionOutcome(outcome=outcome)

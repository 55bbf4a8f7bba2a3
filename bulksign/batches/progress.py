"""Batch status, derived from its requests: counts come from the per-batch counters (``batch_counts``).

Pages read the counters; closing a batch counts its requests exactly (GROUP BY), because it runs in
the transaction that just moved them, whose moves the counters see only at commit.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, func, select, update
from sqlalchemy.orm import Session

from bulksign.batches import counts as batch_counts
from bulksign.batches import notices
from bulksign.batches.cancel_notices import tell_cancelled
from bulksign.batches.states import move_batches, transition
from bulksign.core.errors import BulksignError, Message
from bulksign.core.logs import log
from bulksign.core.messages import N_, N_plural
from bulksign.core.slicing import slices
from bulksign.mail.mail_headers import CONTROL_CHARACTERS
from bulksign.models import Batch, BatchStatusCount, OutgoingMail, SigningRequest, User
from bulksign.models.mail import MailStatus
from bulksign.models.status import (
    BATCH_AWAITING,
    BATCH_CANCELLABLE,
    BATCH_DISPATCHED,
    BATCH_FINAL,
    BATCH_TRANSITIONS,
    FINAL,
    WAITING_FOR_RECIPIENT,
    WORKING,
    BatchStatus,
    Status,
)
from bulksign.people import access

logger = logging.getLogger(__name__)

B = BatchStatus


@dataclass(frozen=True)
class BatchCounts:
    #: status → number of requests, for every status (zeros included).
    by_status: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.by_status.values())

    @property
    def working(self) -> int:
        return sum(self.by_status[s] for s in WORKING)

    @property
    def failed(self) -> int:
        return self.by_status[Status.FAILED] + self.by_status[Status.BOUNCED]

    @property
    def cancellable(self) -> int:
        """Requests a cancel of the whole batch would still stop."""
        return sum(self.by_status[s] for s in CANCELLABLE)


def counts_for(session: Session, batch_ids: Iterable[int]) -> dict[int, BatchCounts]:
    """Counts per status for each batch from its counters (one query on their key), as last committed."""
    return {bid: BatchCounts(by_status=counts) for bid, counts in batch_counts.counters(session, batch_ids).items()}


def exact_counts_for(session: Session, batch_ids: Iterable[int]) -> dict[int, BatchCounts]:
    """Counts per status for each batch from its requests (GROUP BY), this transaction's moves included."""
    return {bid: BatchCounts(by_status=counts) for bid, counts in batch_counts.recount(session, batch_ids).items()}


def settled_status(counts: BatchCounts) -> BatchStatus | None:
    """Where a batch whose requests are ``counts`` stands once sending ended; None while the pipeline still works.

    Some recipients can still sign: awaiting signatures (partially failed when some documents could not be
    prepared or delivered); nobody can any more: all signed, or closed with the others unsigned.
    """
    if counts.working:
        return None
    if any(counts.by_status[s] for s in WAITING_FOR_RECIPIENT):
        return B.PARTIALLY_FAILED if counts.failed else B.AWAITING_SIGNATURES
    return B.ALL_SIGNED if counts.by_status[Status.SIGNED] == counts.total else B.CLOSED


#: The batches ``move_batches_on`` moves: those whose end can still come without staff acting.
_UNSETTLED = (B.PROCESSING, *sorted(BATCH_AWAITING))


#: When the batch's last link expires: its requests' latest deadline, read in the UPDATE that moves it.
_LAST_EXPIRY = select(func.max(SigningRequest.expires_at)).where(SigningRequest.batch_id == Batch.id).scalar_subquery()


def refresh_batch_statuses(session: Session, *, now: datetime, batch_ids: Iterable[int] | None = None) -> int:
    """``move_batches_on``; returns how many moved."""
    return len(move_batches_on(session, now=now, batch_ids=batch_ids))


def move_batches_on(session: Session, *, now: datetime, batch_ids: Iterable[int] | None = None) -> list[int]:
    """Move batches to where their requests say they stand (``settled_status``) and queue the notice of their end:
    processing → awaiting signatures → all signed | closed. Without ``batch_ids`` it reads the committed counters
    for the awaiting batches nobody can sign any more. Returns the ids moved."""
    if batch_ids is None:
        ids = [*session.scalars(select(Batch.id).where(Batch.status == B.PROCESSING)), *_nobody_left(session)]
    else:
        ids = list(session.scalars(select(Batch.id).where(Batch.id.in_(list(batch_ids)), Batch.status.in_(_UNSETTLED))))
    moved = []
    # Exact: the caller may have just moved requests of these batches, not yet in the counters.
    for batch_id, counts in exact_counts_for(session, list(ids)).items():
        target = settled_status(counts)
        if target is None:
            continue
        # Sending ended now unless it had before (a late bounce, an expiry, the last signature).
        fields: dict[str, object] = {
            "finished_at": func.coalesce(Batch.finished_at, now),
            "last_expires_at": _LAST_EXPIRY,
        }
        if target in BATCH_FINAL:
            fields["settled_at"] = now
        frm = [s for s in _UNSETTLED if s != target and target in BATCH_TRANSITIONS[s]]
        if frm and move_batches(session, batch_id, frm=frm, to=target, **fields):
            moved.append(batch_id)
            log(logger, logging.INFO, "batch moved", batch_id=batch_id, status=target)
            batch = session.get_one(Batch, batch_id)
            if target == B.ALL_SIGNED:
                notices.queue_all_signed_notice(session, batch=batch, now=now)
            elif target == B.CLOSED:
                notices.queue_completion_notice(session, batch=batch, now=now)
    return moved


def _nobody_left(session: Session) -> list[int]:
    """Awaiting batches whose committed counters show no request in the pipeline nor with the recipient."""
    open_states = [s.value for s in WORKING | WAITING_FOR_RECIPIENT]
    still = func.sum(case((BatchStatusCount.status.in_(open_states), BatchStatusCount.count), else_=0))
    return list(
        session.scalars(
            select(BatchStatusCount.batch_id)
            .join(Batch, Batch.id == BatchStatusCount.batch_id)
            .where(Batch.status.in_(sorted(BATCH_AWAITING)))
            .group_by(BatchStatusCount.batch_id)
            .having(still == 0)
        )
    )


def close_if_done(session: Session, *, batch_id: int, now: datetime) -> bool:
    """After a request of the batch was dispatched: move the batch on (``move_batches_on``) if the pipeline has
    nothing left to do for it, to awaiting signatures or to its end. The caller commits.

    One indexed existence probe per call; the full GROUP BY runs only when the batch may be done,
    so a 10,000-request batch does not count itself 10,000 times.
    """
    busy = session.scalar(
        select(SigningRequest.id)
        .where(SigningRequest.batch_id == batch_id, SigningRequest.status.in_([s.value for s in WORKING]))
        .limit(1)
    )
    return busy is None and bool(move_batches_on(session, now=now, batch_ids=[batch_id]))


#: Batches that go back to processing when staff send some of their requests again (retry, resend).
REOPENABLE = tuple(sorted(s for s in BATCH_DISPATCHED if B.PROCESSING in BATCH_TRANSITIONS[s]))


def mark_batch_started(session: Session, *, batch_id: int, now: datetime) -> bool:
    """pending → processing when its first request starts moving; the caller commits."""
    return bool(move_batches(session, batch_id, frm=B.PENDING, to=B.PROCESSING, started_at=now))


class BatchActionError(BulksignError):
    """A staff action that cannot be done; ``status`` is the HTTP status a view should answer."""

    def __init__(self, message: Message, status: int = 400):
        super().__init__(message, status=status)


#: States a cancel stops: anything not final (failed and bounced are final already).
CANCELLABLE = tuple(s.value for s in Status if s not in FINAL)


@dataclass(frozen=True)
class CancelResult:
    batch_id: int | None
    #: Requests moved to ``cancelled`` by this call.
    cancelled: tuple[int, ...]
    #: The notices to the parties already invited (``cancel_notices``): send them after the commit.
    mail_ids: tuple[int, ...] = ()


#: The longest reason a cancel takes (it goes into mails and onto the link's page).
MAX_CANCEL_REASON = 1000


def cancel_reason(given: str | None) -> str | None:
    """The reason staff gave for a cancel, on one line (None when none); BatchActionError 422 when too long."""
    reason = " ".join(CONTROL_CHARACTERS.sub(" ", given or "").split())
    if len(reason) > MAX_CANCEL_REASON:
        raise BatchActionError(
            N_plural(
                "The reason is longer than %(num)s character.",
                "The reason is longer than %(num)s characters.",
                MAX_CANCEL_REASON,
            ),
            422,
        )
    return reason or None


@dataclass(frozen=True)
class RetryResult:
    batch_id: int
    #: Requests moved from ``failed`` back to ``pending``: enqueue their renders after the commit.
    retried: tuple[int, ...]


def batch_for_action(session: Session, *, batch_id: int, user: User) -> Batch:
    """The batch if ``user`` may act on it (``access``); BatchActionError 404 when out of sight, 403 when read only."""
    try:
        return access.batch_for_action(session, batch_id=batch_id, user=user)
    except access.Refused as exc:
        raise BatchActionError(exc.message, exc.status) from None


def _cancel(
    session: Session, *, request_ids: list[int], actor: str, now: datetime, reason: str | None
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Cancel what is still open of ``request_ids``, with ``reason``: the moved ones and their notices' mail ids.
    Their links stay (a cancelled request's page says it was cancelled, and why: ``page_state``); queued mails of
    these requests are not sent."""
    won = transition(
        session, request_ids, frm=CANCELLABLE, to=Status.CANCELLED, now=now, actor=actor, cancel_reason=reason
    ).won
    for part in slices(won):
        session.execute(
            update(OutgoingMail)
            .where(OutgoingMail.request_id.in_(part), OutgoingMail.status == MailStatus.QUEUED)
            .values(status=MailStatus.CANCELLED)
        )
    return won, tuple(tell_cancelled(session, request_ids=won, now=now))


def stop_batch(session: Session, *, batch_id: int, user: User, now: datetime, reason: str | None = None) -> None:
    """Mark a batch cancelled (with staff's ``reason``) without touching its requests (``open_request_ids`` then go
    through ``cancel_requests`` in slices, in a job). The caller commits."""
    batch = batch_for_action(session, batch_id=batch_id, user=user)
    move_batches(
        session,
        batch.id,
        frm=BATCH_CANCELLABLE,
        to=B.CANCELLED,
        cancelled_at=now,
        finished_at=now,
        cancel_reason=reason,
    )


def open_request_ids(session: Session, *, batch_id: int) -> list[int]:
    """The batch's requests a cancel would stop, in id order."""
    return list(
        session.scalars(
            select(SigningRequest.id)
            .where(SigningRequest.batch_id == batch_id, SigningRequest.status.in_(CANCELLABLE))
            .order_by(SigningRequest.id)
        )
    )


def cancel_batch(
    session: Session, *, batch_id: int, user: User, now: datetime, reason: str | None = None
) -> CancelResult:
    """Stop a batch: every request not yet final is cancelled, its page says so, and its parties already invited
    are told why. The caller commits, then sends ``mail_ids``."""
    stop_batch(session, batch_id=batch_id, user=user, now=now, reason=reason)
    won, mail_ids = _cancel(
        session,
        request_ids=open_request_ids(session, batch_id=batch_id),
        actor=f"user:{user.id}",
        now=now,
        reason=reason,
    )
    log(logger, logging.INFO, "batch cancelled", batch_id=batch_id, user_id=user.id, requests=len(won))
    return CancelResult(batch_id=batch_id, cancelled=won, mail_ids=mail_ids)


def cancel_requests(
    session: Session, *, request_ids: Iterable[int], user: User, now: datetime, reason: str | None = None
) -> CancelResult:
    """Cancel some requests (of batches the user may act on), their parties already invited told ``reason``; the
    batch closes if nothing is left. The caller commits, then sends ``mail_ids``."""
    ids = sorted(set(request_ids))
    batch_ids = {
        batch_id
        for part in slices(ids)
        for batch_id in session.scalars(select(SigningRequest.batch_id).where(SigningRequest.id.in_(part)).distinct())
    }
    for batch_id in batch_ids:
        batch_for_action(session, batch_id=batch_id, user=user)
    won, mail_ids = _cancel(session, request_ids=ids, actor=f"user:{user.id}", now=now, reason=reason)
    refresh_batch_statuses(session, now=now, batch_ids=batch_ids)
    log(logger, logging.INFO, "requests cancelled", user_id=user.id, requests=len(won))
    return CancelResult(batch_id=batch_ids.pop() if len(batch_ids) == 1 else None, cancelled=won, mail_ids=mail_ids)


def cancel_if_batch_stopped(session: Session, *, request_ids: Iterable[int], now: datetime) -> set[int]:
    """Cancel those of ``request_ids`` whose batch is cancelled, with the batch's reason, and return them; the caller
    commits. The pipeline asks this first, so nothing is rendered or sent for a batch stopped already."""
    stopped: dict[str | None, list[int]] = {}
    for part in slices(sorted(set(request_ids))):
        for request_id, reason in session.execute(
            select(SigningRequest.id, Batch.cancel_reason)
            .join(Batch, Batch.id == SigningRequest.batch_id)
            .where(SigningRequest.id.in_(part), Batch.status == B.CANCELLED)
        ):
            stopped.setdefault(reason, []).append(request_id)
    return {
        request_id
        for reason, ids in stopped.items()
        for request_id in _cancel(session, request_ids=ids, actor="system", now=now, reason=reason)[0]
    }


def batch_for_retry(session: Session, *, batch_id: int, user: User) -> Batch:
    """The batch, if the user may retry its failed requests; else ``BatchActionError``."""
    batch = batch_for_action(session, batch_id=batch_id, user=user)
    if batch.status == B.CANCELLED:
        raise BatchActionError(N_("The batch was cancelled; its requests cannot be retried."), 409)
    return batch


def retry_failed(
    session: Session, *, batch_id: int, user: User, now: datetime, request_ids: Iterable[int] | None = None
) -> RetryResult:
    """failed → pending for the batch's failed requests (or those of ``request_ids``). The caller commits, then enqueues renders.

    Compare-and-set: a second click finds nothing failed and retries nothing. Each retried request
    gets a fresh link and so a fresh invitation (the failed one never reached the recipient).
    """
    batch_for_retry(session, batch_id=batch_id, user=user)
    query = select(SigningRequest.id).where(SigningRequest.batch_id == batch_id, SigningRequest.status == Status.FAILED)
    query = query.where(SigningRequest.purged_at.is_(None))  # a purged row has nothing left to render or mail
    if request_ids is None:
        failed = list(session.scalars(query))
    else:
        failed = [
            i
            for part in slices(sorted(set(request_ids)))
            for i in session.scalars(query.where(SigningRequest.id.in_(part)))
        ]
    won = transition(
        session,
        failed,
        frm=Status.FAILED,
        to=Status.PENDING,
        now=now,
        actor=f"user:{user.id}",
        attempts=0,
        error_message=None,
        token_hash=None,
        token_nonce=None,
    ).won
    if won:
        move_batches(session, batch_id, frm=REOPENABLE, to=B.PROCESSING, finished_at=None, settled_at=None)
    log(logger, logging.INFO, "failed requests retried", batch_id=batch_id, user_id=user.id, requests=len(won))
    return RetryResult(batch_id=batch_id, retried=won)

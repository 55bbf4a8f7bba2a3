"""Batch status, derived from its requests: counts come from the per-batch counters (``batch_counts``).

Pages read the counters; closing a batch counts its requests exactly (GROUP BY), because it runs in
the transaction that just moved them, whose moves the counters see only at commit.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from . import batch_counts
from .logs import log
from .models import Batch, OutgoingMail, SigningRequest, User
from .states import FINAL, WORKING, Status, transition
from .messages import N_

logger = logging.getLogger(__name__)

#: Batch states; ``processing`` while any request still owes dispatch work.
PENDING, PROCESSING, COMPLETED, PARTIALLY_FAILED, CANCELLED = (
    "pending", "processing", "completed", "partially_failed", "cancelled")
BATCH_FINAL = frozenset({COMPLETED, PARTIALLY_FAILED, CANCELLED})


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


def counts_for(session: Session, batch_ids: Iterable[int]) -> dict[int, BatchCounts]:
    """Counts per status for each batch from its counters (one query on their key), as last committed."""
    return {bid: BatchCounts(by_status=counts) for bid, counts in batch_counts.counters(session, batch_ids).items()}


def exact_counts_for(session: Session, batch_ids: Iterable[int]) -> dict[int, BatchCounts]:
    """Counts per status for each batch from its requests (GROUP BY), this transaction's moves included."""
    return {bid: BatchCounts(by_status=counts) for bid, counts in batch_counts.recount(session, batch_ids).items()}


def refresh_batch_statuses(session: Session, *, now: datetime, batch_ids: Iterable[int] | None = None) -> int:
    """Move processing batches with no work left to completed or partially_failed. Returns how many moved."""
    query = select(Batch.id).where(Batch.status == PROCESSING)
    if batch_ids is not None:
        query = query.where(Batch.id.in_(list(batch_ids)))
    ids = session.scalars(query).all()
    moved = 0
    # Exact: the caller may have just moved requests of these batches, not yet in the counters.
    for batch_id, counts in exact_counts_for(session, ids).items():
        if counts.working:
            continue
        final = PARTIALLY_FAILED if counts.failed else COMPLETED
        result = session.execute(
            update(Batch).where(Batch.id == batch_id, Batch.status == PROCESSING)
            .values(status=final, finished_at=now)
        )
        if result.rowcount:
            moved += 1
            log(logger, logging.INFO, "batch finished", batch_id=batch_id, status=final)
    return moved


def close_if_done(session: Session, *, batch_id: int, now: datetime) -> bool:
    """After a request of the batch was dispatched: close the batch if nothing is left to do. The caller commits.

    One indexed existence probe per call; the full GROUP BY runs only when the batch may be done,
    so a 10,000-request batch does not count itself 10,000 times.
    """
    busy = session.scalar(select(SigningRequest.id).where(
        SigningRequest.batch_id == batch_id, SigningRequest.status.in_([s.value for s in WORKING])).limit(1))
    return busy is None and bool(refresh_batch_statuses(session, now=now, batch_ids=[batch_id]))


def mark_batch_started(session: Session, *, batch_id: int, now: datetime) -> bool:
    """pending → processing when its first request starts moving; the caller commits."""
    result = session.execute(
        update(Batch).where(Batch.id == batch_id, Batch.status == PENDING)
        .values(status=PROCESSING, started_at=now)
    )
    return bool(result.rowcount)


class BatchActionError(ValueError):
    """A staff action that cannot be done; ``status`` is the HTTP status a view should answer."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message = message
        self.status = status


#: States a cancel stops: anything not final (failed and bounced are final already).
CANCELLABLE = tuple(s.value for s in Status if s not in FINAL)


@dataclass(frozen=True)
class CancelResult:
    batch_id: int | None
    #: Requests moved to ``cancelled`` by this call.
    cancelled: tuple[int, ...]


@dataclass(frozen=True)
class RetryResult:
    batch_id: int
    #: Requests moved from ``failed`` back to ``pending``: enqueue their renders after the commit.
    retried: tuple[int, ...]


def batch_for_action(session: Session, *, batch_id: int, user: User) -> Batch:
    batch = session.get(Batch, batch_id)
    if batch is None:
        raise BatchActionError(N_("No such batch."), 404)
    if not (user.is_admin or batch.created_by_id == user.id):
        raise BatchActionError(N_("Only the batch's owner or an admin can do this."), 403)
    return batch


def _cancel(session: Session, *, request_ids: list[int], user: User, now: datetime) -> tuple[int, ...]:
    # Clearing token_hash kills links already mailed; queued mails of these requests are not sent.
    won = transition(session, request_ids, frm=CANCELLABLE, to=Status.CANCELLED, now=now,
                     actor=f"user:{user.id}", token_hash=None).won
    if won:
        session.execute(
            update(OutgoingMail).where(OutgoingMail.request_id.in_(won), OutgoingMail.status == "queued")
            .values(status="cancelled")
        )
    return won


def cancel_batch(session: Session, *, batch_id: int, user: User, now: datetime) -> CancelResult:
    """Stop a batch: every request not yet final is cancelled and its link dies. The caller commits."""
    batch = batch_for_action(session, batch_id=batch_id, user=user)
    ids = session.scalars(select(SigningRequest.id).where(SigningRequest.batch_id == batch_id,
                                                           SigningRequest.status.in_(CANCELLABLE))).all()
    won = _cancel(session, request_ids=list(ids), user=user, now=now)
    session.execute(update(Batch).where(Batch.id == batch.id, Batch.status != CANCELLED)
                    .values(status=CANCELLED, cancelled_at=now, finished_at=now))
    log(logger, logging.INFO, "batch cancelled", batch_id=batch_id, user_id=user.id, requests=len(won))
    return CancelResult(batch_id=batch_id, cancelled=won)


def cancel_requests(session: Session, *, request_ids: Iterable[int], user: User, now: datetime) -> CancelResult:
    """Cancel some requests (of batches the user may act on); the batch closes if nothing is left. The caller commits."""
    ids = list(request_ids)
    batch_ids = set(session.scalars(select(SigningRequest.batch_id).where(SigningRequest.id.in_(ids))).all())
    for batch_id in batch_ids:
        batch_for_action(session, batch_id=batch_id, user=user)
    won = _cancel(session, request_ids=ids, user=user, now=now)
    refresh_batch_statuses(session, now=now, batch_ids=batch_ids)
    log(logger, logging.INFO, "requests cancelled", user_id=user.id, requests=len(won))
    return CancelResult(batch_id=batch_ids.pop() if len(batch_ids) == 1 else None, cancelled=won)


def retry_failed(session: Session, *, batch_id: int, user: User, now: datetime,
                 request_ids: Iterable[int] | None = None) -> RetryResult:
    """failed → pending for the batch's failed requests (or those of ``request_ids``). The caller commits, then enqueues renders.

    Compare-and-set: a second click finds nothing failed and retries nothing. Each retried request
    gets a fresh link and so a fresh invitation (the failed one never reached the recipient).
    """
    batch = batch_for_action(session, batch_id=batch_id, user=user)
    if batch.status == CANCELLED:
        raise BatchActionError(N_("The batch was cancelled; its requests cannot be retried."), 409)
    query = select(SigningRequest.id).where(SigningRequest.batch_id == batch_id,
                                            SigningRequest.status == Status.FAILED)
    if request_ids is not None:
        query = query.where(SigningRequest.id.in_(list(request_ids)))
    won = transition(session, session.scalars(query).all(), frm=Status.FAILED, to=Status.PENDING, now=now,
                     actor=f"user:{user.id}", attempts=0, error_message=None, token_hash=None,
                     token_nonce=None).won
    if won:
        session.execute(update(Batch).where(Batch.id == batch_id, Batch.status.in_([COMPLETED, PARTIALLY_FAILED]))
                        .values(status=PROCESSING, finished_at=None))
    log(logger, logging.INFO, "failed requests retried", batch_id=batch_id, user_id=user.id, requests=len(won))
    return RetryResult(batch_id=batch_id, retried=won)

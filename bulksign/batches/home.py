"""What the staff home page shows: batches in flight with their bars, and what needs someone's attention, from
the per-batch counters; the caller chooses which batches count (``batch_ids``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import ColumnElement, Select, case, func, or_, select
from sqlalchemy.orm import Session

from bulksign.batches import approval_requests
from bulksign.batches.dashboard import Progress, progress_for
from bulksign.batches.progress import counts_for
from bulksign.models import Batch, BatchStatusCount, SigningRequest, User
from bulksign.models.status import WAITING_FOR_RECIPIENT, WORKING, BatchStatus, Status

#: A batch is in flight while some of its requests are being prepared, sent, or wait for the recipient.
OUTSTANDING = tuple(sorted(WORKING | WAITING_FOR_RECIPIENT))
#: Problems of batches created this recently stay on the home page after the batch is done.
RECENT = timedelta(days=14)
#: "Expiring soon": waiting requests whose link expires within this long.
EXPIRING_WITHIN = timedelta(hours=24)
IN_FLIGHT_LIMIT = 8
#: Batches listed under each kind of attention (the total counts them all).
ATTENTION_LIMIT = 5


class AttentionKind(StrEnum):
    """What asks for staff's attention, in the order the page shows them; each but ``APPROVAL`` (batches waiting for
    the viewer's approval) and ``EXPIRING`` is a request status."""

    APPROVAL = "approval"
    FAILED = "failed"
    BOUNCED = "bounced"
    EXPIRING = "expiring"
    DECLINED = "declined"


ATTENTION_KINDS = tuple(AttentionKind)
#: The kinds that are a request's status.
STATUS_KINDS = (AttentionKind.FAILED, AttentionKind.BOUNCED, AttentionKind.DECLINED)


@dataclass(frozen=True)
class FlightRow:
    batch: Batch
    progress: Progress
    signed: int


@dataclass(frozen=True)
class BatchCount:
    batch_id: int
    batch_name: str
    count: int


@dataclass(frozen=True)
class Attention:
    #: Also the recipients-table filter its links use (none for ``expiring``).
    kind: AttentionKind
    total: int
    #: The batches with the most, at most ``ATTENTION_LIMIT``.
    batches: tuple[BatchCount, ...]

    @property
    def status_filter(self) -> str | None:
        return None if self.kind in (AttentionKind.EXPIRING, AttentionKind.APPROVAL) else self.kind


@dataclass(frozen=True)
class Home:
    in_flight: tuple[FlightRow, ...]
    #: Batches in flight beyond those listed.
    more_in_flight: int
    attention: tuple[Attention, ...]

    @property
    def needs_attention(self) -> bool:
        return any(a.total for a in self.attention)


def _sum_of(statuses: Iterable[str]) -> ColumnElement[int]:
    return func.sum(case((BatchStatusCount.status.in_(list(statuses)), BatchStatusCount.count), else_=0))


def home(
    session: Session, *, now: datetime, batch_ids: Select[tuple[int]] | None = None, user: User | None = None
) -> Home:
    """Batches in flight (newest first) and attention counts over ``batch_ids`` (default: every batch), first the
    batches waiting for ``user``'s approval (counted in batches); 5 queries."""
    scope = batch_ids if batch_ids is not None else select(Batch.id)
    outstanding = _sum_of(OUTSTANDING)
    per_kind = {kind: _sum_of([kind]) for kind in STATUS_KINDS}
    rows = session.execute(
        select(Batch.id, Batch.name, outstanding, *per_kind.values())
        .join(BatchStatusCount, BatchStatusCount.batch_id == Batch.id)
        # Only the counters that can add something: most rows of finished batches are zeros.
        .where(
            Batch.id.in_(scope),
            Batch.status != BatchStatus.CANCELLED,
            BatchStatusCount.count > 0,
            BatchStatusCount.status.in_([*OUTSTANDING, *STATUS_KINDS]),
        )
        .group_by(Batch.id, Batch.name, Batch.created_at)
        .having(or_(outstanding > 0, Batch.created_at >= now - RECENT))
        .order_by(Batch.created_at.desc(), Batch.id.desc())
    ).all()
    flying = [r for r in rows if r[2] > 0]
    shown_ids = [r[0] for r in flying[:IN_FLIGHT_LIMIT]]
    batches = {b.id: b for b in session.scalars(select(Batch).where(Batch.id.in_(shown_ids)))} if shown_ids else {}
    counts = counts_for(session, shown_ids)
    in_flight = tuple(
        FlightRow(
            batch=batches[i], progress=progress_for(batches[i], counts[i]), signed=counts[i].by_status[Status.SIGNED]
        )
        for i in shown_ids
    )

    found: dict[str, list[BatchCount]] = {}
    for column, kind in enumerate(STATUS_KINDS, start=3):
        found[kind] = [BatchCount(batch_id=r[0], batch_name=r[1], count=int(r[column])) for r in rows if r[column]]
    expiring = session.execute(
        select(SigningRequest.batch_id, Batch.name, func.count())
        .join(Batch, Batch.id == SigningRequest.batch_id)
        .where(
            SigningRequest.status.in_([s.value for s in WAITING_FOR_RECIPIENT]),
            SigningRequest.expires_at >= now,
            SigningRequest.expires_at < now + EXPIRING_WITHIN,
            SigningRequest.batch_id.in_(scope),
        )
        .group_by(SigningRequest.batch_id, Batch.name)
    ).all()
    found[AttentionKind.EXPIRING] = [BatchCount(batch_id=b, batch_name=name, count=n) for b, name, n in expiring]
    waiting = approval_requests.waiting_for(session, user=user) if user is not None else []
    found[AttentionKind.APPROVAL] = [
        BatchCount(batch_id=w.batch_id, batch_name=w.batch_name, count=w.count) for w in waiting
    ]
    attention = tuple(
        Attention(
            kind=kind,
            total=len(found[kind]) if kind == AttentionKind.APPROVAL else sum(c.count for c in found[kind]),
            # The batches waiting longest for approval first; otherwise those with the most.
            batches=tuple(
                found[kind][:ATTENTION_LIMIT]
                if kind == AttentionKind.APPROVAL
                else sorted(found[kind], key=lambda c: (-c.count, -c.batch_id))[:ATTENTION_LIMIT]
            ),
        )
        for kind in ATTENTION_KINDS
    )
    return Home(in_flight=in_flight, more_in_flight=max(0, len(flying) - IN_FLIGHT_LIMIT), attention=attention)

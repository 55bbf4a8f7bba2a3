"""Which requests have passed their keeping time: their ids for the purge, and per batch how many for the
preview; batches are grouped by their periods, one query per group."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.orm import Session

from bulksign.batches.retention.periods import Policy, policies
from bulksign.core.slicing import slices
from bulksign.models import Batch, SigningRequest
from bulksign.models.status import Status

#: How an unsigned request can end: nobody will sign it unless staff send it again.
UNSIGNED_ENDED = frozenset({Status.DECLINED, Status.EXPIRED, Status.CANCELLED, Status.FAILED, Status.BOUNCED})


def due_condition(policy: Policy, *, now: datetime) -> ColumnElement[bool]:
    """The requests of a batch under ``policy`` whose time has passed at ``now`` (not yet purged)."""
    unsigned = and_(
        SigningRequest.status.in_([s.value for s in UNSIGNED_ENDED]),
        SigningRequest.status_changed_at <= now - timedelta(days=policy.keep_unsigned_days),
    )
    if policy.keep_signed_days is not None:
        signed = and_(
            SigningRequest.status == Status.SIGNED.value,
            SigningRequest.signed_at <= now - timedelta(days=policy.keep_signed_days),
        )
        unsigned = or_(unsigned, signed)
    return and_(SigningRequest.purged_at.is_(None), unsigned)


def by_policy(session: Session) -> dict[Policy, list[int]]:
    """Batch ids not on hold, grouped by their periods: one query per group finds what is due."""
    groups: dict[Policy, list[int]] = {}
    for batch_id, policy in policies(session).items():
        if policy.held_at is None:
            groups.setdefault(Policy(policy.keep_signed_days, policy.keep_unsigned_days), []).append(batch_id)
    return groups


def due_ids(session: Session, *, now: datetime, limit: int) -> list[int]:
    """Up to ``limit`` ids of requests whose time has passed, by id."""
    found: list[int] = []
    for policy, batch_ids in by_policy(session).items():
        for chunk in slices(batch_ids):
            found.extend(
                session.scalars(
                    select(SigningRequest.id)
                    .where(SigningRequest.batch_id.in_(chunk), due_condition(policy, now=now))
                    .order_by(SigningRequest.id)
                    .limit(limit)
                )
            )
    return sorted(found)[:limit]


@dataclass(frozen=True)
class BatchDue:
    """What the next purge removes of one batch."""

    batch_id: int
    batch_name: str
    signed: int
    unsigned: int


def preview(session: Session, *, now: datetime) -> list[BatchDue]:
    """Per batch, how many signed and unsigned requests a purge at ``now`` would remove, biggest first."""
    counts: dict[int, list[int]] = {}
    for policy, batch_ids in by_policy(session).items():
        for chunk in slices(batch_ids):
            for batch_id, status, n in session.execute(
                select(SigningRequest.batch_id, SigningRequest.status, func.count())
                .where(SigningRequest.batch_id.in_(chunk), due_condition(policy, now=now))
                .group_by(SigningRequest.batch_id, SigningRequest.status)
            ):
                counts.setdefault(batch_id, [0, 0])[0 if status == Status.SIGNED.value else 1] += n
    names = dict(session.execute(select(Batch.id, Batch.name).where(Batch.id.in_(list(counts)))).tuples().all())
    return sorted(
        (BatchDue(batch_id=b, batch_name=names[b], signed=s, unsigned=u) for b, (s, u) in counts.items()),
        key=lambda d: (-(d.signed + d.unsigned), d.batch_id),
    )

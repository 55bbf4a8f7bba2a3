"""Legal holds: a batch under one is never purged nor erased, whatever its periods, until the hold is lifted.
Placing and lifting each say why, kept in the batch's events, since a hold answers to a case someone must name.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.batches.retention.periods import RetentionError
from bulksign.core.logs import log
from bulksign.core.messages import N_, N_plural
from bulksign.models import Batch, Event, User
from bulksign.models.batches import BatchRetention

logger = logging.getLogger(__name__)

#: The longest reason for placing or lifting a hold (a case number and a few words).
MAX_REASON = 500
#: ``Event.type`` of a batch's hold placed and lifted.
HOLD_PLACED = "batch.hold_placed"
HOLD_LIFTED = "batch.hold_lifted"


def place_hold(session: Session, *, batch_id: int, reason: str, by: User | None, now: datetime) -> None:
    """Put the batch on legal hold: no purge and no erasure touches it until ``lift_hold``. The caller commits."""
    reason = _reason(
        reason,
        N_plural(
            "Say why the batch is held (1 to %(num)s character).",
            "Say why the batch is held (1 to %(num)s characters).",
            MAX_REASON,
        ),
    )
    row = session.get(BatchRetention, batch_id) or BatchRetention(batch_id=batch_id)
    if row.held_at is not None:
        raise RetentionError(N_("The batch is on legal hold already."))
    row.held_at, row.hold_reason, row.held_by_id = now, reason, by.id if by else None
    session.add(row)
    _batch_event(session, batch_id=batch_id, type=HOLD_PLACED, by=by, now=now, details={"reason": reason})
    log(logger, logging.INFO, "legal hold placed", batch_id=batch_id)


def lift_hold(session: Session, *, batch_id: int, reason: str, by: User | None, now: datetime) -> None:
    """End the batch's legal hold: the next purge takes what has passed its time. The caller commits."""
    reason = _reason(
        reason,
        N_plural(
            "Say why the hold is lifted (1 to %(num)s character).",
            "Say why the hold is lifted (1 to %(num)s characters).",
            MAX_REASON,
        ),
    )
    row = session.get(BatchRetention, batch_id)
    if row is None or row.held_at is None:
        raise RetentionError(N_("The batch is not on legal hold."))
    row.held_at, row.hold_reason, row.held_by_id = None, None, None
    _batch_event(session, batch_id=batch_id, type=HOLD_LIFTED, by=by, now=now, details={"reason": reason})
    log(logger, logging.INFO, "legal hold lifted", batch_id=batch_id)


def _reason(reason: str | None, refusal: N_) -> str:
    """The reason with its spaces folded (it is shown on one line); ``refusal`` when empty or over ``MAX_REASON``."""
    reason = " ".join((reason or "").split())
    if not reason or len(reason) > MAX_REASON:
        raise RetentionError(refusal)
    return reason


def _batch_event(
    session: Session, *, batch_id: int, type: str, by: User | None, now: datetime, details: dict[str, Any]
) -> None:
    actor = f"user:{by.id}" if by else "cli"
    session.add(Event(batch_id=batch_id, request_id=None, type=type, created_at=now, actor=actor, details=details))
    session.flush()


@dataclass(frozen=True)
class HeldBatch:
    batch_id: int
    batch_name: str
    held_at: datetime
    reason: str


def holds(session: Session) -> list[HeldBatch]:
    """Batches on legal hold, latest first."""
    return [
        HeldBatch(batch_id=b, batch_name=n, held_at=t, reason=r or "")
        for b, n, t, r in session.execute(
            select(Batch.id, Batch.name, BatchRetention.held_at, BatchRetention.hold_reason)
            .join(BatchRetention, BatchRetention.batch_id == Batch.id)
            .where(BatchRetention.held_at.is_not(None))
            .order_by(BatchRetention.held_at.desc())
        )
    ]

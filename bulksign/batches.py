"""Batch status, derived from its requests: counts always come from the database (GROUP BY)."""
from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from .logs import log
from .models import Batch, SigningRequest
from .states import WORKING, Status

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
    """Counts per status for each batch, in one indexed GROUP BY."""
    ids = list(batch_ids)
    raw: dict[int, dict[str, int]] = {bid: {s.value: 0 for s in Status} for bid in ids}
    if ids:
        rows = session.execute(
            select(SigningRequest.batch_id, SigningRequest.status, func.count())
            .where(SigningRequest.batch_id.in_(ids))
            .group_by(SigningRequest.batch_id, SigningRequest.status)
        )
        for batch_id, status, count in rows:
            raw[batch_id][status] = count
    return {bid: BatchCounts(by_status=counts) for bid, counts in raw.items()}


def refresh_batch_statuses(session: Session, *, now: datetime, batch_ids: Iterable[int] | None = None) -> int:
    """Move processing batches with no work left to completed or partially_failed. Returns how many moved."""
    query = select(Batch.id).where(Batch.status == PROCESSING)
    if batch_ids is not None:
        query = query.where(Batch.id.in_(list(batch_ids)))
    ids = session.scalars(query).all()
    moved = 0
    for batch_id, counts in counts_for(session, ids).items():
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

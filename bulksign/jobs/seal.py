"""Queue ``pdf``: seal the signed document of a request (idempotent: a second run finds it and stops)."""

from __future__ import annotations

import logging
from datetime import datetime

from flask import current_app

from bulksign.batches.reconciler import clear_dead_jobs
from bulksign.core.extensions import db, get_redis
from bulksign.core.logs import log
from bulksign.documents.seal_keys import seal_key
from bulksign.documents.sealing import timestamping
from bulksign.documents.storage import get_storage
from bulksign.models import utcnow
from bulksign.signing.sealing import SealOutcome, seal_request, unsealed_requests
from bulksign.work.queues import RESEAL, SEAL, job

logger = logging.getLogger(__name__)


@job(SEAL)
def seal(request_id: int) -> SealOutcome:
    """Build, seal and store the signed PDF of ``request_id`` and queue the confirmation mail."""
    return seal_request(
        db.session,
        request_id=request_id,
        now=utcnow(),
        storage=get_storage(),
        key=seal_key(current_app.config),
        tsa=timestamping(current_app.config),
    )


@job(RESEAL)
def seal_missing(*, now: datetime) -> int:
    """Periodic safety net: queue the seal again for signed requests whose seal job was lost or failed."""
    ids = unsealed_requests(db.session, now=now)
    db.session.rollback()
    if not ids:
        return 0
    # A failed job keeps its id in Redis for a day; clear dead ones so the same id can run again.
    clear_dead_jobs(get_redis(), [SEAL.job_id(id=i) for i in ids], now=now)
    enqueued = SEAL.enqueue_unique(ids)
    log(
        logger,
        logging.WARNING,
        "signed requests without a sealed document; seal queued again",
        count=len(ids),
        enqueued=enqueued,
        first_request_id=ids[0],
    )
    return enqueued

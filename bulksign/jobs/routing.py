"""Queue ``pdf``: start the next step of a request several parties sign (idempotent: a repeat finds nothing to do)."""

from __future__ import annotations

import logging
from datetime import datetime

from bulksign.batches.reconciler import clear_dead_jobs
from bulksign.core.extensions import db, get_redis
from bulksign.core.logs import log
from bulksign.documents.storage import get_storage
from bulksign.jobs._app import this_app
from bulksign.models import utcnow
from bulksign.signing.steps import Advanced, stalled
from bulksign.signing.steps import advance as advance_request
from bulksign.work.pipeline import enqueue_sends
from bulksign.work.queues import ADVANCE, job

logger = logging.getLogger(__name__)


@job(ADVANCE)
def advance(request_id: int) -> Advanced:
    """Store the document with the finished steps' signatures and invite the next step's parties."""
    outcome = advance_request(db.session, request_id=request_id, now=utcnow(), storage=get_storage(), app=this_app())
    if outcome.mail_ids:
        enqueue_sends(list(outcome.mail_ids))
    return outcome


def advance_stalled(*, now: datetime) -> int:
    """Safety net (run with the reconciler): queue the next step again for requests whose step finished minutes
    ago and whose next parties still wait, their job lost with Redis or failed."""
    steps = stalled(db.session, now=now)
    db.session.rollback()
    if not steps:
        return 0
    ids = sorted(steps)
    parts = {i: {"step": step, "version": version} for i, (step, version) in steps.items()}
    clear_dead_jobs(get_redis(), [ADVANCE.job_id(id=i, **parts[i]) for i in ids], now=now)
    enqueued = ADVANCE.enqueue_unique(ids, parts=parts)
    log(logger, logging.WARNING, "finished steps whose next parties wait; next step queued again", count=len(ids))
    return enqueued

"""Webhook jobs: the periodic dispatcher (default queue) and one delivery per job (webhooks queue)."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from flask import current_app
from rq.job import Job

from bulksign.batches.field_values import values_by_name
from bulksign.core.extensions import db, get_redis
from bulksign.integrations.webhook_delivery import deliver as deliver_one
from bulksign.integrations.webhook_delivery import due_deliveries
from bulksign.integrations.webhooks_out import collect
from bulksign.models import utcnow
from bulksign.work.queues import WEBHOOK_DELIVERY, WEBHOOK_DISPATCH, job

#: Redis keys of the dispatcher's cursors (lost with Redis: it then starts from "now").
EVENT_CURSOR = "bulksign:webhooks:last_event_id"
BATCH_CURSOR = "bulksign:webhooks:batches_since"


@job(WEBHOOK_DISPATCH)
def dispatch(*, now: datetime) -> int:
    """Turn new events into deliveries, then enqueue every delivery that is due. Returns how many were enqueued."""
    redis = get_redis()
    raw_event, raw_batch = cast(list[bytes | None], redis.mget(EVENT_CURSOR, BATCH_CURSOR))
    result = collect(
        db.session,
        after_event_id=int(raw_event) if raw_event else None,
        batches_since=datetime.fromisoformat(raw_batch.decode()) if raw_batch else None,
        now=now,
        app_url=current_app.config["APP_URL"],
        values_of=values_by_name,
    )
    db.session.commit()
    redis.mset({EVENT_CURSOR: result.last_event_id, BATCH_CURSOR: result.batches_since.isoformat()})
    due = due_deliveries(db.session, now=now)
    for delivery_id, attempts in due:
        job_id = WEBHOOK_DELIVERY.job_id(id=delivery_id, attempt=attempts)
        if not Job.exists(job_id, connection=redis):
            WEBHOOK_DELIVERY.enqueue(delivery_id, job_id=job_id)
    return len(due)


@job(WEBHOOK_DELIVERY)
def deliver(delivery_id: int) -> str:
    """POST one delivery and record the outcome."""
    result = deliver_one(
        db.session, delivery_id=delivery_id, now=utcnow(), allow_local=current_app.config["WEBHOOK_ALLOW_LOCAL"]
    )
    db.session.commit()
    return result.status

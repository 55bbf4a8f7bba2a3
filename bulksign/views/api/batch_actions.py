"""JSON API: cancel a batch, retry its failed requests. Both answer 202: the work happens in the queues.

Past ``INLINE_LIMIT`` requests the action itself runs in a job too (a cancel stops the batch at once);
``in_background`` then says how many requests the job will go through.
"""

from __future__ import annotations

from typing import Literal

from flask import Blueprint, g
from pydantic import BaseModel, Field

from bulksign.batches.bulk_actions import run_staff_action
from bulksign.batches.progress import MAX_CANCEL_REASON, BatchActionError
from bulksign.core.extensions import db
from bulksign.models import utcnow
from bulksign.views.api.common import ApiError, RequestId, answer, operation, parse_body

bp = Blueprint("api_batch_actions", __name__, url_prefix="/api/v1")

#: Most request ids one retry call takes.
MAX_IDS = 100_000


class Cancelled(BaseModel):
    batch_id: int
    status: Literal["cancelled"]
    cancelled: int = Field(description="Requests cancelled now.")
    in_background: int = Field(description="Requests a background job goes on to cancel.")


class CancelBody(BaseModel):
    reason: str | None = Field(
        None,
        max_length=MAX_CANCEL_REASON,
        description="Why: told to every party already invited (a short mail) and shown on their links' page.",
    )


class RetryBody(BaseModel):
    request_ids: list[RequestId] | None = Field(
        None, max_length=MAX_IDS, description="Failed requests to retry; leave out for every failed one."
    )


class Retried(BaseModel):
    batch_id: int
    retried: int = Field(description="Requests queued again now.")
    in_background: int = Field(description="Requests a background job goes on to retry.")


def _apply(action: str, batch_id: int, request_ids: list[int] | None, *, reason: str | None = None):
    try:
        outcome = run_staff_action(
            db.session,
            action=action,
            batch_id=batch_id,
            request_ids=request_ids,
            user=g.api_user,
            now=utcnow(),
            reason=reason,
        )
    except BatchActionError as exc:
        raise ApiError(str(exc.message), exc.status) from None
    return outcome


@bp.post("/batches/<int:batch_id>/cancel")
@operation(
    "Cancel a batch",
    tag="Batch actions",
    body=CancelBody,
    body_optional=True,
    responses={202: Cancelled},
    errors=(400, 403, 404),
    idempotent=True,
)
def cancel(batch_id: int):
    """Stops every request not yet signed, declined or expired; no more invitations or reminders go out for the
    batch. Each stopped request's link says the sender cancelled it, and every party already invited gets a short
    mail saying so, with `reason` when given."""
    body = parse_body(
        CancelBody,
        optional=True,
        usage=f'Send no body, or {{"reason": "..."}} (at most {MAX_CANCEL_REASON} characters).',
    )
    outcome = _apply("cancel_batch", batch_id, None, reason=body.reason)
    return answer(
        Cancelled(batch_id=batch_id, status="cancelled", cancelled=outcome.done, in_background=outcome.in_background),
        202,
    )


@bp.post("/batches/<int:batch_id>/retry-failed")
@operation(
    "Retry failed requests",
    tag="Batch actions",
    body=RetryBody,
    body_optional=True,
    responses={202: Retried},
    errors=(400, 403, 404, 409),
    idempotent=True,
)
def retry(batch_id: int):
    """Failed requests go back to the start of the pipeline (render, then send)."""
    body = parse_body(
        RetryBody, optional=True, usage=f'Send no body, or {{"request_ids": [1, 2]}} (at most {MAX_IDS:,} request ids).'
    )
    outcome = _apply("retry", batch_id, body.request_ids)
    return answer(Retried(batch_id=batch_id, retried=outcome.done, in_background=outcome.in_background), 202)

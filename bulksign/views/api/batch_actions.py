"""JSON API: cancel a batch, retry its failed requests (both answer 202: the work happens in the queues), change
its cap on text messages.

Past ``INLINE_LIMIT`` requests the action itself runs in a job too (a cancel stops the batch at once);
``in_background`` then says how many requests the job will go through.
"""

from __future__ import annotations

from typing import Literal

from flask import Blueprint, g
from pydantic import BaseModel, Field

from bulksign.batches.batch_settings import MAX_TEXT_CAP
from bulksign.batches.bulk_actions import run_staff_action
from bulksign.batches.progress import MAX_CANCEL_REASON, BatchActionError
from bulksign.batches.text_cap import TextCapError, change_text_cap
from bulksign.core.extensions import db
from bulksign.models import utcnow
from bulksign.views.api.common import ApiError, RequestId, answer, operation, parse_body
from bulksign.work.pipeline import enqueue_sends

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


class TextCapBody(BaseModel):
    text_cap: int = Field(ge=0, le=MAX_TEXT_CAP, description="At most this many text messages for the batch.")


class TextCapChanged(BaseModel):
    batch_id: int
    text_cap: int
    released: int = Field(description="Texts the old limit held back, going out now.")


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


@bp.post("/batches/<int:batch_id>/text-cap")
@operation(
    "Change the limit of text messages",
    tag="Batch actions",
    body=TextCapBody,
    responses={200: TextCapChanged},
    errors=(400, 403, 404, 422),
    idempotent=True,
)
def text_cap(batch_id: int):
    """Sets how many text messages the batch may send in all; never below those sent already. Texts the old limit
    held back go out now, as many as the new one allows."""
    body = parse_body(TextCapBody, usage=f'Send {{"text_cap": 500}} (a whole number from 0 to {MAX_TEXT_CAP:,}).')
    try:
        changed = change_text_cap(db.session, batch_id=batch_id, cap=body.text_cap, user=g.api_user, now=utcnow())
    except TextCapError as exc:
        db.session.rollback()
        raise ApiError(str(exc.message), exc.status) from None
    db.session.commit()
    enqueue_sends(list(changed.released))
    return answer(TextCapChanged(batch_id=batch_id, text_cap=changed.cap, released=len(changed.released)))

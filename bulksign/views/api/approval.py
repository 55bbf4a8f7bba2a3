"""JSON API: approve or reject a batch that waits for approval (its team requires a second pair of eyes)."""

from __future__ import annotations

from flask import Blueprint, g
from pydantic import BaseModel, Field

from bulksign.batches import approval
from bulksign.core.extensions import db
from bulksign.models import utcnow
from bulksign.models.status import BATCH_STATE_NAMES, BatchStatus
from bulksign.views.api.common import ApiError, answer, operation, parse_body
from bulksign.views.api.dashboard import ApprovalOut, approval_out
from bulksign.work.pipeline import enqueue_sends

bp = Blueprint("api_approval", __name__, url_prefix="/api/v1")


class RejectBody(BaseModel):
    reason: str = Field(
        min_length=1, max_length=approval.MAX_REASON, description="Why: the batch's creator is mailed this."
    )


class Decided(BaseModel):
    batch_id: int
    status: str = Field(description="The batch's status now: `sending` once approved, `cancelled` once rejected.")
    approval: ApprovalOut


def _answer(decision: approval.Decision):
    batch = decision.batch
    return answer(
        Decided(batch_id=batch.id, status=BATCH_STATE_NAMES[BatchStatus(batch.status)], approval=approval_out(batch))
    )


@bp.post("/batches/<int:batch_id>/approve")
@operation("Approve a batch", tag="Batch actions", responses={200: Decided}, errors=(403, 404, 409), idempotent=True)
def approve(batch_id: int):
    """Its documents are then prepared and sent. Only a manager of the batch's team or an admin may approve it,
    never its creator (403); a batch that is not `awaiting_approval` answers 409. A retry with the same
    `Idempotency-Key` gets the first answer again, not that 409."""
    try:
        decision = approval.approve(db.session, batch_id=batch_id, user=g.api_user, now=utcnow())
    except approval.ApprovalError as exc:
        raise ApiError(exc.message, exc.status) from None
    return _answer(decision)


@bp.post("/batches/<int:batch_id>/reject")
@operation(
    "Reject a batch",
    tag="Batch actions",
    body=RejectBody,
    responses={200: Decided},
    errors=(400, 403, 404, 409),
    idempotent=True,
)
def reject(batch_id: int):
    """The batch is cancelled and nothing of it is sent; its creator is mailed the reason. Who may: as for
    approving."""
    body = parse_body(RejectBody, usage='Send {"reason": "why the batch is rejected"}.')
    try:
        decision = approval.reject(db.session, batch_id=batch_id, user=g.api_user, reason=body.reason, now=utcnow())
    except approval.ApprovalError as exc:
        raise ApiError(exc.message, exc.status) from None
    enqueue_sends(approval.rejection_notices(db.session, batch_id=batch_id))
    return _answer(decision)

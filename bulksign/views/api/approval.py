"""JSON API: approve or reject a batch that waits for approval (its team requires a second pair of eyes), and the
changes of where its documents go asked after that (``address_approval``)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal

from flask import Blueprint, g
from pydantic import BaseModel, Field

from bulksign.batches import address_approval, approval
from bulksign.core import keyset
from bulksign.core.extensions import db
from bulksign.models import AddressChange, utcnow
from bulksign.models.address_changes import AddressChangeStatus
from bulksign.models.status import BATCH_STATE_NAMES, BatchStatus
from bulksign.people import access
from bulksign.views.api.common import ApiError, NextCursor, PageQuery, answer, operation, parse_body, parse_query
from bulksign.views.api.dashboard import ApprovalOut, approval_out
from bulksign.work.pipeline import enqueue_sends

bp = Blueprint("api_approval", __name__, url_prefix="/api/v1")

# A Literal of computed values: mypy sees the plain type, pydantic (and the API's description) the values.
if TYPE_CHECKING:
    ChangeState = str
else:
    ChangeState = Literal[tuple(s.value for s in AddressChangeStatus)]


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
    decided = approval_out(batch)
    assert decided is not None  # a batch approved or rejected has its approval
    return answer(Decided(batch_id=batch.id, status=BATCH_STATE_NAMES[BatchStatus(batch.status)], approval=decided))


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


class AddressChangeOut(BaseModel):
    """A change of a party's address asked after its batch was approved, in a team that requires approval: nothing
    goes to the new address unless a manager of the team or an admin who did not ask for it approves it."""

    id: int
    request_id: int
    batch_id: int
    role: str = Field(description="The party whose address it is: `recipient` or another of the template's roles.")
    old_email: str = Field(description="The address when the change was asked (empty once purged).")
    new_email: str = Field(description="The address asked for (empty once purged).")
    note: str | None = Field(description="What the asker told the approver.")
    status: ChangeState = Field(
        description="`pending` (waiting for approval: the request keeps its address and no new link is sent), "
        "`approved` (the address changed and the new link went there), `rejected` (the old address stays) or "
        "`withdrawn` (replaced by a later change of the same address, or taken back)."
    )
    requested_by: str | None = Field(description="The e-mail address of who asked.")
    requested_at: datetime
    decided_by: str | None = Field(description="Who approved, rejected or withdrew it.")
    decided_at: datetime | None
    reason: str | None = Field(description="Why it was rejected.")


def change_out(change: AddressChange) -> AddressChangeOut:
    return AddressChangeOut(
        id=change.id,
        request_id=change.request_id,
        batch_id=change.batch_id,
        role=change.role,
        old_email=change.old_email,
        new_email=change.new_email,
        note=change.note,
        status=change.status,
        requested_by=change.requested_by.email if change.requested_by is not None else None,
        requested_at=change.requested_at,
        decided_by=change.decided_by.email if change.decided_by is not None else None,
        decided_at=change.decided_at,
        reason=change.reason,
    )


class AddressChangeQuery(PageQuery):
    status: ChangeState | None = Field(
        AddressChangeStatus.PENDING.value, description="Only changes in this state (default: those waiting)."
    )


class AddressChangePage(NextCursor):
    items: list[AddressChangeOut]


class ChangeDecided(AddressChangeOut):
    sent: bool = Field(description="A new link went to the new address now (the old link no longer works).")
    not_sent_reason: str | None = Field(
        description="Why none went now, once approved: `not_sent` (the request's first invitation is not out yet: "
        "it goes to the new address), `not_started` (the party's step has not started: its invitation goes there "
        "then), `countersign_digest` (the party signs through its countersigner's digest, which now goes there), "
        "or another reason a resend gives (`expired`, `deadline_passed`...). Null when sent, or rejected."
    )


class RejectChangeBody(BaseModel):
    reason: str = Field(
        min_length=1, max_length=approval.MAX_REASON, description="Why: whoever asked for the change reads this."
    )


@bp.get("/batches/<int:batch_id>/address-changes")
@operation(
    "List the batch's address changes",
    tag="Batch actions",
    query=AddressChangeQuery,
    responses={200: AddressChangePage},
    errors=(400, 404, 422),
)
def list_address_changes(batch_id: int):
    """Changes of a recipient's or another party's address asked after the batch was approved (its team requires
    approval), oldest first: by default those waiting for a decision, each with its old and new address."""
    query = parse_query(AddressChangeQuery)
    try:
        after = keyset.decode(query.cursor, int)[0] if query.cursor else None
    except keyset.CursorError as exc:
        raise ApiError(str(exc), 422, code="invalid_cursor") from None
    batch = access.batch_for_read(db.session, batch_id=batch_id, user=g.api_user)
    status = AddressChangeStatus(query.status) if query.status else None
    items, last = address_approval.changes_page(
        db.session, batch_id=batch.id, status=status, after=after, limit=query.limit
    )
    return answer(
        AddressChangePage(items=[change_out(c) for c in items], next_cursor=keyset.encode(last) if last else None)
    )


def _decided(decision: address_approval.ChangeDecision):
    return answer(
        ChangeDecided(
            **change_out(decision.change).model_dump(),
            sent=bool(decision.mail_ids),
            not_sent_reason=decision.not_sent,
        )
    )


@bp.post("/batches/<int:batch_id>/address-changes/<int:change_id>/approve")
@operation(
    "Approve an address change",
    tag="Batch actions",
    responses={200: ChangeDecided},
    errors=(403, 404, 409),
    idempotent=True,
)
def approve_address_change(batch_id: int, change_id: int):
    """The address changes and the new address gets a new link now (the old link stops working), or its first
    invitation when its turn comes (`not_sent_reason`). Only a manager of the batch's team or an admin may approve
    it, never whoever asked for it (403); a change no longer waiting, or a request that can no longer change
    (signed, cancelled, purged: reject it instead) or whose invitation is being sent this moment, answers 409."""
    try:
        decision = address_approval.approve_change(
            db.session, batch_id=batch_id, change_id=change_id, user=g.api_user, now=utcnow()
        )
    except approval.ApprovalError as exc:
        raise ApiError(exc.message, exc.status) from None
    db.session.commit()
    enqueue_sends(decision.mail_ids)
    return _decided(decision)


@bp.post("/batches/<int:batch_id>/address-changes/<int:change_id>/reject")
@operation(
    "Reject an address change",
    tag="Batch actions",
    body=RejectChangeBody,
    responses={200: ChangeDecided},
    errors=(400, 403, 404, 409, 422),
    idempotent=True,
)
def reject_address_change(batch_id: int, change_id: int):
    """The request keeps its address and nothing goes to the one asked for. Who may: as for approving."""
    body = parse_body(RejectChangeBody, usage='Send {"reason": "why the change is rejected"}.')
    try:
        decision = address_approval.reject_change(
            db.session, batch_id=batch_id, change_id=change_id, user=g.api_user, reason=body.reason, now=utcnow()
        )
    except approval.ApprovalError as exc:
        raise ApiError(exc.message, exc.status) from None
    db.session.commit()
    return _decided(decision)

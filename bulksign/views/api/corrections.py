"""JSON API for correct and resend: a request's values, names or addresses corrected with a note, made a new version
of its document (or held for approval), and the approver's decision."""

from __future__ import annotations

from typing import Literal

from flask import Blueprint, g
from pydantic import BaseModel, ConfigDict, Field

from bulksign.batches.address_changes import MAX_NOTE
from bulksign.batches.corrections import (
    MAX_NAME,
    MAX_VALUE,
    CorrectionAsked,
    CorrectionOutcome,
    CorrectionResult,
    correct_request,
    decide_correction,
    queue_follow_up,
)
from bulksign.batches.progress import BatchActionError
from bulksign.core.extensions import db
from bulksign.models import utcnow
from bulksign.views.api.common import ApiError, answer, operation, parse_body

bp = Blueprint("api_corrections", __name__, url_prefix="/api/v1")

#: At most this many columns, names or addresses in one correction (a row has a few dozen).
MAX_ITEMS = 200
Role = Field(max_length=40, pattern=r"^[a-z0-9_]+$")


class CorrectionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    note: str = Field(
        min_length=1, max_length=MAX_NOTE, description="What was corrected and why: every party who saw it reads it."
    )
    values: dict[str, str] = Field(
        default_factory=dict,
        max_length=MAX_ITEMS,
        description=f"The file's columns to correct → their new values (at most {MAX_VALUE} characters each); "
        "`email`, `name` and `phone` are the parties', under `names` and `emails`.",
    )
    names: dict[str, str] = Field(
        default_factory=dict,
        max_length=MAX_ITEMS,
        description=f"Party role (`recipient`, `employer` …) → its corrected name (1 to {MAX_NAME} characters).",
    )
    emails: dict[str, str] = Field(
        default_factory=dict, max_length=MAX_ITEMS, description="Party role → its corrected address."
    )


class CorrectionOut(BaseModel):
    request_id: int
    status: Literal["applied", "waiting_for_approval", "unchanged", "rejected"] = Field(
        description="`applied`: the request is `pending` again and its document is rendered as `version`; every "
        "party who saw the earlier version is told, and every party signs the new one in order. "
        "`waiting_for_approval`: the batch's team requires approval, so nothing changes until a manager of the team "
        "or an admin who did not ask approves it. `unchanged`: every value already was as asked. `rejected`: the "
        "approver's decision."
    )
    correction_id: int | None = Field(description="The correction, to approve or reject while it waits.")
    version: int | None = Field(description="The document's new version, once applied.")


class RejectBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(min_length=1, max_length=MAX_NOTE, description="Why: whoever asked reads it.")


_STATUS = {
    CorrectionOutcome.APPLIED: "applied",
    CorrectionOutcome.HELD: "waiting_for_approval",
    CorrectionOutcome.UNCHANGED: "unchanged",
    CorrectionOutcome.REJECTED: "rejected",
}


def _out(result: CorrectionResult) -> CorrectionOut:
    return CorrectionOut(
        request_id=result.request_id,
        status=_STATUS[result.outcome],  # type: ignore[arg-type]
        correction_id=result.correction_id,
        version=result.version,
    )


def _done(result: CorrectionResult):
    db.session.commit()
    queue_follow_up(result)
    return answer(_out(result), 200 if result.outcome == CorrectionOutcome.UNCHANGED else 202)


def _refused(exc: BatchActionError) -> ApiError:
    db.session.rollback()
    return ApiError(exc.message, 422 if exc.status == 400 else exc.status)


@bp.post("/requests/<int:request_id>/correction")
@operation(
    "Correct a request and send the corrected version to every party",
    tag="Requests",
    body=CorrectionBody,
    responses={200: CorrectionOut, 202: CorrectionOut},
    errors=(400, 403, 404, 409, 422),
    idempotent=True,
)
def correct(request_id: int):
    """Before the request is complete (`sent`, `opened`, `declined`, `expired` or `bounced`): its values, names or
    addresses change, its document is rendered again as a new version (the earlier one is kept), signatures on the
    earlier version no longer count, every party who saw it is told what changed and why, and its earlier links say
    they were replaced. The way forward after a decline. 409 while it is being prepared or sent, or once complete,
    cancelled or purged; 422 names a column the row does not have, a role the request does not have, or a bad
    address. In a team that requires approval, a correction by someone who does not approve waits (202
    `waiting_for_approval`); asking again replaces it."""
    body = parse_body(CorrectionBody)
    asked = CorrectionAsked(note=body.note, values=body.values, names=body.names, emails=body.emails)
    try:
        result = correct_request(db.session, request_id=request_id, asked=asked, user=g.api_user, now=utcnow())
    except BatchActionError as exc:
        raise _refused(exc) from None
    return _done(result)


@bp.post("/batches/<int:batch_id>/corrections/<int:correction_id>/approve")
@operation(
    "Approve a correction waiting for approval",
    tag="Batch actions",
    responses={202: CorrectionOut},
    errors=(403, 404, 409),
    idempotent=True,
)
def approve(batch_id: int, correction_id: int):
    """A manager of the batch's team or an admin, never whoever asked: the correction is made now (the request's
    state is checked again: 409 if it was signed or cancelled meanwhile)."""
    try:
        result = decide_correction(
            db.session, batch_id=batch_id, correction_id=correction_id, user=g.api_user, now=utcnow(), approve=True
        )
    except BatchActionError as exc:
        raise _refused(exc) from None
    return _done(result)


@bp.post("/batches/<int:batch_id>/corrections/<int:correction_id>/reject")
@operation(
    "Reject a correction waiting for approval",
    tag="Batch actions",
    body=RejectBody,
    responses={202: CorrectionOut},
    errors=(400, 403, 404, 409, 422),
    idempotent=True,
)
def reject(batch_id: int, correction_id: int):
    """The same people: the request stays as it was, and whoever asked reads the reason."""
    body = parse_body(RejectBody)
    try:
        result = decide_correction(
            db.session,
            batch_id=batch_id,
            correction_id=correction_id,
            user=g.api_user,
            now=utcnow(),
            approve=False,
            reason=body.reason,
        )
    except BatchActionError as exc:
        raise _refused(exc) from None
    return _done(result)

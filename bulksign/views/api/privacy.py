"""JSON API of erasure (admins' keys only): ``POST /api/v1/privacy/erasures`` erases a person from every batch."""

from __future__ import annotations

from datetime import datetime

from flask import Blueprint, g
from pydantic import BaseModel, Field

from bulksign.batches.erasure import erase_person
from bulksign.core.extensions import db
from bulksign.core.schemas import NO_NUL
from bulksign.documents.storage import get_storage
from bulksign.models import utcnow
from bulksign.views.api.common import answer, api_error, operation, parse_body

bp = Blueprint("api_privacy", __name__, url_prefix="/api/v1/privacy")


@bp.before_request
def _admins_only():
    # An erasure spans every team's recipients: out of reach for others, so it does not exist for them.
    if not g.api_user.is_admin:
        return api_error("Not found.", 404)
    return None


class ErasureBody(BaseModel):
    email: str = Field(min_length=3, max_length=254, pattern=NO_NUL, description="The person's address, any case.")


class ErasedOut(BaseModel):
    request_id: int
    batch_id: int
    status: str = Field(description="Its status as erased: `cancelled` for one that was still open.")


class KeptOut(BaseModel):
    request_id: int
    batch_id: int
    status: str
    reason: str = Field(description="`legal_hold` (its batch is held) or `signed_kept` (a signed contract kept).")
    kept_until: datetime | None = Field(description="For `signed_kept`: until when; null: for ever.")
    hold_reason: str | None = Field(description="For `legal_hold`: why the batch is held.")


class ErasureOut(BaseModel):
    erased: list[ErasedOut]
    kept: list[KeptOut]
    skipped_rows: int = Field(description="Rows left out of batches at creation that held the address, deleted.")
    uploads: int = Field(
        description="Uploaded recipients files that held the address (kept from the new-batch page), deleted."
    )
    deliveries_emptied: int = Field(
        description="Webhook deliveries sent (or given up) about the erased requests: their payloads emptied; "
        "their id, event, time and status stay."
    )
    deliveries_rebuilt: int = Field(
        description="Webhook deliveries about them not sent yet: rewritten without the person's address, name and "
        "values, then sent as usual."
    )


@bp.post("/erasures")
@operation(
    "Erase a person from every batch", tag="Privacy", body=ErasureBody, responses={200: ErasureOut}, errors=(400, 404)
)
def erase():
    """Every request sent to `email`, in every batch, loses its documents and personal data now (one still open is
    cancelled first), except in batches on legal hold and signed contracts within their keeping period: the answer
    lists both. Admins' keys only (others get 404). Calling it again erases nothing twice."""
    body = parse_body(ErasureBody)
    erasure = erase_person(db.session, storage=get_storage(), email=body.email, by=g.api_user, now=utcnow())
    db.session.commit()
    return answer(
        ErasureOut(
            erased=[ErasedOut(request_id=e.request_id, batch_id=e.batch_id, status=e.status) for e in erasure.erased],
            kept=[
                KeptOut(
                    request_id=k.request_id,
                    batch_id=k.batch_id,
                    status=k.status,
                    reason=k.reason,
                    kept_until=k.kept_until,
                    hold_reason=k.hold_reason,
                )
                for k in erasure.kept
            ],
            skipped_rows=erasure.skipped_rows,
            uploads=erasure.uploads,
            deliveries_emptied=erasure.deliveries_emptied,
            deliveries_rebuilt=erasure.deliveries_rebuilt,
        )
    )

"""JSON API of the suppression list (admins' keys only): ``GET /api/v1/suppressions``, ``DELETE …/<email>``."""

from __future__ import annotations

from datetime import datetime

from flask import Blueprint, g
from pydantic import BaseModel, Field

from bulksign.core import keyset
from bulksign.core.extensions import db
from bulksign.core.schemas import NO_NUL
from bulksign.models import Suppression, utcnow
from bulksign.recipients import suppressions
from bulksign.views.api.common import ApiError, NextCursor, PageQuery, answer, api_error, operation, parse_query

bp = Blueprint("api_suppressions", __name__, url_prefix="/api/v1/suppressions")


@bp.before_request
def _admins_only():
    # The list spans every team's recipients: out of reach for others, so it does not exist for them.
    if not g.api_user.is_admin:
        return api_error("Not found.", 404)
    return None


class SuppressionOut(BaseModel):
    email: str
    source: str = Field(description="`bounce`, `complaint` or `manual`.")
    reason: str
    created_at: datetime
    batch_id: int | None = Field(description="The batch whose mail bounced or was marked as spam.")
    request_id: int | None


class SuppressionPage(NextCursor):
    items: list[SuppressionOut]


class SuppressionQuery(PageQuery):
    q: str = Field("", max_length=200, pattern=NO_NUL, description="Part of the address or reason.")


class Lifted(BaseModel):
    email: str
    lifted_at: datetime


def _out(entry: Suppression) -> SuppressionOut:
    return SuppressionOut(
        email=entry.email,
        source=entry.source,
        reason=entry.reason,
        created_at=entry.created_at,
        batch_id=entry.batch_id,
        request_id=entry.request_id,
    )


@bp.get("")
@operation(
    "List suppressed addresses",
    tag="Suppressions",
    query=SuppressionQuery,
    responses={200: SuppressionPage},
    errors=(400, 404),
)
def list_suppressions():
    """Addresses no mail goes to (hard bounces, complaints), newest first. Admins' keys only (others get 404)."""
    query = parse_query(SuppressionQuery)
    try:
        after = keyset.decode(query.cursor, int)[0] if query.cursor else None
    except keyset.CursorError as exc:
        raise ApiError(str(exc), 422, code="invalid_cursor") from None
    page = suppressions.list_in_force(db.session, q=query.q.strip(), after=after, limit=query.limit)
    return answer(
        SuppressionPage(
            items=[_out(s) for s in page.items],
            next_cursor=keyset.encode(page.next_cursor) if page.next_cursor else None,
        )
    )


@bp.delete("/<path:email>")
@operation("Lift a suppression", tag="Suppressions", responses={200: Lifted}, errors=(400, 404))
def lift(email: str):
    """Mail may go to the address again (invitations that failed on it are not resent by themselves)."""
    now = utcnow()
    try:
        entry = suppressions.lift(db.session, email=email, user=g.api_user, now=now)
    except suppressions.SuppressionNotFound as exc:
        raise ApiError(str(exc), 404) from None
    db.session.commit()
    return answer(Lifted(email=entry.email, lifted_at=now))

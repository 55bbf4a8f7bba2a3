"""JSON API of the suppression list (admins' keys only): ``GET /api/v1/suppressions``, ``DELETE …/<email>``."""
from __future__ import annotations

from flask import Blueprint, g, jsonify, request

from .. import suppressions
from ..extensions import db
from ..models import Suppression, utcnow
from .api import api_error

bp = Blueprint("api_suppressions", __name__, url_prefix="/api/v1/suppressions")


@bp.before_request
def _admins_only():
    # The list spans every team's recipients: out of reach for others, so it does not exist for them.
    if not g.api_user.is_admin:
        return api_error("Not found.", 404)
    return None


def _json(entry: Suppression) -> dict:
    return {"email": entry.email, "source": entry.source, "reason": entry.reason,
            "created_at": entry.created_at.isoformat(), "batch_id": entry.batch_id, "request_id": entry.request_id}


@bp.get("")
def list_suppressions():
    cursor = request.args.get("cursor", "")
    if cursor and not cursor.isdigit():
        return api_error("cursor must be a next_cursor value from a previous page.", 400)
    page = suppressions.list_in_force(db.session, q=request.args.get("q", "").strip()[:200],
                                      after=int(cursor) if cursor else None)
    return jsonify(items=[_json(s) for s in page.items],
                   next_cursor=str(page.next_cursor) if page.next_cursor else None)


@bp.delete("/<path:email>")
def lift(email: str):
    try:
        entry = suppressions.lift(db.session, email=email, user=g.api_user, now=utcnow())
    except suppressions.SuppressionNotFound as exc:
        return api_error(str(exc), 404)
    db.session.commit()
    return jsonify(email=entry.email, lifted_at=entry.lifted_at.isoformat())

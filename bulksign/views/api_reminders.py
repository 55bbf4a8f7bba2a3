"""JSON API for staff actions after dispatch: remind now, resend with a new link, correct an address."""
from __future__ import annotations

from flask import Blueprint, g, jsonify, request

from ..batches import BatchActionError
from ..bulk_actions import apply_action, follow_up
from ..extensions import db
from ..models import utcnow
from ..pipeline import enqueue_sends
from ..resend import MAX_EXTEND_DAYS, change_email, resend_with_new_link
from .api import api_error

bp = Blueprint("api_reminders", __name__, url_prefix="/api/v1")

#: One call reminds at most this many listed requests; ``all_unsigned`` has no limit.
MAX_IDS = 100_000


def _json_object() -> dict | None:
    body = request.get_json(silent=True)
    return body if isinstance(body, dict) else None


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@bp.post("/batches/<int:batch_id>/remind")
def remind(batch_id: int):
    body = _json_object()
    usage = 'Send a JSON object: {"request_ids": [1, 2]} or {"all_unsigned": true} (and "force": true to remind within the hour).'
    if body is None:
        return api_error(usage, 400)
    ids, all_unsigned = body.get("request_ids"), body.get("all_unsigned") is True
    if (ids is None) == (not all_unsigned):
        return api_error(usage, 400)
    if ids is not None and (not isinstance(ids, list) or not ids or len(ids) > MAX_IDS
                            or not all(_whole(i) and i > 0 for i in ids)):
        return api_error(f"request_ids must be a list of 1 to {MAX_IDS} positive whole numbers.", 400)
    if body.get("force", False) not in (True, False):
        return api_error("force must be true or false.", 400)
    try:
        # Past INLINE_LIMIT requests this runs as a job; ``in_background`` then says how many it goes through.
        outcome = apply_action(db.session, action="remind", batch_id=batch_id, request_ids=ids,
                               selector=None if ids is not None else "not_signed", user=g.api_user, now=utcnow(),
                               force=body.get("force", False))
    except BatchActionError as exc:
        db.session.rollback()
        return api_error(exc.message, exc.status)
    db.session.commit()
    follow_up(outcome)
    more = {"in_background": outcome.in_background} if outcome.in_background else {}
    return jsonify(queued=outcome.done, skipped=outcome.skipped, **more), 202


@bp.post("/requests/<int:request_id>/resend")
def resend(request_id: int):
    body = _json_object() if request.get_data() else {}
    if body is None:
        return api_error('Send a JSON object, e.g. {"extend_days": 7}, or no body.', 400)
    extend_days = body.get("extend_days")
    if extend_days is not None and not (_whole(extend_days) and 1 <= extend_days <= MAX_EXTEND_DAYS):
        return api_error(f"extend_days must be a whole number from 1 to {MAX_EXTEND_DAYS}.", 400)
    try:
        result = resend_with_new_link(db.session, request_ids=[request_id], user=g.api_user, now=utcnow(),
                                      extend_days=extend_days)
    except BatchActionError as exc:
        db.session.rollback()
        return api_error(exc.message, exc.status)
    if result.skipped.get("not_found"):
        return api_error("No request with this id.", 404)
    if not result.resent:
        return api_error("This request cannot get a new link now.", 409, reason=next(iter(result.skipped)))
    db.session.commit()
    enqueue_sends(result.mail_ids)
    return jsonify(resent=result.resent, request_id=request_id, status="generated",
                   expires_at=result.deadlines[0].isoformat() if result.deadlines else None), 202


@bp.post("/requests/<int:request_id>/email")
def update_email(request_id: int):
    body = _json_object()
    if body is None or not isinstance(body.get("email"), str):
        return api_error('Send a JSON object: {"email": "new@example.com"}.', 400)
    try:
        change = change_email(db.session, request_id=request_id, new_email=body["email"], user=g.api_user,
                              now=utcnow())
    except BatchActionError as exc:
        db.session.rollback()
        return api_error(exc.message, exc.status)
    db.session.commit()
    return jsonify(request_id=request_id, email=change.new_email, changed=change.changed)

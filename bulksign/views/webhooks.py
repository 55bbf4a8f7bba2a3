"""Inbound webhooks from the mail provider: ``POST /webhooks/bounces`` (shared secret, no session, no CSRF)."""
from __future__ import annotations

import hmac

from flask import Blueprint, Flask, abort, current_app, jsonify, request

from ..auth import public
from .. import telemetry
from ..bounces import BounceFormatError, count_complaints, parse_bounce, record_bounce
from ..extensions import csrf, db, get_redis
from ..models import utcnow

bp = Blueprint("webhooks", __name__, url_prefix="/webhooks")


def _presented_secret() -> str:
    # A header for generic senders, ?token= or HTTP basic auth for providers that only take a URL (Postmark, SNS).
    auth = request.authorization
    return (request.headers.get("X-Bounce-Secret") or request.args.get("token")
            or (auth.password if auth and auth.password else "") or "")


@bp.post("/bounces")
@public
def bounces():
    expected = current_app.config.get("BOUNCE_WEBHOOK_SECRET") or ""
    if not expected:
        abort(404)  # not configured: the endpoint does not exist
    if not hmac.compare_digest(_presented_secret().encode(), expected.encode()):
        return jsonify(error="wrong or missing secret"), 401
    # SNS posts JSON as text/plain.
    payload = request.get_json(force=True, silent=True)
    try:
        reports = parse_bounce(payload)
    except BounceFormatError as exc:
        return jsonify(error=str(exc)), 400
    now = utcnow()
    bounced = [rid for report in reports for rid in record_bounce(db.session, report=report, now=now).bounced]
    db.session.commit()
    with telemetry.record(get_redis()) as figures:
        figures.count(telemetry.MAIL_REPORTS, ("bounce",), len(reports))
        figures.count(telemetry.MAIL_REPORTS, ("complaint",), count_complaints(payload))
    return jsonify(received=len(reports), bounced=len(bounced))


def init_app(app: Flask) -> None:
    csrf.exempt(bp)

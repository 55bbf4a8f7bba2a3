"""Inbound webhooks from the providers: ``POST /webhooks/bounces`` takes bounces and spam complaints,
``POST /webhooks/sms`` text delivery reports and STOP replies (shared secrets, no session, no CSRF)."""

from __future__ import annotations

import hmac

from flask import Blueprint, Flask, abort, current_app, jsonify, request

from bulksign.batches.bounce_reports import BounceFormatError, parse_bounce
from bulksign.batches.bounces import record_report
from bulksign.batches.text_reports import record_text_report
from bulksign.core.extensions import csrf, db, get_redis
from bulksign.mail.sms_reports import SmsReportError, parse_text_report
from bulksign.models import utcnow
from bulksign.ops import telemetry
from bulksign.people.auth import public
from bulksign.work.pipeline import enqueue_sends

bp = Blueprint("webhooks", __name__, url_prefix="/webhooks")


def _presented_secret(header: str) -> str:
    # A header for generic senders, ?token= or HTTP basic auth for providers that only take a URL (Postmark, SNS,
    # Twilio).
    auth = request.authorization
    return (
        request.headers.get(header)
        or request.args.get("token")
        or (auth.password if auth and auth.password else "")
        or ""
    )


@bp.post("/bounces")
@public
def bounces():
    expected = current_app.config.get("BOUNCE_WEBHOOK_SECRET") or ""
    if not expected:
        abort(404)  # not configured: the endpoint does not exist
    if not hmac.compare_digest(_presented_secret("X-Bounce-Secret").encode(), expected.encode()):
        return jsonify(error="wrong or missing secret"), 401
    # SNS posts JSON as text/plain.
    payload = request.get_json(force=True, silent=True)
    try:
        reports = parse_bounce(payload)
    except BounceFormatError as exc:
        return jsonify(error=str(exc)), 400
    now = utcnow()
    results = [record_report(db.session, report=report, now=now) for report in reports]
    db.session.commit()
    # A bounced link that falls back to a text goes out at once.
    enqueue_sends([mail_id for r in results for mail_id in r.texts], at_front=True)
    with telemetry.record(get_redis()) as figures:
        for kind in ("bounce", "complaint"):
            figures.count(telemetry.MAIL_REPORTS, (kind,), sum(1 for r in reports if r.kind == kind))
    return jsonify(
        received=len(reports),
        bounced=sum(len(r.bounced) for r in results),
        # Already bounced by another party's returned invitation: this report's party is named too.
        bounced_too=sum(len(r.bounced_too) for r in results),
        complained=sum(len(r.complained) for r in results),
        texted=sum(len(r.texts) for r in results),
    )


@bp.post("/sms")
@public
def sms():
    expected = current_app.config.get("SMS_WEBHOOK_SECRET") or ""
    if not expected:
        abort(404)  # not configured: the endpoint does not exist
    if not hmac.compare_digest(_presented_secret("X-Sms-Secret").encode(), expected.encode()):
        return jsonify(error="wrong or missing secret"), 403
    # Twilio posts form fields; the generic gateway JSON.
    payload = request.form.to_dict() if request.form else request.get_json(force=True, silent=True)
    try:
        report = parse_text_report(payload)
    except SmsReportError as exc:
        return jsonify(error=str(exc)), 400
    if report is None:
        return jsonify(matched=0)
    result = record_text_report(db.session, report=report, now=utcnow())
    db.session.commit()
    enqueue_sends(list(result.mails), at_front=True)
    return jsonify(matched=result.matched, mailed=len(result.mails), opted_out=result.suppressed is not None)


def init_app(app: Flask) -> None:
    csrf.exempt(bp)

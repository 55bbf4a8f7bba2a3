"""JSON API: cancel a batch, retry its failed requests. Both answer 202: the work happens in the queues."""
from __future__ import annotations

from flask import Blueprint, g, jsonify, request

from ..batches import BatchActionError, cancel_batch, retry_failed
from ..extensions import db
from ..models import utcnow
from ..reconciler import revive_renders
from .api import api_error

bp = Blueprint("api_batch_actions", __name__, url_prefix="/api/v1")


@bp.post("/batches/<int:batch_id>/cancel")
def cancel(batch_id: int):
    try:
        result = cancel_batch(db.session, batch_id=batch_id, user=g.api_user, now=utcnow())
    except BatchActionError as exc:
        db.session.rollback()
        return api_error(exc.message, exc.status)
    db.session.commit()
    return jsonify(batch_id=batch_id, status="cancelled", cancelled=len(result.cancelled)), 202


@bp.post("/batches/<int:batch_id>/retry-failed")
def retry(batch_id: int):
    body = request.get_json(silent=True) or {}
    ids = body.get("request_ids")
    if ids is not None and not (isinstance(ids, list) and all(isinstance(i, int) for i in ids) and len(ids) <= 100_000):
        return api_error("request_ids must be a list of request ids (whole numbers).", 400)
    now = utcnow()
    try:
        result = retry_failed(db.session, batch_id=batch_id, user=g.api_user, now=now, request_ids=ids)
    except BatchActionError as exc:
        db.session.rollback()
        return api_error(exc.message, exc.status)
    db.session.commit()
    revive_renders(list(result.retried))
    return jsonify(batch_id=batch_id, retried=len(result.retried)), 202

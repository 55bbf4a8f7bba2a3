"""JSON API: cancel a batch, retry its failed requests. Both answer 202: the work happens in the queues.

Past ``INLINE_LIMIT`` requests the action itself runs in a job too (a cancel stops the batch at once);
``in_background`` then says how many requests the job will go through.
"""
from __future__ import annotations

from flask import Blueprint, g, jsonify, request

from ..batches import BatchActionError
from ..bulk_actions import run_staff_action
from ..extensions import db
from ..models import utcnow
from .api import api_error

bp = Blueprint("api_batch_actions", __name__, url_prefix="/api/v1")

#: Most request ids one retry call takes.
MAX_IDS = 100_000


@bp.post("/batches/<int:batch_id>/cancel")
def cancel(batch_id: int):
    try:
        outcome = run_staff_action(db.session, action="cancel_batch", batch_id=batch_id, request_ids=None,
                                   user=g.api_user, now=utcnow())
    except BatchActionError as exc:
        return api_error(exc.message, exc.status)
    return jsonify(batch_id=batch_id, status="cancelled", cancelled=outcome.done,
                   in_background=outcome.in_background), 202


@bp.post("/batches/<int:batch_id>/retry-failed")
def retry(batch_id: int):
    body = request.get_json(silent=True)
    ids = body.get("request_ids") if isinstance(body, dict) else None
    # bool is an int in Python, not a request id.
    if body is not None and not isinstance(body, dict) or ids is not None and not (
            isinstance(ids, list) and len(ids) <= MAX_IDS and all(type(i) is int and 0 < i < 2 ** 63 for i in ids)):
        return api_error(f"request_ids must be a list of at most {MAX_IDS} request ids (whole numbers).", 400)
    try:
        outcome = run_staff_action(db.session, action="retry", batch_id=batch_id, request_ids=ids,
                                   user=g.api_user, now=utcnow())
    except BatchActionError as exc:
        return api_error(exc.message, exc.status)
    return jsonify(batch_id=batch_id, retried=outcome.done, in_background=outcome.in_background), 202

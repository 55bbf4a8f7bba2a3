"""JSON API for recipient files: check one against a template, or create a batch from it."""
from __future__ import annotations

from flask import Blueprint, g, jsonify, request

from ..batch_creation import BatchError, create_batch, find_by_key, settings_from_form
from ..extensions import db
from ..models import Batch, utcnow
from ..recipients import UploadError, validate_recipients
from .api import api_error
from .uploads import suppression_lookup, template_version, uploaded_file

bp = Blueprint("api_uploads", __name__, url_prefix="/api/v1")


def _batch_json(batch: Batch) -> dict:
    # notify_email: who gets the batch's notices besides its owner's default (null: the owner).
    return {"id": batch.id, "status": batch.status, "total_count": batch.total_count,
            "notify_email": batch.notify_email, "one_time_code": batch.one_time_code}


@bp.post("/batches/validate")
def validate():
    try:
        version = template_version(request.form.get("template_id"))
        data, filename = uploaded_file()
        report = validate_recipients(data, filename=filename, variables=version.variables,
                                     suppressed=suppression_lookup())
    except UploadError as exc:
        return api_error(exc.message, exc.status)
    return jsonify(report.as_dict())


@bp.post("/batches")
def create():
    """201 with the new batch; 200 with the same batch for a repeated ``Idempotency-Key``."""
    key = (request.headers.get("Idempotency-Key") or "").strip() or None
    if key and len(key) > 200:
        return api_error("Idempotency-Key is longer than 200 characters.", 400)
    if key:
        existing = find_by_key(db.session, user_id=g.api_user.id, idempotency_key=key)
        if existing:
            return jsonify(_batch_json(existing)), 200
    try:
        version = template_version(request.form.get("template_id"))
        data, filename = uploaded_file()
        settings = settings_from_form(request.form, default_name=f"{version.template.name} ({utcnow():%Y-%m-%d})")
        report = validate_recipients(data, filename=filename, variables=version.variables, keep_rows=True)
        skip_invalid = (request.form.get("skip_invalid") or "").strip().lower() in {"1", "true", "yes", "on"}
        if report.invalid_rows and not skip_invalid or not report.valid_rows:
            reason = ("No row of the file can be used." if not report.valid_rows else
                      f"{report.invalid_rows} of {report.total_rows} rows have errors. Fix them, or send "
                      "skip_invalid=true to create the batch with the valid rows only.")
            return api_error(reason, 422, **report.as_dict())
        result = create_batch(db.session, user=g.api_user, template_version=version, rows=report.recipients,
                              now=utcnow(), idempotency_key=key, **settings.as_kwargs())
    except UploadError as exc:
        return api_error(exc.message, exc.status)
    except BatchError as exc:
        db.session.rollback()
        return api_error(exc.message, 422, field=exc.field)
    return jsonify(_batch_json(result.batch)), 201 if result.created else 200

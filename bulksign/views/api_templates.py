"""API for document templates: create (a first version, from JSON or an uploaded file) and list."""
from __future__ import annotations

from flask import Blueprint, g, jsonify, request

from .. import doc_templates as dt, template_kinds
from ..extensions import db
from ..models import DocumentTemplate, TemplateVersion, utcnow
from .api import api_error

bp = Blueprint("api_templates", __name__, url_prefix="/api/v1")

MAIL_FIELDS = ("email_subject", "email_body", "reminder_subject", "reminder_body")


def template_json(template: DocumentTemplate, version: TemplateVersion | None) -> dict:
    return {"id": template.id, "name": template.name, "version": template.latest_version, "team_id": template.team_id,
            "kind": version.kind if version else None, "variables": list(version.variables) if version else [],
            "created_at": template.created_at.isoformat()}


def _multipart_fields() -> dict:
    """``name`` + ``file`` (.html, .docx …) of a multipart upload, as ``create_template`` takes them."""
    upload = request.files.get("file")
    if upload is None or not upload.filename:
        raise dt.TemplateError("Send \"name\" and a \"file\" (.html or .docx), or JSON with \"name\" and \"html\".")
    kind = template_kinds.kind_for_filename(upload.filename)
    raw = upload.read(template_kinds.MAX_SOURCE_BYTES + 1)
    fields = {"name": request.form.get("name", ""), "kind": kind,
              **{f: request.form[f] for f in MAIL_FIELDS if request.form.get(f) is not None}}
    if kind != template_kinds.HTML:
        return {**fields, "html": "", "file": raw}
    try:
        return {**fields, "html": raw.decode("utf-8-sig")}
    except UnicodeDecodeError:
        raise dt.TemplateError("Save the .html file as UTF-8 and send it again.") from None


@bp.post("/templates")
def create():
    """JSON ``{name, html}``, or multipart ``name`` + ``file``; 201 with the template and its variables."""
    if request.mimetype == "multipart/form-data":
        team_id = request.form.get("team_id", type=int)
        try:
            fields = _multipart_fields()
        except dt.TemplateError as exc:
            return api_error(exc.message, 422 if request.files.get("file") else 400)
    else:
        body = request.get_json(silent=True)
        if not isinstance(body, dict):
            return api_error("Send a JSON object with \"name\" and \"html\", or a multipart form with "
                             "\"name\" and \"file\".", 400)
        team_id = body.get("team_id")
        if team_id is not None and (not isinstance(team_id, int) or isinstance(team_id, bool)):
            return api_error("\"team_id\" must be a team's id (a whole number).", 400)
        fields = {"name": body.get("name"), "html": body.get("html"),
                  **{f: body[f] for f in MAIL_FIELDS if body.get(f) is not None}}
        if not all(isinstance(v, str) for v in fields.values()) or fields["name"] is None:
            return api_error("\"name\" and \"html\" (and any mail texts) must be strings.", 400)
    try:
        saved = dt.create_template(db.session, user=g.api_user, now=utcnow(), team_id=team_id, **fields)
        db.session.commit()
    except dt.TemplateError as exc:
        db.session.rollback()
        return api_error(exc.message, 422, line=exc.line)
    return jsonify(template_json(saved.template, saved.version)), 201


@bp.get("/templates")
def index():
    templates = dt.list_templates(db.session, user=g.api_user)
    return jsonify(templates=[template_json(t, dt.get_version(db.session, template_id=t.id)) for t in templates])

"""JSON API for document templates: create (a first version) and list."""
from __future__ import annotations

from datetime import datetime

from flask import Blueprint, g
from pydantic import BaseModel, Field

from .. import doc_templates as dt, keyset
from ..extensions import db
from ..models import DocumentTemplate, TemplateVersion, utcnow
from .doc_templates import MAIL_FIELDS
from .api import ApiError, NextCursor, PageQuery, RecordId, Text, answer, operation, parse_body, parse_query

bp = Blueprint("api_templates", __name__, url_prefix="/api/v1")


class TemplateOut(BaseModel):
    id: int
    name: str
    version: int = Field(description="The newest version's number; batches use the newest version.")
    team_id: int | None
    variables: list[str] = Field(description="The `{{ placeholders }}` of the newest version: the columns a "
                                             "recipients file needs (besides `email`).")
    created_at: datetime


class TemplatePage(NextCursor):
    items: list[TemplateOut]


class TemplateBody(BaseModel):
    name: Text = Field(min_length=1, max_length=200)
    html: Text = Field(max_length=dt.MAX_TEMPLATE_CHARS,
                       description="The document, HTML with Jinja `{{ placeholders }}` (sandboxed).")
    team_id: RecordId | None = Field(None, description="The team that shares it; default: your first team.")
    email_subject: Text | None = Field(None, max_length=500)
    email_body: Text | None = Field(None, max_length=dt.MAX_TEMPLATE_CHARS)
    reminder_subject: Text | None = Field(None, max_length=500)
    reminder_body: Text | None = Field(None, max_length=dt.MAX_TEMPLATE_CHARS)


def template_out(template: DocumentTemplate, version: TemplateVersion | None) -> TemplateOut:
    return TemplateOut(id=template.id, name=template.name, version=template.latest_version, team_id=template.team_id,
                       variables=list(version.variables) if version else [], created_at=template.created_at)


@bp.post("/templates")
@operation("Create a template", tag="Templates", body=TemplateBody, responses={201: TemplateOut},
           errors=(400, 403, 422), idempotent=True)
def create():
    """Checked on the way in: a template that does not render, or fetches from the network, is refused (422)."""
    body = parse_body(TemplateBody)
    mail_texts = {f: getattr(body, f) for f in MAIL_FIELDS if getattr(body, f) is not None}
    try:
        saved = dt.create_template(db.session, user=g.api_user, now=utcnow(), team_id=body.team_id, name=body.name,
                                   html=body.html, **mail_texts)
        db.session.commit()
    except dt.TemplateError as exc:
        raise ApiError(exc.message, 422, code="template_invalid", details={"line": exc.line}) from None
    return answer(template_out(saved.template, saved.version), 201)


@bp.get("/templates")
@operation("List templates", tag="Templates", query=PageQuery, responses={200: TemplatePage}, errors=(400,))
def index():
    """The templates the key's user may use, by name."""
    query = parse_query(PageQuery)
    try:
        after = keyset.decode(query.cursor, str, int) if query.cursor else None
    except keyset.CursorError as exc:
        raise ApiError(str(exc), 422, code="invalid_cursor") from None
    templates = dt.list_templates(db.session, user=g.api_user, after=after, limit=query.limit + 1)
    shown = templates[:query.limit]
    last = shown[-1] if len(templates) > query.limit else None
    return answer(TemplatePage(items=[template_out(t, dt.get_version(db.session, template_id=t.id)) for t in shown],
                               next_cursor=keyset.encode(last.name, last.id) if last else None))

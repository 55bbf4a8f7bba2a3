"""API for document templates: create (a first version, from JSON or an uploaded file), list, place boxes on a PDF,
read and set the fields the signer fills."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from flask import Blueprint, g, request
from pydantic import BaseModel, ConfigDict, Field

from bulksign.core import keyset
from bulksign.core.extensions import db
from bulksign.doc_templates import kinds as template_kinds
from bulksign.doc_templates import pdf_forms
from bulksign.doc_templates import versions as dt
from bulksign.doc_templates.columns import OPTIONAL, needed_columns
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.fields import (
    FIELD_TYPES,
    MAX_LABEL_CHARS,
    MAX_OPTIONS,
    MAX_PATTERN_CHARS,
    FieldSettingsError,
    template_fields,
)
from bulksign.doc_templates.mail_texts import MAIL_FIELDS
from bulksign.doc_templates.roles import template_roles
from bulksign.documents.field_boxes import MAX_FIELDS
from bulksign.models import DocumentTemplate, TemplateVersion, utcnow
from bulksign.people import access
from bulksign.views.api.common import (
    ApiError,
    NextCursor,
    PageQuery,
    RecordId,
    Text,
    answer,
    no_null_defaults,
    operation,
    parse_body,
    parse_form,
    parse_query,
)

bp = Blueprint("api_templates", __name__, url_prefix="/api/v1")


class TemplateOut(BaseModel):
    id: int
    name: str
    version: int = Field(description="The newest version's number; batches use the newest version.")
    team_id: int | None
    kind: str | None = Field(description="`html`, `docx` or `pdf`: what the newest version was made from.")
    variables: list[str] = Field(
        description="The `{{ placeholders }}` (or PDF fields) of the newest version; `required` and `optional` "
        "say which columns a recipients file must fill (besides `email`)."
    )
    roles: list[str] = Field(
        description="Who signs each document, in the order of their marks in the newest version: `recipient` (the "
        "row's own, `{{ signature }}`, first when unmarked) and each `<role>` of a `{{ signature_<role> }}` mark "
        "(a PDF's field or box `signature_<role>`)."
    )
    required: list[str] = Field(
        description="Columns every row must fill: printed whatever the row holds by the document or the mail."
    )
    optional: list[str] = Field(
        description="Columns used only under a condition, in a test or with a default, and each field's prefill "
        "column `field_<name>` (see `GET .../fields`): a file may leave them out or empty."
    )
    created_at: datetime


class TemplatePage(NextCursor):
    items: list[TemplateOut]


class TemplateBody(BaseModel):
    name: Text = Field(min_length=1, max_length=200)
    html: Text = Field(
        max_length=dt.MAX_TEMPLATE_CHARS, description="The document, HTML with Jinja `{{ placeholders }}` (sandboxed)."
    )
    team_id: RecordId | None = Field(None, description="The team that shares it; default: your first team.")
    email_subject: Text | None = Field(None, max_length=500)
    email_body: Text | None = Field(None, max_length=dt.MAX_TEMPLATE_CHARS)
    reminder_subject: Text | None = Field(None, max_length=500)
    reminder_body: Text | None = Field(None, max_length=dt.MAX_TEMPLATE_CHARS)


class TemplateForm(BaseModel):
    """The same template as an uploaded file: .html, a Word .docx or a (fillable) PDF."""

    # Multipart fields are left out, never null; unknown ones are refused.
    model_config = ConfigDict(extra="forbid", json_schema_extra=no_null_defaults)
    FILE_CONTENT_TYPES: ClassVar[str] = (
        "text/html, application/vnd.openxmlformats-officedocument.wordprocessingml.document, application/pdf"
    )
    name: Text = Field(min_length=1, max_length=200)
    file: bytes = Field(
        description="The document: .html, .docx with `{{ placeholders }}`, or a PDF whose form fields name the columns."
    )
    team_id: RecordId = Field(None, description="The team that shares it; default: your first team.")
    email_subject: Text = Field(None, max_length=500)
    email_body: Text = Field(None, max_length=dt.MAX_TEMPLATE_CHARS)
    reminder_subject: Text = Field(None, max_length=500)
    reminder_body: Text = Field(None, max_length=dt.MAX_TEMPLATE_CHARS)


#: The largest page a PDF may have (PDF 32000-1, annex C: 14,400 units): no box lies beyond it.
MAX_POINTS = 14_400.0


class BoxIn(BaseModel):
    """One box on a page, in PDF points (1/72 inch) of the page's own coordinates, as its form fields have them:
    from the lower-left corner, y upwards (for the rare page whose crop box is offset, as offset as that box)."""

    # NaN and infinity are refused as such ("a finite number"), not with a range that NaN is merely outside of.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    variable: Text = Field(
        min_length=1,
        max_length=100,
        description="The column whose value is printed in the box; `signature`: where the "
        "signature block goes (at most one).",
    )
    page: int = Field(ge=1, le=pdf_forms.MAX_PAGES, description="The page, 1 for the first.")
    x: float = Field(ge=-MAX_POINTS, le=MAX_POINTS, description="Left edge, points from the page's left edge.")
    y: float = Field(ge=-MAX_POINTS, le=MAX_POINTS, description="Bottom edge, points up from the page's bottom edge.")
    width: float = Field(gt=0, le=MAX_POINTS, description=f"Points; at least {pdf_forms.MIN_BOX_SIDE:g}.")
    height: float = Field(
        gt=0,
        le=MAX_POINTS,
        description=f"Points; at least {pdf_forms.MIN_BOX_SIDE:g}. A box at least 2.4 font "
        "sizes tall wraps its text over several lines.",
    )
    font_size: float = Field(
        0,
        ge=0,
        le=pdf_forms.MAX_FONT_SIZE,
        description=f"Points, {pdf_forms.MIN_FONT_SIZE:g} to {pdf_forms.MAX_FONT_SIZE:g}; 0 fits the text to the box.",
    )


class BoxesBody(BaseModel):
    boxes: list[BoxIn] = Field(
        max_length=pdf_forms.MAX_FIELDS,
        description="Every box of the new version (they replace the placed ones; `[]` "
        "removes them). A form's own fields stay.",
    )


class PageOut(BaseModel):
    page: int = Field(description="1 for the first.")
    left: float = Field(description="The crop box's left edge, points (0 on almost every page).")
    bottom: float = Field(description="The crop box's bottom edge, points (0 on almost every page).")
    width: float = Field(description="Points.")
    height: float = Field(description="Points.")
    rotation: int = Field(description="Degrees a viewer turns the page; boxes cannot be placed on a turned page.")


class FieldOut(BaseModel):
    variable: str = Field(description="The form field's name: the column whose value fills it.")
    page: int = Field(description="1 for the first.")
    x: float
    y: float
    width: float
    height: float


class BoxesOut(BaseModel):
    version: int = Field(description="The newest version, which these boxes belong to.")
    pages: list[PageOut]
    fields: list[FieldOut] = Field(description="The form's own fields: they stay where the file has them.")
    boxes: list[BoxIn] = Field(description="The placed boxes, as `PUT` takes them: send them back changed.")


def template_out(template: DocumentTemplate, version: TemplateVersion | None) -> TemplateOut:
    columns = needed_columns(version) if version else {}
    return TemplateOut(
        id=template.id,
        name=template.name,
        version=template.latest_version,
        team_id=template.team_id,
        kind=version.kind if version else None,
        variables=list(version.variables) if version else [],
        roles=template_roles(version) if version else [],
        required=[v for v, where in columns.items() if where != OPTIONAL],
        optional=[v for v, where in columns.items() if where == OPTIONAL],
        created_at=template.created_at,
    )


def _file_fields(form: TemplateForm) -> dict:
    """The uploaded file as ``create_template`` takes it: HTML as text, other kinds as bytes."""
    upload = request.files["file"]
    try:
        kind = template_kinds.kind_for_filename(upload.filename or "")
    except TemplateError as exc:
        raise ApiError(str(exc.message), 422, code="file_refused") from None
    raw = upload.read(template_kinds.MAX_SOURCE_BYTES + 1)
    if kind != template_kinds.HTML:
        return {"kind": kind, "html": "", "file": raw}
    try:
        return {"kind": kind, "html": raw.decode("utf-8-sig")}
    except UnicodeDecodeError:
        raise ApiError("Save the .html file as UTF-8 and send it again.", 422, code="file_refused") from None


@bp.post("/templates")
@operation(
    "Create a template",
    tag="Templates",
    body=TemplateBody,
    form=TemplateForm,
    responses={201: TemplateOut},
    errors=(400, 403, 422),
    idempotent=True,
)
def create():
    """JSON with the HTML, or multipart `name` + `file` (.html, .docx, .pdf). Checked on the way in: a template
    that does not render, or fetches from the network, is refused (422)."""
    if request.mimetype == "multipart/form-data":
        form = parse_form(TemplateForm)
        fields = {"name": form.name, **_file_fields(form)}
    else:
        form = parse_body(TemplateBody)
        fields = {"name": form.name, "html": form.html}
    mail_texts = {f: getattr(form, f) for f in MAIL_FIELDS if getattr(form, f) is not None}
    try:
        saved = dt.create_template(
            db.session, user=g.api_user, now=utcnow(), team_id=form.team_id, **fields, **mail_texts
        )
        db.session.commit()
    except TemplateError as exc:
        db.session.rollback()
        raise ApiError(
            str(exc.message),
            422,
            code="template_invalid",
            details={"line": exc.line, "hint": str(exc.hint) if exc.hint else None},
        ) from None
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
    shown = templates[: query.limit]
    last = shown[-1] if len(templates) > query.limit else None
    return answer(
        TemplatePage(
            items=[template_out(t, dt.get_version(db.session, template_id=t.id)) for t in shown],
            next_cursor=keyset.encode(last.name, last.id) if last else None,
        )
    )


@bp.put("/templates/<int:template_id>/boxes")
@operation(
    "Place boxes on a PDF template",
    tag="Templates",
    body=BoxesBody,
    responses={200: TemplateOut},
    errors=(400, 403, 404, 409, 422),
)
def place_boxes(template_id: int):
    """For a PDF without form fields (or besides its fields): where each column's value is printed, as staff place
    boxes on the template's pages. Saved as a new version, the file and mail texts kept; batches already created
    keep the version they used. 409 `not_a_pdf_template` when the newest version is HTML or Word; 422
    `boxes_invalid` for a box beyond its page, on a missing or rotated page, or a second signature."""
    body = parse_body(BoxesBody)
    template = access.template_for_edit(db.session, template_id=template_id, user=g.api_user)
    boxes = [
        {
            "name": b.variable,
            "page": b.page - 1,
            "x": b.x,
            "y": b.y,
            "w": b.width,
            "h": b.height,
            "font_size": b.font_size,
        }
        for b in body.boxes
    ]
    try:
        saved = dt.place_boxes(db.session, template=template, boxes=boxes, user=g.api_user, now=utcnow())
        db.session.commit()
    except dt.NotPdfTemplate as exc:
        raise ApiError(str(exc.message), 409, code="not_a_pdf_template") from None
    except TemplateError as exc:
        raise ApiError(str(exc.message), 422, code="boxes_invalid") from None
    return answer(template_out(saved.template, saved.version))


@bp.get("/templates/<int:template_id>/boxes")
@operation("Read a PDF template's pages and boxes", tag="Templates", responses={200: BoxesOut}, errors=(404, 409))
def boxes(template_id: int):
    """The newest version's pages (sizes in points), its form's own fields and the boxes placed on it, in the units
    `PUT .../boxes` takes, so a client can move a box and send the list back. 409 `not_a_pdf_template` when the
    newest version is HTML or Word."""
    template = access.template_for_use(db.session, template_id=template_id, user=g.api_user)
    try:
        layout = dt.pdf_layout(db.session, template=template)
    except dt.NotPdfTemplate as exc:
        raise ApiError(str(exc.message), 409, code="not_a_pdf_template") from None
    return answer(
        BoxesOut(
            version=layout.version.version,
            pages=[
                PageOut(
                    page=i,
                    left=round(p.left, 2),
                    bottom=round(p.bottom, 2),
                    width=round(p.width, 2),
                    height=round(p.height, 2),
                    rotation=p.rotation,
                )
                for i, p in enumerate(layout.form.pages, start=1)
            ],
            fields=[
                FieldOut(
                    variable=f.name,
                    page=f.page + 1,
                    x=round(f.x, 2),
                    y=round(f.y, 2),
                    width=round(f.w, 2),
                    height=round(f.h, 2),
                )
                for f in layout.form.fields
            ],
            boxes=[
                BoxIn(variable=b.name, page=b.page + 1, x=b.x, y=b.y, width=b.w, height=b.h, font_size=b.font_size)
                for b in layout.boxes
            ],
        )
    )


class FieldSettingsIn(BaseModel):
    """One field the signer fills, marked `{{ field_<name> }}` in the document (a PDF's form field or box
    `field_<name>`). A field is never a column the recipients file must have: a column `field_<name>` prefills it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: Text = Field(min_length=1, max_length=40, description="`iban` for the mark `{{ field_iban }}`.")
    type: Text = Field("text", description=f"One of {', '.join(f'`{t}`' for t in FIELD_TYPES)}.")
    label: Text = Field(
        "", max_length=MAX_LABEL_CHARS, description="What the signer reads at the field; empty: its name."
    )
    required: bool = Field(True, description="The signer must fill it to sign.")
    pattern: Text | None = Field(
        None,
        max_length=MAX_PATTERN_CHARS,
        description="`text` only: a regular expression (Python's) the whole value must match.",
    )
    minimum: float | Text | None = Field(
        None, description="`number`: the lowest number; `date`: the earliest date, YYYY-MM-DD. Null: open."
    )
    maximum: float | Text | None = Field(
        None, description="`number`: the highest number; `date`: the latest date, YYYY-MM-DD. Null: open."
    )
    options: list[Text] = Field(
        [], max_length=MAX_OPTIONS, description="`choice` only (and needed): what to choose from."
    )
    read_only: bool = Field(
        False, description="When the file prefills it (a column `field_<name>`), the signer may not change it."
    )
    role: Text = Field(
        "recipient", description="Who fills it: `recipient` (the row's own) or another role of the template's `roles`."
    )


class FieldSettingsOut(FieldSettingsIn):
    column: str = Field(description="The column of the recipients file that prefills it: `field_<name>`.")


class FieldsBody(BaseModel):
    fields: list[FieldSettingsIn] = Field(
        max_length=MAX_FIELDS,
        description="Settings for the template's fields; a field left out gets the defaults (`text`, required, the "
        "recipient's).",
    )


class FieldsOut(BaseModel):
    version: int = Field(description="The newest version, which these fields belong to.")
    roles: list[str] = Field(description="Who signs, as `role` may name them.")
    fields: list[FieldSettingsOut] = Field(description="The template's fields in the order the document has them.")


def fields_out(version: TemplateVersion) -> FieldsOut:
    return FieldsOut(
        version=version.version,
        roles=template_roles(version),
        fields=[FieldSettingsOut(**f.to_json(), column=f.column) for f in template_fields(version)],
    )


@bp.get("/templates/<int:template_id>/fields")
@operation("Read a template's fields", tag="Templates", responses={200: FieldsOut}, errors=(404,))
def fields(template_id: int):
    """The fields the signer fills, as the newest version marks them, in document order, with their settings, as
    `PUT .../fields` takes them."""
    template = access.template_for_use(db.session, template_id=template_id, user=g.api_user)
    return answer(fields_out(dt.get_version(db.session, template_id=template.id)))  # every template has one


@bp.put("/templates/<int:template_id>/fields")
@operation(
    "Set a template's fields",
    tag="Templates",
    body=FieldsBody,
    responses={200: FieldsOut},
    errors=(400, 403, 404, 422),
)
def set_fields(template_id: int):
    """Settings for the fields the signer fills. Saved as a new version, the document and mail texts kept; batches
    already created keep the version they used. 422 `fields_invalid` (`details.field` names the field) for a field
    the template does not mark, a choice without options, a pattern that is no regular expression, a range whose
    lowest end is above its highest, or a role that does not sign the template."""
    body = parse_body(FieldsBody)
    template = access.template_for_edit(db.session, template_id=template_id, user=g.api_user)
    try:
        saved = dt.save_fields(
            db.session,
            template=template,
            fields=[f.model_dump() for f in body.fields],
            user=g.api_user,
            now=utcnow(),
        )
        db.session.commit()
    except FieldSettingsError as exc:
        db.session.rollback()
        raise ApiError(str(exc.message), 422, code="fields_invalid", details={"field": exc.field}) from None
    except TemplateError as exc:
        db.session.rollback()
        raise ApiError(str(exc.message), 422, code="template_invalid") from None
    return answer(fields_out(saved.version))

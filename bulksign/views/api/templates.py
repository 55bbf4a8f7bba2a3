"""API for document templates: create (a first version, from JSON or an uploaded file), list, place boxes on a PDF,
assign its form's own fields, read and set the fields the signer fills, the parties and their order; the shapes read
and answered are in ``template_models``."""

from __future__ import annotations

from collections.abc import Callable

from flask import Blueprint, abort, g, request

from bulksign.core import keyset
from bulksign.core.extensions import db
from bulksign.doc_templates import kinds as template_kinds
from bulksign.doc_templates import versions as dt
from bulksign.doc_templates.errors import FieldSettingsError, TemplateError
from bulksign.doc_templates.mail_texts import MAIL_FIELDS
from bulksign.doc_templates.template_parties import PartiesError
from bulksign.doc_templates.template_sample import save_sample
from bulksign.models import utcnow
from bulksign.people import access
from bulksign.views.api.common import (
    ApiError,
    PageQuery,
    answer,
    operation,
    parse_body,
    parse_form,
    parse_query,
)
from bulksign.views.api.template_models import (
    BoxesBody,
    BoxesOut,
    BoxIn,
    FieldOut,
    FieldsBody,
    FieldsOut,
    FormFieldsBody,
    PageOut,
    PartiesBody,
    PartiesOut,
    SampleBody,
    TemplateBody,
    TemplateForm,
    TemplateOut,
    TemplatePage,
    fields_out,
    parties_out,
    template_out,
)

bp = Blueprint("api_templates", __name__, url_prefix="/api/v1")
#: The API answers in English: the template check names parties by their English labels.
API_LANGUAGE = "en"


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
    form: TemplateForm | TemplateBody
    if request.mimetype == "multipart/form-data":
        form = parse_form(TemplateForm)
        fields = {"name": form.name, **_file_fields(form)}
    else:
        form = body = parse_body(TemplateBody)
        fields = {"name": body.name, "html": body.html}
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


@bp.put("/templates/<int:template_id>/form-fields")
@operation(
    "Assign a PDF form's own fields",
    tag="Templates",
    body=FormFieldsBody,
    responses={200: TemplateOut},
    errors=(400, 403, 404, 409, 422),
)
def set_form_fields(template_id: int):
    """What each of a fillable PDF's own fields is made: a field a party fills in on their signing page, a party's
    signature, a column of the file, or (left out) the column of its own name. Saved as a new version, the file,
    boxes and mail texts kept; a field made a party's keeps its settings in `GET .../fields`, its party and type
    set here. 409 `not_a_pdf_template` when the newest version is HTML or Word; 422 `form_fields_invalid` for a
    field the form does not have, given twice, a choice without options in the form, a column that is no column's
    name or a second signature place of one party."""
    body = parse_body(FormFieldsBody)
    template = access.template_for_edit(db.session, template_id=template_id, user=g.api_user)
    try:
        saved = dt.place_boxes(
            db.session,
            template=template,
            boxes=None,
            form_fields=[f.model_dump() for f in body.form_fields],
            user=g.api_user,
            now=utcnow(),
        )
        db.session.commit()
    except dt.NotPdfTemplate as exc:
        raise ApiError(str(exc.message), 409, code="not_a_pdf_template") from None
    except TemplateError as exc:
        raise ApiError(str(exc.message), 422, code="form_fields_invalid") from None
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


def _committed(
    save: Callable[[], dt.SavedVersion], *, refused: type[TemplateError], code: str, named: str
) -> dt.SavedVersion:
    """Run ``save`` and commit; a ``refused`` error answers 422 ``code`` with ``details[named]`` naming what it is
    about, any other refusal of the template 422 ``template_invalid``."""
    try:
        saved = save()
        db.session.commit()
    except refused as exc:
        db.session.rollback()
        raise ApiError(str(exc.message), 422, code=code, details={named: exc.field}) from None
    except TemplateError as exc:
        db.session.rollback()
        raise ApiError(str(exc.message), 422, code="template_invalid") from None
    return saved


@bp.get("/templates/<int:template_id>/fields")
@operation("Read a template's fields", tag="Templates", responses={200: FieldsOut}, errors=(404,))
def fields(template_id: int):
    """The fields the signer fills, as the newest version marks them, in document order, with their settings, as
    `PUT .../fields` takes them."""
    template = access.template_for_use(db.session, template_id=template_id, user=g.api_user)
    return answer(fields_out(dt.get_version(db.session, template_id=template.id) or abort(404)))  # every one has one


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
    lowest end is above its highest, a role that does not sign the template, or a condition whose field the template
    does not have, that looks at its own field, goes round in a circle or at a field a party fills later."""
    body = parse_body(FieldsBody)
    template = access.template_for_edit(db.session, template_id=template_id, user=g.api_user)
    saved = _committed(
        lambda: dt.save_fields(
            db.session, template=template, fields=[f.model_dump() for f in body.fields], user=g.api_user, now=utcnow()
        ),
        refused=FieldSettingsError,
        code="fields_invalid",
        named="field",
    )
    return answer(fields_out(saved.version))


@bp.get("/templates/<int:template_id>/parties")
@operation("Read a template's parties", tag="Templates", responses={200: PartiesOut}, errors=(404,))
def parties(template_id: int):
    """Who signs the newest version (labels, colours, who by default), the order they sign in, and the template
    check, as `PUT .../parties` takes them."""
    template = access.template_for_use(db.session, template_id=template_id, user=g.api_user)
    version = dt.get_version(db.session, template_id=template.id) or abort(404)
    return answer(parties_out(version, language=API_LANGUAGE))


@bp.put("/templates/<int:template_id>/parties")
@operation(
    "Set a template's parties and signing order",
    tag="Templates",
    body=PartiesBody,
    responses={200: PartiesOut},
    errors=(400, 403, 404, 422),
)
def set_parties(template_id: int):
    """Parties and signing order, saved as a new version (the document, fields and mail texts kept). 422
    `parties_invalid` (`details.party` names the party) for a key that is not a word, a key given twice, a label
    that is not one line, an unknown language, a fixed party without a real address, a party the document marks
    left out, or an order that names a party twice, names none that exists or leaves one out."""
    body = parse_body(PartiesBody)
    template = access.template_for_edit(db.session, template_id=template_id, user=g.api_user)
    saved = _committed(
        lambda: dt.save_parties(
            db.session,
            template=template,
            parties=[p.model_dump() for p in body.parties],
            routing=body.routing,
            user=g.api_user,
            now=utcnow(),
        ),
        refused=PartiesError,
        code="parties_invalid",
        named="party",
    )
    return answer(parties_out(saved.version, language=API_LANGUAGE))


@bp.put("/templates/<int:template_id>/sample")
@operation(
    "Set a template's sample row",
    tag="Templates",
    body=SampleBody,
    responses={200: TemplateOut},
    errors=(400, 403, 404),
)
def set_sample(template_id: int):
    """The sample row the parties' previews are rendered with (column → value), kept with the template: not a new
    version, and no batch uses it. The template check (`GET .../parties`) warns of each column the template uses
    that it leaves out or empty."""
    body = parse_body(SampleBody)
    template = access.template_for_edit(db.session, template_id=template_id, user=g.api_user)
    save_sample(db.session, template=template, sample=body.sample)
    db.session.commit()
    return answer(template_out(template, dt.get_version(db.session, template_id=template.id)))

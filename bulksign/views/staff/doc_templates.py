"""Staff pages for document templates: list, create, edit (a new version each save), details, PDF preview."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, abort, current_app, flash, redirect, render_template, request, url_for
from flask_babel import get_locale
from flask_babel import gettext as _
from flask_login import current_user

from bulksign.core.extensions import db
from bulksign.doc_templates import kinds as template_kinds
from bulksign.doc_templates import pdf_forms
from bulksign.doc_templates import versions as dt
from bulksign.doc_templates.columns import needed_columns
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.fields import SIGNED_TYPES, FieldSettings, template_fields
from bulksign.doc_templates.mail_texts import (
    DEFAULT_EMAIL_BODY,
    DEFAULT_EMAIL_SUBJECT,
    DEFAULT_REMINDER_BODY,
    DEFAULT_REMINDER_SUBJECT,
    MAIL_FIELDS,
    current_text,
    mail_text,
)
from bulksign.doc_templates.pdf_form_fields import FORM_FIELD_TYPES, own_fields, signature_place
from bulksign.doc_templates.render_path import render_path
from bulksign.doc_templates.roles import template_roles
from bulksign.doc_templates.template_check import check_template
from bulksign.doc_templates.template_palette import palette
from bulksign.doc_templates.template_parties import party_labels, template_parties, template_routing
from bulksign.doc_templates.variables import BUILTIN_VARIABLES, sample_row
from bulksign.documents import pdf_pages
from bulksign.documents.field_boxes import stored_marks
from bulksign.documents.pdf import RenderError
from bulksign.documents.signature_box import SIGNATURE_VARIABLE
from bulksign.documents.storage import StorageError, get_storage
from bulksign.models import RECIPIENT_ROLE, DocumentTemplate, TemplateVersion, utcnow
from bulksign.people import access
from bulksign.views.staff.template_forms import (
    FIELD_TYPE_LABELS,
    PARTY_SOURCE_LABELS,
    Submitted,
    condition_of,
    field_hints,
    form_field_uses,
    submitted_document,
)

bp = Blueprint("doc_templates", __name__, url_prefix="/templates")

DEFAULTS = {
    "email_subject": DEFAULT_EMAIL_SUBJECT,
    "email_body": DEFAULT_EMAIL_BODY,
    "reminder_subject": DEFAULT_REMINDER_SUBJECT,
    "reminder_body": DEFAULT_REMINDER_BODY,
}


def _template_or_404(template_id: int) -> DocumentTemplate:
    return db.session.get(DocumentTemplate, template_id) or abort(404)


def _mail_fields() -> dict[str, str]:
    return {f: request.form.get(f) or DEFAULTS[f] for f in MAIL_FIELDS}


@bp.get("/")
def index():
    templates = dt.list_templates(db.session, user=current_user)
    latest = {t.id: dt.get_version(db.session, template_id=t.id) for t in templates}
    return render_template("doc_templates/index.html", templates=templates, latest=latest)


def _commit_version(save: Callable[[], dt.SavedVersion]) -> tuple[dt.SavedVersion | None, TemplateError | None]:
    """Run ``save`` and commit, telling staff the new version's number; or roll back and return the refusal."""
    try:
        saved = save()
        db.session.commit()
    except TemplateError as exc:
        db.session.rollback()
        return None, exc
    flash(
        _("Saved as version %(n)s. Batches already created keep the version they used.", n=saved.version.version),
        "success",
    )
    if saved.removed:
        flash(
            _(
                "Taken out of the PDF, so that no recipient gets it: %(what)s.",
                what=", ".join(str(label) for label in saved.removed),
            ),
            "info",
        )
    return saved, None


def _form_page(form: dict, template: DocumentTemplate | None, save: Callable[[Submitted, dict], dt.SavedVersion]):
    """On POST, ``save(document, mail_fields)`` and go to the template; else (or on a refusal) the form."""
    error = None
    if request.method == "POST":
        form.update(
            html=request.form.get("html", ""), kind=request.form.get("kind", template_kinds.HTML), **_mail_fields()
        )

        def submitted() -> dt.SavedVersion:
            document = submitted_document()
            form.update(kind=document.kind, html=document.html)
            return save(document, _mail_fields())

        saved, error = _commit_version(submitted)
        if saved is not None:
            return redirect(url_for(".detail", template_id=saved.template.id))
    return (
        render_template(
            "doc_templates/form.html",
            form=form,
            error=error,
            template=template,
            kinds=template_kinds.choices(),
            palette=palette(
                dt.get_version(db.session, template_id=template.id) if template else None,
                language=str(get_locale()),
            ),
            field_types=FIELD_TYPE_LABELS,
            signed_types=SIGNED_TYPES,
        ),
        422 if error else 200,
    )


@bp.route("/new", methods=["GET", "POST"])
def new():
    form = {"name": request.form.get("name", ""), "html": "", "kind": template_kinds.HTML, **DEFAULTS}
    return _form_page(
        form,
        None,
        lambda document, mail: dt.create_template(
            db.session,
            name=form["name"],
            html=document.html,
            kind=document.kind,
            file=document.file,
            user=current_user,
            now=utcnow(),
            team_id=request.form.get("team_id", type=int),
            field_hints=field_hints(),
            **mail,
        ),
    )


@bp.route("/<int:template_id>/edit", methods=["GET", "POST"])
def edit(template_id: int):
    template = access.template_for_edit(db.session, template_id=template_id, user=current_user)
    version = dt.get_version(db.session, template_id=template.id)
    form = {
        "name": template.name,
        "html": version.html if version else "",
        "kind": version.kind if version else template_kinds.HTML,
        **{f: current_text(text=getattr(version, f)) if version else DEFAULTS[f] for f in MAIL_FIELDS},
    }
    return _form_page(
        form,
        template,
        lambda document, mail: dt.save_version(
            db.session,
            template=template,
            html=document.html,
            kind=document.kind,
            file=document.file,
            user=current_user,
            now=utcnow(),
            field_hints=field_hints(),
            **mail,
        ),
    )


@bp.get("/<int:template_id>")
def detail(template_id: int):
    template = _template_or_404(template_id)
    number = request.args.get("version", type=int)
    version = dt.get_version(db.session, template_id=template.id, version=number) or abort(404)
    return _detail_page(template, version)


#: What the template page calls each type of field (``fields.FIELD_TYPES``).
@bp.post("/<int:template_id>/fields")
def set_fields(template_id: int):
    """The settings of the fields the signer fills, from the template page's list: saved as a new version."""
    template = access.template_for_edit(db.session, template_id=template_id, user=current_user)
    version = dt.get_version(db.session, template_id=template.id) or abort(404)
    given: list[dict[str, Any]] = [
        {
            "name": field.name,
            **{key: request.form.get(f"{field.name}-{key}", "") for key in ("type", "label", "pattern", "role")},
            **{key: request.form.get(f"{field.name}-{key}") or None for key in ("minimum", "maximum")},
            "options": request.form.get(f"{field.name}-options", "").splitlines(),
            "required": f"{field.name}-required" in request.form,
            "read_only": f"{field.name}-read_only" in request.form,
            "condition": condition_of(field.name),
        }
        for field in template_fields(version)
    ]
    saved, error = _commit_version(
        lambda: dt.save_fields(db.session, template=template, fields=given, user=current_user, now=utcnow())
    )
    if saved is not None:
        return redirect(url_for(".detail", template_id=template.id, _anchor="fields"))
    # The refused settings stay as typed, at the field the error names.
    shown = [FieldSettings.from_json(g) for g in given]
    return _detail_page(template, version, fields=shown, fields_error=error), 422


@bp.post("/<int:template_id>/parties")
def set_parties(template_id: int):
    """The template's parties and signing order, from the template page's editor: saved as a new version."""
    template = access.template_for_edit(db.session, template_id=template_id, user=current_user)
    version = dt.get_version(db.session, template_id=template.id) or abort(404)
    form = request.form
    given = [
        {
            "key": key.strip(),
            "labels": {language: form.getlist(f"party-label-{language}")[i] for language in ("en", "ru")},
            **{part: form.getlist(f"party-{part}")[i] for part in ("colour", "source", "name", "email")},
        }
        for i, key in enumerate(form.getlist("party-key"))
        if key.strip() and all(len(form.getlist(f"party-{part}")) > i for part in ("colour", "source", "name", "email"))
    ]
    try:
        routing = current_app.json.loads(form.get("routing") or "null")
    except ValueError:
        routing = None  # the page's order could not be read: the previous order, fitted to the parties
    saved, error = _commit_version(
        lambda: dt.save_parties(
            db.session, template=template, parties=given, routing=routing, user=current_user, now=utcnow()
        )
    )
    if saved is not None:
        return redirect(url_for(".detail", template_id=template.id, _anchor="parties"))
    return _detail_page(template, version, parties_error=error), 422


def _detail_page(
    template: DocumentTemplate,
    version: TemplateVersion,
    *,
    fields: list[FieldSettings] | None = None,
    fields_error: TemplateError | None = None,
    parties_error: TemplateError | None = None,
):
    try:
        signature = signature_place(version)  # a PDF's field or box named "signature", drawn on its page
    except (TemplateError, StorageError):
        signature = None  # the page still shows the version; its preview says what is wrong
    try:
        roles = template_roles(version)
    except (TemplateError, StorageError):
        roles = []
    return render_template(
        "doc_templates/detail.html",
        template=template,
        version=version,
        versions=list(reversed(template.versions)),
        kind_label=dict(template_kinds.choices()).get(version.kind, version.kind),
        columns=needed_columns(version),
        signature=signature,
        roles=roles,
        fields=template_fields(version) if fields is None else fields,
        fields_error=fields_error,
        field_types=FIELD_TYPE_LABELS,
        signed_types=SIGNED_TYPES,
        parties=template_parties(version),
        party_names=party_labels(version, language=str(get_locale())),
        routing=template_routing(version),
        parties_error=parties_error,
        check=check_template(version, language=str(get_locale())),
        party_sources=PARTY_SOURCE_LABELS,
        render=render_path(version, enabled=current_app.config["RENDER_TOGETHER"]),
        all_variables=sorted({*version.variables, *([SIGNATURE_VARIABLE] if signature else [])}),
        # A kept default subject reads as its recipients (and these staff) get it: in the page's language.
        subjects={f: mail_text(getattr(version, f), language=str(get_locale())) for f in MAIL_FIELDS},
    )


@bp.get("/<int:template_id>/preview")
def preview(template_id: int):
    """The partial that puts the PDF preview in the page."""
    template = _template_or_404(template_id)
    number = request.args.get("version", type=int)
    version = dt.get_version(db.session, template_id=template.id, version=number) or abort(404)
    return render_template("doc_templates/_preview.html", template=template, version=version)


@bp.get("/<int:template_id>/preview.pdf")
def preview_pdf(template_id: int):
    template = _template_or_404(template_id)
    number = request.args.get("version", type=int)
    version = dt.get_version(db.session, template_id=template.id, version=number) or abort(404)
    try:
        pdf = template_kinds.render_document(
            version,
            sample_row(version.variables, stored_marks(version.fields)),
            timeout=current_app.config["PREVIEW_TIMEOUT_SECONDS"],
        )
    except (TemplateError, RenderError, StorageError) as exc:
        # The frame shows a page of its own with the reason, not the app's error page with its menu.
        return (
            render_template("doc_templates/preview_failed.html", error=exc, message=getattr(exc, "message", exc)),
            422,
        )
    return Response(
        pdf,
        mimetype="application/pdf",
        headers={
            "Content-Disposition": f'inline; filename="template-{template.id}-v{version.version}-preview.pdf"',
            "Cache-Control": "private, no-store",
        },
    )


def _pdf_version(template: DocumentTemplate):
    """The version asked for (``?version=``, default the newest), which must be a PDF template's."""
    version = dt.get_version(db.session, template_id=template.id, version=request.args.get("version", type=int))
    if version is None or version.kind != "pdf":
        abort(404)
    return version


@bp.get("/<int:template_id>/pages/<int:page>.png")
def page_image(template_id: int, page: int):
    """One page of a PDF template as an image (drawn once, kept in storage), for the placement editor."""
    version = _pdf_version(_template_or_404(template_id))
    if not 1 <= page <= pdf_forms.MAX_PAGES:
        abort(404)
    try:
        png = pdf_pages.page_png(
            get_storage(),
            pdf_key=version.source_key,
            page=page - 1,
            width=request.args.get("w", pdf_pages.WIDTHS[0], type=int),
        )
    except pdf_pages.PageImageError as exc:
        abort(404, str(exc.message))
    return Response(png, mimetype="image/png")


@bp.route("/<int:template_id>/place", methods=["GET", "POST"])
def place(template_id: int):
    """Place boxes on a PDF template's pages (drag a box, bind it to a column): saved as a new version."""
    template = access.template_for_edit(db.session, template_id=template_id, user=current_user)
    try:
        layout = dt.pdf_layout(db.session, template=template)
    except dt.NotPdfTemplate:
        abort(404)
    except (TemplateError, StorageError) as exc:
        abort(422, str(getattr(exc, "message", exc)))
    version, form = layout.version, layout.form
    error, boxes = None, version.pdf_boxes or []
    if request.method == "POST":
        try:
            # The app's JSON (views.errors.guard_json): a field nested past the parser's depth is a ValueError too.
            boxes = current_app.json.loads(request.form.get("boxes") or "[]")
            if not isinstance(boxes, list) or not all(isinstance(b, dict) for b in boxes):
                raise ValueError
        except ValueError:
            boxes, error = [], TemplateError(_("The boxes could not be read; place them again."))
        uses = form_field_uses() if form.fields else None
        if error is None:
            saved, error = _commit_version(
                lambda: dt.place_boxes(
                    db.session, template=template, boxes=boxes, form_fields=uses, user=current_user, now=utcnow()
                )
            )
            if saved is not None:
                return redirect(url_for(".detail", template_id=template.id))
    fields = [{"name": f.name, "page": f.page, "x": f.x, "y": f.y, "w": f.w, "h": f.h} for f in form.fields]
    # The version's fields too: a box bound to field_<name> is a field the signer fills, not a column.
    fields_now = (f.column for f in template_fields(version))
    # Each party's signature too (``signature_<key>``), named by its label in the list.
    names = party_labels(version, language=str(get_locale()))
    marks = {(f"signature_{k}" if k != RECIPIENT_ROLE else SIGNATURE_VARIABLE): label for k, label in names.items()}
    suggestions = {
        name: marks.get(name, "") for name in sorted({*version.variables, *BUILTIN_VARIABLES, *marks, *fields_now})
    }
    shown = palette(version, language=str(get_locale()))
    return render_template(
        "doc_templates/place.html",
        template=template,
        version=version,
        form=form,
        fields=fields,
        boxes=boxes,
        suggestions=suggestions,
        error=error,
        widths=pdf_pages.WIDTHS,
        own_fields=own_fields(version),
        parties=shown.parties,
        columns=[c.name for c in shown.columns],
        own_types={t: FIELD_TYPE_LABELS[t] for t in FORM_FIELD_TYPES},
    ), 422 if error else 200

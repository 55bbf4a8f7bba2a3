"""Staff pages for document templates: list, create, edit (a new version each save), details, PDF preview."""
from __future__ import annotations

from collections.abc import Callable

from flask import Blueprint, Response, abort, current_app, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user

from .. import access, doc_templates as dt
from ..extensions import db
from ..models import DocumentTemplate, utcnow
from ..pdf import RenderError, render_pdf

bp = Blueprint("doc_templates", __name__, url_prefix="/templates")

#: An uploaded .html template larger than this is surely not a document template.
MAX_TEMPLATE_BYTES = 2 * 1024 * 1024
MAIL_FIELDS = ("email_subject", "email_body", "reminder_subject", "reminder_body")
DEFAULTS = {"email_subject": dt.DEFAULT_EMAIL_SUBJECT, "email_body": dt.DEFAULT_EMAIL_BODY,
            "reminder_subject": dt.DEFAULT_REMINDER_SUBJECT, "reminder_body": dt.DEFAULT_REMINDER_BODY}


def _template_or_404(template_id: int) -> DocumentTemplate:
    return db.session.get(DocumentTemplate, template_id) or abort(404)


def _submitted_html() -> str:
    """The HTML from the uploaded .html file if one was chosen, else from the textarea."""
    upload = request.files.get("html_file")
    if upload and upload.filename:
        if not upload.filename.lower().endswith((".html", ".htm")):
            raise dt.TemplateError(_("Upload the template as an .html file."))
        raw = upload.read(MAX_TEMPLATE_BYTES + 1)
        if len(raw) > MAX_TEMPLATE_BYTES:
            raise dt.TemplateError(_("The template file is larger than 2 MB."))
        try:
            return raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise dt.TemplateError(_("Save the .html file as UTF-8 and upload it again.")) from None
    return request.form.get("html", "")


def _mail_fields() -> dict[str, str]:
    return {f: request.form.get(f) or DEFAULTS[f] for f in MAIL_FIELDS}


@bp.get("/")
def index():
    templates = dt.list_templates(db.session, user=current_user)
    latest = {t.id: dt.get_version(db.session, template_id=t.id) for t in templates}
    return render_template("doc_templates/index.html", templates=templates, latest=latest)


def _form_page(form: dict, template: DocumentTemplate | None, save: Callable[[str, dict], dt.SavedVersion]):
    """On POST, ``save(html, mail_fields)`` and go to the template; else (or on a refusal) the form."""
    error = None
    if request.method == "POST":
        form.update(html=request.form.get("html", ""), **_mail_fields())
        try:
            form["html"] = _submitted_html()
            saved = save(form["html"], _mail_fields())
            db.session.commit()
        except dt.TemplateError as exc:
            db.session.rollback()
            error = exc
        else:
            flash(_("Saved as version %(n)s. Batches already created keep the version they used.",
                    n=saved.version.version), "success")
            return redirect(url_for(".detail", template_id=saved.template.id))
    return (render_template("doc_templates/form.html", form=form, error=error, template=template),
            422 if error else 200)


@bp.route("/new", methods=["GET", "POST"])
def new():
    form = {"name": request.form.get("name", ""), "html": "", **DEFAULTS}
    return _form_page(form, None, lambda html, mail: dt.create_template(
        db.session, name=form["name"], html=html, user=current_user, now=utcnow(),
        team_id=request.form.get("team_id", type=int), **mail))


@bp.route("/<int:template_id>/edit", methods=["GET", "POST"])
def edit(template_id: int):
    template = access.template_for_edit(db.session, template_id=template_id, user=current_user)
    version = dt.get_version(db.session, template_id=template.id)
    form = {"name": template.name, "html": version.html if version else "",
            **{f: getattr(version, f) if version else DEFAULTS[f] for f in MAIL_FIELDS}}
    return _form_page(form, template, lambda html, mail: dt.save_version(
        db.session, template=template, html=html, user=current_user, now=utcnow(), **mail))


@bp.get("/<int:template_id>")
def detail(template_id: int):
    template = _template_or_404(template_id)
    number = request.args.get("version", type=int)
    version = dt.get_version(db.session, template_id=template.id, version=number) or abort(404)
    return render_template("doc_templates/detail.html", template=template, version=version,
                           versions=list(reversed(template.versions)),
                           required=[v for v in version.variables if v not in dt.BUILTIN_VARIABLES])


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
        html = dt.render_html(version.html, dt.sample_row(version.variables))
        pdf = render_pdf(html, timeout=current_app.config["PREVIEW_TIMEOUT_SECONDS"])
    except (dt.TemplateError, RenderError) as exc:
        abort(422, str(getattr(exc, "message", exc)))
    return Response(pdf, mimetype="application/pdf", headers={
        "Content-Disposition": f'inline; filename="template-{template.id}-v{version.version}-preview.pdf"',
        "Cache-Control": "private, no-store"})

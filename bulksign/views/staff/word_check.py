"""Staff pages of the Word check: the tags to copy into a .docx, its upload, and the check's rendered sample pages
with each tag's place, polled while its job runs."""

from __future__ import annotations

from flask import Blueprint, Response, abort, flash, redirect, render_template, request, url_for
from flask_babel import get_locale
from flask_babel import lazy_gettext as _l
from flask_login import current_user

from bulksign.core.extensions import db
from bulksign.doc_templates import docx_package
from bulksign.doc_templates import versions as dt
from bulksign.doc_templates import word_check as wc
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.fields import SIGNED_TYPES
from bulksign.doc_templates.template_palette import Palette, palette
from bulksign.doc_templates.template_parties import party_label
from bulksign.doc_templates.word_tags import TagKind
from bulksign.documents import pdf_pages
from bulksign.documents.pdf import MAX_PAGES
from bulksign.documents.storage import get_storage
from bulksign.models import DocumentTemplate, TemplateVersion, WordCheck, utcnow
from bulksign.people import access
from bulksign.views.staff.template_forms import FIELD_TYPE_LABELS
from bulksign.work.queues import WORD_CHECK

bp = Blueprint("word_check", __name__, url_prefix="/templates")


@bp.route("/word-check", methods=["GET", "POST"])
def start_new():
    """Check a Word file not saved as a template yet."""
    access.require_creator(current_user)
    return _start_page(None)


@bp.route("/<int:template_id>/word-check", methods=["GET", "POST"])
def start_for_template(template_id: int):
    """Check a new Word file for a template, or the one it has, against its parties and fields."""
    return _start_page(access.template_for_edit(db.session, template_id=template_id, user=current_user))


def _start_page(template: DocumentTemplate | None):
    error = None
    if request.method == "POST":
        upload = request.files.get("file")
        data = upload.read(docx_package.MAX_DOCX_BYTES + 1) if upload and upload.filename else None
        try:
            if data is None and template is None:
                raise TemplateError(_l("Choose the Word file to check."))
            check = wc.start_check(
                db.session, storage=get_storage(), user=current_user, now=utcnow(), template=template, data=data
            )
            db.session.commit()
        except TemplateError as exc:
            db.session.rollback()
            error = exc
        else:
            WORD_CHECK.enqueue(check.id, job_id=WORD_CHECK.job_id(id=check.id))
            return redirect(url_for(".show", check_id=check.id))
    version = dt.get_version(db.session, template_id=template.id) if template is not None else None
    return render_template(
        "doc_templates/word_check_start.html",
        template=template,
        version=version,
        palette=palette(version, language=str(get_locale())),
        error=error,
        field_types=FIELD_TYPE_LABELS,
        signed_types=SIGNED_TYPES,
    ), 422 if error else 200


def _own_check(check_id: int) -> WordCheck:
    return wc.get_check(db.session, check_id=check_id, user=current_user) or abort(404)


@bp.get("/word-checks/<int:check_id>")
def show(check_id: int):
    """The check's page: its outcome (polled while the job runs) and the sample row to render it with again."""
    check = _own_check(check_id)
    return render_template("doc_templates/word_check.html", check=check, **_outcome(check))


@bp.get("/word-checks/<int:check_id>/status")
def status(check_id: int):
    """The check's outcome, the partial the page polls."""
    check = _own_check(check_id)
    return render_template("doc_templates/_word_check_outcome.html", check=check, **_outcome(check))


@bp.post("/word-checks/<int:check_id>/again")
def again(check_id: int):
    """The same file checked again with the sample row as edited on the page."""
    check = _own_check(check_id)
    columns = request.form.getlist("sample-column")
    values = request.form.getlist("sample-value")
    sample = {c.strip(): v for c, v in zip(columns, values, strict=False) if c.strip()}
    try:
        fresh = wc.check_again(db.session, check=check, sample=sample, user=current_user, now=utcnow())
    except TemplateError as exc:
        db.session.rollback()
        flash(str(exc.message), "error")
        return redirect(url_for(".show", check_id=check.id))
    db.session.commit()
    WORD_CHECK.enqueue(fresh.id, job_id=WORD_CHECK.job_id(id=fresh.id))
    return redirect(url_for(".show", check_id=fresh.id))


@bp.get("/word-checks/<int:check_id>/pages/<int:page>.png")
def page_image(check_id: int, page: int):
    """One of the check's sample pages as an image (drawn once, kept in storage)."""
    check = _own_check(check_id)
    if not check.pdf_key or not 1 <= page <= MAX_PAGES:
        abort(404)
    try:
        png = pdf_pages.page_png(
            get_storage(), pdf_key=check.pdf_key, page=page - 1, width=request.args.get("w", 1600, type=int)
        )
    except pdf_pages.PageImageError as exc:
        abort(404, str(exc.message))
    return Response(png, mimetype="image/png", headers={"Cache-Control": "private, max-age=3600"})


def _outcome(check: WordCheck) -> dict:
    """What the outcome partial shows: the tags found, those not understood, each page with its boxes."""
    if check.status != wc.CheckStatus.READY or not check.result:
        error = wc.check_error(check, now=utcnow())
        return {"examined": None, "error": error, "finished": error is not None or check.status not in wc.UNFINISHED}
    examined = wc.Examined.from_json(check.result)
    template = db.session.get(DocumentTemplate, check.template_id) if check.template_id else None
    version = dt.get_version(db.session, template_id=template.id) if template is not None else None
    language = str(get_locale())
    labels = {key: party_label(version, role=key, language=language) for key in examined.parties}
    tags = examined.tags
    boxes: dict[int, list[dict]] = {}
    for tag in tags:
        for place in examined.places.get(tag.name, ()):
            boxes.setdefault(place.page, []).append({"tag": tag, "place": place})
    return {
        "examined": examined,
        "error": None,
        "finished": True,
        "found": [t for t in tags if t.kind != TagKind.UNKNOWN],
        "unknown": [t for t in tags if t.kind == TagKind.UNKNOWN],
        "labels": labels,
        "boxes": boxes,
        "template": template,
        "field_types": FIELD_TYPE_LABELS,
    }


def init_app(app) -> None:
    @app.template_global()
    def word_palette(version: TemplateVersion) -> Palette:
        """The tags to copy into a Word template's file: its parties', columns' and fields' (the template page)."""
        return palette(version, language=str(get_locale()))

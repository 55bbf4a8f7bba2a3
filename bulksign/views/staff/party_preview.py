"""A template's sample row, edited on the template page, and the template previewed as each of its parties will see
it on the signing page: what they read, the fields they fill, where they sign."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from flask import Blueprint, Response, abort, current_app, redirect, render_template, request, url_for
from flask_login import current_user

from bulksign.batches import party_preview as pp
from bulksign.batches.row_preview import MAX_PAGE_IMAGES, page_png
from bulksign.core.errors import BulksignError
from bulksign.core.extensions import db
from bulksign.doc_templates import versions as dt
from bulksign.doc_templates.template_sample import sample_columns, save_sample, template_sample
from bulksign.models import DocumentTemplate, TemplateVersion
from bulksign.people import access
from bulksign.views.staff.uploads import preview_language

bp = Blueprint("party_preview", __name__, url_prefix="/templates")
#: The form's name of a sample column's input: ``sample-<column>``.
SAMPLE_INPUT = "sample-"


@dataclass(frozen=True)
class SampleForm:
    """The sample row as the template page shows it: each column the template uses with its value, and the
    parties it can be previewed as."""

    rows: tuple[tuple[str, str], ...]
    parties: tuple[pp.PartyChoice, ...]


def sample_form(template: DocumentTemplate, version: TemplateVersion) -> SampleForm:
    sample = template_sample(template, version)
    return SampleForm(
        rows=tuple((column, sample.get(column, "")) for column in sample_columns(version)),
        parties=pp.party_choices(version, language=preview_language()),
    )


def _newest(template_id: int, *, edit: bool = False) -> tuple[DocumentTemplate, TemplateVersion]:
    find = access.template_for_edit if edit else access.template_for_use
    template = find(db.session, template_id=template_id, user=current_user)
    return template, dt.get_version(db.session, template_id=template.id) or abort(404)


@bp.post("/<int:template_id>/sample")
def set_sample(template_id: int):
    """Keep the sample row; the template page's form gets its section back, the preview's goes back to it."""
    template, version = _newest(template_id, edit=True)
    given = {k.removeprefix(SAMPLE_INPUT): v for k, v in request.form.items() if k.startswith(SAMPLE_INPUT)}
    save_sample(db.session, template=template, sample=given)
    db.session.commit()
    if request.headers.get("HX-Request"):
        return render_template(
            "doc_templates/_sample.html", template=template, sample=sample_form(template, version), saved=True
        )
    party = request.form.get("party", "")
    if party in {p.key for p in pp.party_choices(version, language=preview_language())}:
        return redirect(url_for(".preview", template_id=template.id, role=party))
    return redirect(url_for("doc_templates.detail", template_id=template.id, _anchor="sample"))


@bp.get("/<int:template_id>/preview/<role>")
def preview(template_id: int, role: str):
    """The template with its sample row as ``role``'s party will see it on the signing page."""
    template, version = _newest(template_id)
    parties = {p.key: p for p in pp.party_choices(version, language=preview_language())}
    if role not in parties:
        abort(404)
    found, problem = None, None
    try:
        found = pp.party_preview(
            template,
            version,
            role=role,
            language=preview_language(),
            timeout=current_app.config["PREVIEW_TIMEOUT_SECONDS"],
        )
    except BulksignError as exc:  # the template or the converter refuses the sample's values
        problem = exc.message
    return render_template(
        "doc_templates/party_preview.html",
        template=template,
        version=version,
        role=role,
        party=parties[role],
        found=found,
        problem=problem,
        sample=sample_form(template, version),
        page_src=functools.partial(url_for, ".page_image", template_id=template.id, role=role),
    ), 422 if problem else 200


@bp.get("/<int:template_id>/preview/<role>/pages/<int:number>.png")
def page_image(template_id: int, role: str, number: int):
    """A page of the document rendered with the sample row (the same for every party)."""
    template, version = _newest(template_id)
    if not 1 <= number <= MAX_PAGE_IMAGES:
        abort(404)
    try:
        pdf = pp.sample_pdf(
            template, version, language=preview_language(), timeout=current_app.config["PREVIEW_TIMEOUT_SECONDS"]
        )
        png = page_png(pdf, page=number)
    except BulksignError:
        abort(404)
    return Response(png, mimetype="image/png", headers={"Cache-Control": "private, no-store"})


def init_app(app) -> None:
    @app.template_global()
    def template_sample_form(template: DocumentTemplate, version: TemplateVersion) -> SampleForm:
        """The template page's sample row and the parties to preview it as."""
        return sample_form(template, version)

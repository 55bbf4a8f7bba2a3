"""The check page's row preview: any row of the checked file (found by name, row number or address, or a few at
random) as its recipient's document will be rendered, its pages as images and the PDF; a row with errors names
the cells to fix. Only the user who uploaded the file sees it."""

from __future__ import annotations

import random

from flask import Blueprint, Response, abort, current_app, render_template, request
from flask_login import current_user

from bulksign.batches import row_preview
from bulksign.core.errors import BulksignError
from bulksign.models import TemplateVersion
from bulksign.people import access
from bulksign.recipients.rows import UploadError
from bulksign.recipients.validation import Recipient
from bulksign.views.staff.uploads import check_stored, preview_language

bp = Blueprint("row_preview", __name__, url_prefix="/batches/uploads")


def _found(upload_id: str, row: int | None = None):
    """The stored file checked again with every row kept and every error, and its template's version; a 404 for a
    file gone, another user's, or a row it does not have."""
    access.require_creator(current_user)
    try:
        _, version, report = check_stored(upload_id, keep_rows=True, max_errors=None)
    except UploadError:
        abort(404)
    if row is None:
        return version, report, None
    found = row_preview.found_row(report, row=row)
    if found is None:
        abort(404)
    return version, report, found


@bp.get("/<upload_id>/rows")
def rows(upload_id: str):
    """The rows matching ``q`` (a row number, part of an address or a name), or ``shuffle=1``: a few at random."""
    _, report, _ = _found(upload_id)
    found = row_preview.find_rows(
        report,
        query=request.args.get("q", ""),
        shuffle=request.args.get("shuffle") == "1",
        rng=random.SystemRandom(),
    )
    return render_template("uploads/_rows.html", found=found, upload_id=upload_id, query=request.args.get("q", ""))


@bp.get("/<upload_id>/rows/<int:row>")
def row(upload_id: str, row: int):
    """One row: its document's pages as images and the PDF, or the cells to fix; or why it cannot be rendered."""
    version, _, found = _found(upload_id, row)
    pages, problem = 0, None
    if found.recipient is not None:
        try:
            pages = row_preview.page_count(_pdf(version, found.recipient))
        except BulksignError as exc:  # the template or the converter refuses this row's values
            problem = exc.message
    return render_template(
        "uploads/_row.html",
        found=found,
        upload_id=upload_id,
        pages=pages,
        problem=problem,
        language=preview_language(),
    )


@bp.get("/<upload_id>/rows/<int:row>.pdf")
def row_pdf(upload_id: str, row: int):
    version, _, found = _found(upload_id, row)
    if found.recipient is None:
        abort(404)
    try:
        pdf = _pdf(version, found.recipient)
    except BulksignError as exc:
        abort(422, description=str(exc.message))
    return Response(
        pdf,
        mimetype="application/pdf",
        headers={"Content-Disposition": f'inline; filename="row-{row}.pdf"', "Cache-Control": "private, no-store"},
    )


@bp.get("/<upload_id>/rows/<int:row>/pages/<int:page>.png")
def row_page(upload_id: str, row: int, page: int):
    version, _, found = _found(upload_id, row)
    if found.recipient is None or not 1 <= page <= row_preview.MAX_PAGE_IMAGES:
        abort(404)
    try:
        png = row_preview.page_png(_pdf(version, found.recipient), page=page)
    except BulksignError:
        abort(404)
    return Response(png, mimetype="image/png", headers={"Cache-Control": "private, no-store"})


def _pdf(version: TemplateVersion, recipient: Recipient) -> bytes:
    return row_preview.row_pdf(
        version, recipient, language=preview_language(), timeout=current_app.config["PREVIEW_TIMEOUT_SECONDS"]
    )

"""Any row of a checked file as its recipient's document will be rendered, before anything is sent: found by name,
row number or address, or a few at random; a row with errors says which cell to fix instead. The same for a batch
waiting for approval. More in docs/architecture/batches.md."""

from __future__ import annotations

import io
import random
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from pypdf import PdfReader
from pypdf.errors import PdfReadError
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from bulksign.batches.rendering import row_context
from bulksign.doc_templates.kinds import render_document
from bulksign.documents import poppler
from bulksign.models import SigningRequest, TemplateVersion
from bulksign.models.status import Status
from bulksign.recipients.row_checks import RowError
from bulksign.recipients.validation import Recipient, ValidationReport

#: Rows a search lists, and rows "shuffle" shows.
MAX_FOUND = 20
SHUFFLE_COUNT = 5
#: Width of a page image, in pixels: a page as the check page shows it.
PAGE_WIDTH_PX = 800
#: Pages shown as images; the PDF has them all.
MAX_PAGE_IMAGES = 10
_KEPT_PDFS = 16


@dataclass(frozen=True)
class FoundRow:
    """A row of the file, as the search lists it: valid (``recipient``) or with the cells to fix (``errors``)."""

    row: int
    email: str
    name: str
    recipient: Recipient | None
    errors: tuple[RowError, ...] = ()


def find_rows(report: ValidationReport, *, query: str, shuffle: bool, rng: random.Random) -> tuple[FoundRow, ...]:
    """The rows of a report (checked with ``keep_rows`` and every error) matching ``query``: a row number, or part
    of an address or a name (any value, for a row with errors); ``shuffle``: a few valid rows at random."""
    rows = _rows(report)
    if shuffle:
        valid = [r for r in rows if r.recipient is not None]
        return tuple(sorted(rng.sample(valid, min(SHUFFLE_COUNT, len(valid))), key=lambda r: r.row))
    wanted = query.strip().casefold()[:200]
    if not wanted:
        return tuple(rows[:MAX_FOUND])
    if wanted.isdigit():
        return tuple(r for r in rows if r.row == int(wanted))
    return tuple(r for r in rows if wanted in _text(r))[:MAX_FOUND]


def found_row(report: ValidationReport, *, row: int) -> FoundRow | None:
    """Row ``row`` of the report (as Excel numbers it), if it is a data row."""
    return next((r for r in _rows(report) if r.row == row), None)


def _rows(report: ValidationReport) -> list[FoundRow]:
    errors: dict[int, list[RowError]] = {}
    for error in report.errors:
        errors.setdefault(error.row, []).append(error)
    found = [FoundRow(r.row_number, r.email, r.name, r) for r in report.recipients]
    for number, its in errors.items():
        # A row with errors is listed by its values: an address (one with "@") and its first other value.
        values = its[0].values
        address = next((str(v) for v in values.values() if "@" in str(v)), "")
        name = next((str(v) for v in values.values() if str(v).strip() and "@" not in str(v)), "")
        found.append(FoundRow(number, address, name, None, tuple(its)))
    return sorted(found, key=lambda r: r.row)


def _text(row: FoundRow) -> str:
    if row.recipient is not None:
        return f"{row.email} {row.name}".casefold()
    return " ".join(str(v) for e in row.errors for v in e.values.values()).casefold()


def row_pdf(version: TemplateVersion, recipient: Recipient, *, language: str, timeout: float) -> bytes:
    """The row's document as it will be rendered for its recipient (each party's signature place and fields
    marked), rendered now, never stored or mailed; the last few kept in memory for their page images."""
    context = row_context(
        version,
        data=recipient.data,
        email=recipient.email,
        name=recipient.name,
        phone=recipient.phone,
        language=language,
    )
    key = (version.id, tuple(sorted((k, str(v)) for k, v in context.items())))
    if key in _pdfs:
        _pdfs.move_to_end(key)
        return _pdfs[key]
    pdf = render_document(version, context, timeout=timeout)
    _pdfs[key] = pdf
    while len(_pdfs) > _KEPT_PDFS:
        _pdfs.popitem(last=False)
    return pdf


_pdfs: OrderedDict[tuple[int, tuple[tuple[str, str], ...]], bytes] = OrderedDict()


def page_count(pdf: bytes) -> int:
    """How many pages of the document are shown as images (all, up to ``MAX_PAGE_IMAGES``)."""
    try:
        return min(len(PdfReader(io.BytesIO(pdf)).pages), MAX_PAGE_IMAGES)
    except (PdfReadError, ValueError):
        return 0


def page_png(pdf: bytes, *, page: int) -> bytes:
    """Page ``page`` (from 1) of the document as an image; PopplerError past its end."""
    return poppler.page_png(pdf, number=page, width_px=PAGE_WIDTH_PX)


def find_requests(
    session: Session, *, batch_id: int, query: str, shuffle: bool, rng: random.Random
) -> Sequence[SigningRequest]:
    """A batch's requests that would be mailed, matching ``query`` (row number, part of an address or a name), or
    a few at random: what the approver opens, any row, not only the first."""
    base = select(SigningRequest).where(SigningRequest.batch_id == batch_id, SigningRequest.status == Status.PENDING)
    if shuffle:
        ids = list(session.scalars(base.with_only_columns(SigningRequest.id)))
        chosen = rng.sample(ids, min(SHUFFLE_COUNT, len(ids)))
        return list(session.scalars(base.where(SigningRequest.id.in_(chosen)).order_by(SigningRequest.row_number)))
    wanted = query.strip()[:200]
    if wanted.isdigit():
        base = base.where(SigningRequest.row_number == int(wanted))
    elif wanted:
        like = f"%{wanted.lower().replace('%', '').replace('_', '')}%"
        base = base.where(or_(func.lower(SigningRequest.email).like(like), func.lower(SigningRequest.name).like(like)))
    return list(session.scalars(base.order_by(SigningRequest.row_number).limit(MAX_FOUND)))

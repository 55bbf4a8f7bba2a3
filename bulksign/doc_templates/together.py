"""A chunk's documents of one template version filled in here and rendered together by ``documents``.
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.doc_templates import docx_alone, docx_copies, docx_templates
from bulksign.doc_templates.docx_copy_text import copy_text
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.jinja_sandbox import render_html
from bulksign.doc_templates.kinds import HTML, source
from bulksign.doc_templates.render_path import WORD
from bulksign.documents import docx_together, together
from bulksign.documents.pdf import MAX_PAGES, RenderError
from bulksign.documents.together import Chunk, NotTogether, Part
from bulksign.models import TemplateVersion
from bulksign.models.base import rows_changed

logger = logging.getLogger(__name__)


def tries_together(version: TemplateVersion) -> bool:
    """Whether a chunk of ``version``'s documents is tried in one run: HTML and Word, unless a run found it may not."""
    return version.kind in (HTML, WORD) and not version.render_alone


def render_chunk_together(version: TemplateVersion, rows: Mapping[int, dict[str, Any]], *, timeout: float) -> Chunk:
    """A chunk's PDFs of ``version`` (request id → its row's values) in as few runs as they allow, or why the
    template cannot be (``Chunk.refused``). A row the template cannot take is left out: rendered alone, it fails
    with its message."""
    if version.kind == WORD:
        return _word_chunk(version, source(version.source_key), rows, timeout=timeout)
    refused = together.template_problem(version.html)
    if refused is not None:
        return Chunk({}, refused)
    filled = {}
    for request_id, row in rows.items():
        try:
            filled[request_id] = render_html(version.html, row)
        except TemplateError:
            continue
    return together.render_filled(filled, timeout=timeout)


def _word_chunk(
    version: TemplateVersion, source: bytes, rows: Mapping[int, dict[str, Any]], *, timeout: float
) -> Chunk:
    """The Word ``version``'s chunk from one run; with fewer than two rows filled in, none is run together."""
    try:
        reason = docx_alone.why_alone(source)
    except TemplateError:  # the file itself is refused: each document fails alone, with the reason
        return Chunk({})
    if reason is not None:
        return Chunk({}, NotTogether(reason))
    filled = {}
    for request_id, row in rows.items():
        try:
            filled[request_id] = docx_templates.fill_version(version, source, row)
        except TemplateError:
            pass
    if len(filled) < 2:
        return Chunk({})
    try:
        parts = render_word_run(source, list(filled.values()), timeout=timeout)
    except RenderError as exc:
        parts = NotTogether(
            N_("LibreOffice failed on the documents converted together (%(error)s).", error=exc.message), lasting=False
        )
    if isinstance(parts, NotTogether):
        if not parts.lasting:
            log(
                logger,
                logging.INFO,
                "rendered one by one",
                template_version_id=version.id,
                reason=parts.message.english,
            )
        return Chunk({}, parts if parts.lasting else None)
    return Chunk(dict(zip(filled, parts)))


def render_word_run(
    source: bytes, copies: Sequence[dict[str, bytes]], *, timeout: float, max_pages: int = MAX_PAGES
) -> list[Part] | NotTogether:
    """One PDF for each of ``copies`` (each ``docx_templates.fill_parts`` of ``source``) from one conversion, each
    checked against its copy; NotTogether when they cannot be. Raises what the converter raises for the run."""
    package = docx_templates.package(source)
    try:
        merged = docx_copies.merge(package, copies)
    except docx_copies.Unmergeable as exc:
        return NotTogether(exc.message, lasting=False)
    texts = [copy_text(package, filled) for filled in copies]
    return docx_together.render_merged(merged, texts, timeout=timeout, max_pages=max_pages)


def remember_alone(session: Session, version_id: int, refused: NotTogether, *, batch_id: int, now: datetime) -> None:
    """Keep on the version why its documents go one by one from now on (the template page says it), once: the
    first chunk to find it writes it, commits and logs it."""
    won = rows_changed(
        session,
        update(TemplateVersion)
        .where(TemplateVersion.id == version_id, TemplateVersion.render_alone.is_(None))
        .values(
            render_alone={
                "msgid": refused.message.msgid,
                "values": refused.message.values,
                "at": now.isoformat(),
                "batch_id": batch_id,
            }
        ),
    )
    session.commit()
    if won:
        log(
            logger,
            logging.WARNING,
            "documents of this template version are rendered one by one from now on",
            template_version_id=version_id,
            batch_id=batch_id,
            reason=refused.message.english,
            detail=refused.detail,
        )

"""A document longer than a recipient's document may be is stopped while it converts, not minutes later."""

from __future__ import annotations

import copy
import io
import time

import pytest
from docx import Document as WordDocument
from docx.enum.text import WD_BREAK
from pypdf import PdfReader

from bulksign.batches.rendering import render_chunk
from bulksign.core.error_tracking import OperatorFaults
from bulksign.core.extensions import db
from bulksign.documents import libreoffice, pdf
from bulksign.documents.pdf import MAX_PAGES, RenderError, render_pdf
from bulksign.models import SigningRequest
from bulksign.models.status import Status
from tests.support import docx_files
from tests.support.batches import make_batch, request_ids
from tests.support.clock import NOW

#: 20 pages for each unit of the row's salary (1000): 20,000 pages, minutes of wkhtmltopdf if rendered whole. The
#: sample row a template is checked with at save has no number there: no pages.
HTML_LOOP = (
    '<meta charset="utf-8"><body style="font-family:\'DejaVu Serif\'">'
    "{% for i in range(salary|int * 20) %}<p style='page-break-after:always'>Страница {{ i }}</p>{% endfor %}"
    "<p>Конец, {{ name }}.</p></body>"
)


def _pages(count: int) -> str:
    return (
        '<meta charset="utf-8"><body style="font-family:\'DejaVu Serif\'">'
        + "".join(f'<div style="page-break-after:always">Страница {i}</div>' for i in range(count - 1))
        + "<div>Конец.</div></body>"
    )


def test_an_html_document_of_exactly_the_limit_renders_and_one_page_more_is_refused():
    assert len(PdfReader(io.BytesIO(render_pdf(_pages(MAX_PAGES)))).pages) == MAX_PAGES
    with pytest.raises(RenderError) as refused:
        render_pdf(_pages(MAX_PAGES + 1))
    assert f"runs past {MAX_PAGES} pages" in str(refused.value.message) and not refused.value.transient


def _word_loop() -> bytes:
    """A Word template that repeats a page (text, page break) as many times as the row says."""
    document = WordDocument()
    document.add_paragraph("{%p for i in range(salary|int * 3) %}")  # 3,000 pages
    page = document.add_paragraph("Страница {{ i }}")
    page.add_run().add_break(WD_BREAK.PAGE)
    document.add_paragraph("{%p endfor %}")
    document.add_paragraph("Конец, {{ name }}.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


@pytest.fixture
def faults(monkeypatch):
    """What the render reports to Sentry (operators' faults)."""
    added = []
    monkeypatch.setattr(OperatorFaults, "add", lambda self, fault: added.append(fault))
    return added


@pytest.fixture
def exported(monkeypatch):
    """The page count of each PDF LibreOffice hands back."""
    counts = []
    real = libreoffice.Converter.convert

    def counting(self, data, **kwargs):
        result = real(self, data, **kwargs)
        counts.append(len(PdfReader(io.BytesIO(result)).pages))
        return result

    monkeypatch.setattr(libreoffice.Converter, "convert", counting)
    return counts


@pytest.mark.parametrize("kind", ["html", "docx"])
def test_a_document_of_thousands_of_pages_fails_in_seconds_naming_the_limit_once_and_quietly(
    app, users, faults, exported, kind
):
    """20,000 pages of HTML would take wkhtmltopdf minutes (it is stopped once it has written the 101st), 3,000 of
    Word 15 s of LibreOffice's export (it exports the 101st page and no more); the request fails at once, with a
    message naming the limit, is not tried again and is not an operator's fault."""
    template = {"html": HTML_LOOP} if kind == "html" else {"file": _word_loop()}
    batch = make_batch(user=users["staff"], now=NOW, recipients=1, kind=kind, **template)
    (request_id,) = request_ids(batch)
    if kind == "docx":
        libreoffice.converter().convert(docx_files.simple(), timeout=60)  # its start is not the document's time
    started = time.monotonic()
    outcome = render_chunk([request_id], app=app)
    seconds = time.monotonic() - started
    request = db.session.get(SigningRequest, request_id)
    assert request.status == Status.FAILED and "failed 1" in outcome
    assert f"runs past {MAX_PAGES} pages for this recipient" in request.error_message
    assert request.attempts == 1 and not faults
    assert seconds < 15, seconds
    if kind == "docx":
        assert exported[-1] == MAX_PAGES + 1, "LibreOffice exported one page past the limit, no more"


def test_the_page_counter_reads_a_growing_file_and_counts_each_page_once(tmp_path):
    out = tmp_path / "out.pdf"
    counter = pdf._PageCounter(out)
    assert counter.count() == 0  # not written yet
    page = pdf._PAGE_OBJECT
    out.write_bytes(b"%PDF-1.4\n" + page + b"/Parent 3 0 R" + page[:5])
    assert counter.count() == 1
    with out.open("ab") as more:
        more.write(page[5:] + b"/Parent 3 0 R\n/Type /Pages\n")  # a page split across two looks, then the tree
    assert counter.count() == 2 and counter.count() == 2


def _long_word_text(lines: int) -> bytes:
    """Many lines without page breaks: LibreOffice lays them all out before it exports a page (when it is asked for
    every page: the render's page range stops it sooner)."""
    document = WordDocument()
    body = document.element.body
    line, section = document.add_paragraph("Строка договора.")._p, body[-1]
    body.extend(copy.deepcopy(line) for _ in range(lines))  # python-docx's add_paragraph takes 30 s for as many
    body.append(section)  # the section's properties stay last
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_a_word_document_that_outlasts_its_time_on_a_running_converter_is_tried_once_more_only():
    """A LibreOffice that was up had the whole time for it: once more on a fresh one (a hung LibreOffice is
    replaced by then), not twice more, each holding a render worker as long again."""
    converter = libreoffice.Converter()
    try:
        converter.convert(docx_files.simple(), timeout=60)  # started: what follows is the document's time alone
        with pytest.raises(RenderError) as slow:
            converter.convert(_long_word_text(60_000), timeout=2)  # ~40 s of layout alone, 20 times its time
        assert slow.value.transient and slow.value.attempts == 2
        assert "too long or too complex" in str(slow.value.message) and converter.pid is None
    finally:
        converter.stop()


def test_a_word_document_that_ran_out_of_time_mostly_while_the_converter_started_gets_every_attempt():
    """LibreOffice's start (~5 s cold) shares the budget: a document left with less than half of it is not
    suspected; one that had more is tried once more only."""
    assert libreoffice._timed_out(60, converting=20).attempts is None
    assert libreoffice._timed_out(60, converting=30).attempts == 2

"""The signature goes where the document says ({{ signature }}), or on an appended page: never over its text."""

from __future__ import annotations

import io
import re
import subprocess
from datetime import UTC, datetime, timedelta

import pytest
from pypdf import PdfReader
from reportlab.lib.pagesizes import A4
from reportlab.lib.units import mm
from reportlab.pdfgen import canvas
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.doc_templates.jinja_sandbox import render_html
from bulksign.doc_templates.variables import BUILTIN_VARIABLES
from bulksign.doc_templates.versions import create_template
from bulksign.documents import audit_record, sealing, signed_pdf
from bulksign.documents.pdf import render_pdf
from bulksign.documents.poppler import Word, page_words
from bulksign.documents.seal_keys import seal_key
from bulksign.documents.sealing import check_seal
from bulksign.documents.signature_box import (
    BOX_HEIGHT_MM,
    BOX_WIDTH_MM,
    MARK_COLOUR,
    SignatureBox,
    SignatureBoxError,
    check_box,
    find_signature_box,
    html_mark,
)
from bulksign.documents.storage import get_storage
from bulksign.models import Document, SigningRequest
from bulksign.recipients.validation import validate_recipients
from bulksign.signing.links import current_token
from bulksign.signing.recipient_actions import sign
from bulksign.work.pipeline import enqueue_renders
from tests.support import docx_files
from tests.support.batches import make_batch, request_ids
from tests.support.clock import NOW
from tests.support.signatures import png

PAGE = '<meta charset="utf-8"><body style="font-family:\'DejaVu Serif\'">{body}</body>'
MARKED = PAGE.format(
    body="<h1>Трудовой договор № {{ salary }}</h1><p>Работник: {{ name }}. Текст договора.</p>"
    "<p>Подпись работника: {{ signature }} — дата подписи ниже.</p><p>Конец договора.</p>"
)
RECORD = audit_record.AuditRecord(
    document_name="Трудовой договор",
    batch_id=1,
    request_id=2,
    recipient_name="Иван Петров",
    recipient_email="ivan@example.com",
    signer_name="Иван Петров",
    signer_ip="203.0.113.5",
    signed_at=datetime(2026, 11, 2, 9, 12, tzinfo=UTC),
    original_sha256="0" * 64,
    lines=(),
)


def _overlap(a: Word, b: Word) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.top < b.bottom and b.top < a.bottom


def _added_words(original: bytes, signed: bytes, page: int) -> tuple[list[Word], list[Word]]:
    """The original page's words, and what the signed copy's page has besides them (the block)."""
    before = page_words(original)[page].words
    kept = set(before)
    return list(before), [w for w in page_words(signed)[page].words if w not in kept]


def _in_box(word: Word, box: SignatureBox, page_height: float) -> bool:
    top = page_height - (box.y + box.h)
    return (
        box.x - 0.5 <= word.x0
        and word.x1 <= box.x + box.w + 0.5
        and top - 0.5 <= word.top
        and word.bottom <= top + box.h + 0.5
    )


def _assert_block_in_box_over_no_text(original: bytes, signed: bytes, box: SignatureBox) -> list[Word]:
    before, block = _added_words(original, signed, box.page)
    height = page_words(signed)[box.page].height
    assert block, "the block is on the marked page"
    assert all(_in_box(w, box, height) for w in block), block
    assert not [(b, t) for b in block for t in before if _overlap(b, t)], "the block covers no text of the document"
    assert set(before) <= set(page_words(signed)[box.page].words), "every word of the original is still there"
    return block


def _sign_and_seal(request_id: int, run_jobs) -> bytes:
    outcome = sign(
        db.session,
        request_id=request_id,
        now=NOW + timedelta(hours=1),
        signer_name="Иван Петров",
        signature_png=png(),
        consent=True,
        ip="203.0.113.5",
        user_agent="Mozilla/5.0",
    )
    assert outcome.status == "signed"
    run_jobs("pdf")
    signed = db.session.scalar(select(Document).where(Document.request_id == request_id, Document.kind == "signed"))
    return get_storage().get(signed.storage_key)


def _pdftotext(pdf: bytes) -> str:
    return subprocess.run(
        ["pdftotext", "-", "-"], input=pdf, capture_output=True, timeout=30, check=True
    ).stdout.decode()


def test_the_html_mark_is_an_empty_box_of_the_standard_size_found_in_the_pdf():
    pdf = render_pdf(render_html(MARKED, {"name": "Иван Петров", "salary": "7", "signature": html_mark()}))
    box = find_signature_box(pdf)
    assert box is not None and box.page == 0
    assert abs(box.w - BOX_WIDTH_MM * 72 / 25.4) < 3 and abs(box.h - BOX_HEIGHT_MM * 72 / 25.4) < 3
    words = page_words(pdf)[0]
    inside = [w for w in words.words if _in_box(w, box, words.height)]
    assert not inside, "the box is empty"
    # Text before the box on its line, and after it, is beside it, not in it.
    assert any(w.text == "Подпись" for w in words.words) and any(w.text == "ниже." for w in words.words)


def test_a_mark_on_a_later_page_is_found_there_and_a_document_without_one_has_none():
    long_text = "".join(f"<p>Пункт {i}. Условия договора.</p>" for i in range(60))
    pdf = render_pdf(render_html(PAGE.format(body=long_text + "<p>{{ signature }}</p>"), {"signature": html_mark()}))
    box = find_signature_box(pdf)
    assert box is not None and box.page == len(PdfReader(io.BytesIO(pdf)).pages) - 1 > 0
    assert find_signature_box(render_pdf(PAGE.format(body="<p>Без подписи</p>"))) is None


def test_the_mark_is_the_first_large_frame_in_its_colour_with_its_pieces():
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    c.setStrokeColorRGB(*(v / 255 for v in MARK_COLOUR))
    c.setFillColorRGB(*(v / 255 for v in MARK_COLOUR))
    c.line(20 * mm, 250 * mm, 190 * mm, 250 * mm)  # a rule in the same grey: too thin to be a box
    c.setStrokeColorRGB(0.5, 0.5, 0.5)
    c.rect(20 * mm, 200 * mm, 80 * mm, 30 * mm)  # a frame in another grey
    # A frame drawn side by side, as four filled bars, then a second frame further down.
    for x, y, w, h in ((50, 100, 60, 0.3), (50, 78, 60, 0.3), (50, 78, 0.3, 22.3), (109.7, 78, 0.3, 22.3)):
        c.rect(x * mm, y * mm, w * mm, h * mm, stroke=0, fill=1)
    c.setStrokeColorRGB(*(v / 255 for v in MARK_COLOUR))
    c.rect(50 * mm, 30 * mm, 60 * mm, 22 * mm)
    c.save()
    box = find_signature_box(buf.getvalue())
    assert box.page == 0 and abs(box.x - 50 * mm) < 0.5 and abs(box.y - 78 * mm) < 0.5
    assert (round(box.w / mm), round(box.h / mm)) == (BOX_WIDTH_MM, BOX_HEIGHT_MM)


def test_an_explicit_box_must_lie_on_a_page_and_be_large_enough():
    pdf = render_pdf(PAGE.format(body="<p>Форма</p>"))
    good = SignatureBox(page=0, x=300, y=100, w=200, h=60)
    assert check_box(pdf, good) == good
    assert SignatureBox.from_json(good.to_json()) == good and SignatureBox.from_json(None) is None
    for bad, words in (
        (SignatureBox(page=1, x=300, y=100, w=200, h=60), "page 2; the document has 1"),
        (SignatureBox(page=0, x=300, y=100, w=50, h=60), "too small"),
        (SignatureBox(page=0, x=500, y=100, w=200, h=60), "beyond the edge"),
    ):
        with pytest.raises(SignatureBoxError, match=words):
            check_box(pdf, bad)


def test_the_signature_is_stamped_in_the_marked_box_over_no_text_and_the_seal_validates(app, tmp_path):
    original = render_pdf(render_html(MARKED, {"name": "Иван Петров", "salary": "7", "signature": html_mark()}))
    box = find_signature_box(original)
    signed = signed_pdf.build_signed_pdf(original, RECORD, image_png=png(), box=box)
    assert len(PdfReader(io.BytesIO(signed)).pages) == len(PdfReader(io.BytesIO(original)).pages) + 1  # the audit page
    block = _assert_block_in_box_over_no_text(original, signed, box)
    assert {"Signed", "electronically", "Иван", "Петров", "2026-11-02", "09:12:00", "UTC", "203.0.113.5"} <= {
        w.text for w in block
    }
    reader = PdfReader(io.BytesIO(signed))
    assert reader.pages[0]["/Resources"]["/XObject"], "the drawn signature is in the box"
    sealed = sealing.apply_seal(signed, seal_key(app.config))
    assert check_seal(sealed, seal_key(app.config)).valid
    (tmp_path / "sealed.pdf").write_bytes(sealed)
    out = subprocess.run(["pdfsig", str(tmp_path / "sealed.pdf")], capture_output=True, text=True, timeout=30).stdout
    assert "Signature is Valid" in out and "Total document signed" in out


def _full_to_the_bottom(*, bottom_mm: float) -> bytes:
    """A two-page document (as a Word or scanned PDF can be) whose text runs down to ``bottom_mm`` from the edge."""
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    from bulksign.documents.pdf_text import register_fonts

    register_fonts()
    for page in range(2):
        y, line = A4[1] - 15 * mm, 0
        while y > bottom_mm * mm:
            c.setFont("DejaVuSans", 9)
            c.drawString(
                12 * mm,
                y,
                f"Страница {page + 1}, строка {line}: текст договора до самого края листа, справа тоже. Line {line}.",
            )
            y -= 11
            line += 1
        c.showPage()
    c.save()
    return buf.getvalue()


def _html_filling_its_last_page() -> bytes:
    """Two pages of an HTML template whose lines run down to wkhtmltopdf's bottom margin on both."""

    def lines(count: int) -> str:
        return PAGE.format(
            body="".join(f"<p style='margin:0'>Строка {i} договора, Иван Петров.</p>" for i in range(count))
        )

    per_page = sum(1 for w in page_words(render_pdf(lines(200)))[0].words if w.text == "Строка")
    return render_pdf(lines(2 * per_page))


@pytest.mark.parametrize(
    "make_original, reach_mm",
    [
        # Where the old stamp sat (2–19 mm above the edge): a Word or scanned PDF with narrow margins.
        pytest.param(lambda: _full_to_the_bottom(bottom_mm=4), 19, id="text-to-the-bottom-edge"),
        # Down to the 20 mm margin the renderer leaves.
        pytest.param(_html_filling_its_last_page, 27, id="html-filling-its-last-page"),
    ],
)
def test_an_unmarked_document_keeps_every_page_untouched_and_gets_a_signature_page(app, make_original, reach_mm):
    original = make_original()
    pages = len(PdfReader(io.BytesIO(original)).pages)
    last = page_words(original)[-1]
    assert pages == 2 and max(w.bottom for w in last.words) > last.height - reach_mm * mm
    signed = signed_pdf.build_signed_pdf(original, RECORD, image_png=png(), box=None)
    after = page_words(signed)
    assert len(after) == pages + 2
    for number in range(pages):
        assert after[number].words == page_words(original)[number].words, "nothing added to the document's pages"
    block = " ".join(w.text for w in after[pages].words)
    for part in (
        "Signature",
        "Document: Трудовой договор",
        "Signed electronically",
        "Иван Петров",
        "2026-11-02 09:12:00 UTC",
        "IP 203.0.113.5",
    ):
        assert part in block
    assert "Audit certificate" in " ".join(w.text for w in after[pages + 1].words)
    assert check_seal(sealing.apply_seal(signed, seal_key(app.config)), seal_key(app.config)).valid


def test_the_render_job_stores_the_box_and_sealing_stamps_there(app, users, smtp, run_jobs):
    batch = make_batch(user=users["staff"], now=NOW, recipients=[("ivan@example.com", "Иван Петров")], html=MARKED)
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")
    (request_id,) = request_ids(batch)
    original = db.session.scalar(select(Document).where(Document.request_id == request_id))
    box = SignatureBox.from_json(original.signature_box)
    original_pdf = get_storage().get(original.storage_key)
    assert original.signature_box == find_signature_box(original_pdf).to_json() and box.page == 0
    data = _sign_and_seal(request_id, run_jobs)
    assert check_seal(data, seal_key(app.config)).valid
    block = _assert_block_in_box_over_no_text(original_pdf, data, box)
    assert {"Иван", "Петров", "203.0.113.5"} <= {w.text for w in block}
    assert len(PdfReader(io.BytesIO(data)).pages) == len(PdfReader(io.BytesIO(original_pdf)).pages) + 1


def test_signature_is_a_place_not_a_column(app, users):
    saved = create_template(db.session, name="Marked", html=MARKED, user=users["staff"], now=NOW)
    assert "signature" in saved.version.variables and "signature" in BUILTIN_VARIABLES
    report = validate_recipients(
        b"email,name,salary\nivan@example.com,Ivan,7\n", filename="r.csv", variables=saved.version.variables
    )
    assert not report.errors and not report.missing_columns and report.valid_rows == 1


def test_a_word_template_marks_the_box_too_and_the_block_lands_there_over_no_text(app):
    from bulksign.doc_templates import docx_templates

    source = docx_files.simple("Работник {{ name }} подписывает здесь: {{ signature }} (дата ниже)")
    original = docx_templates.prepare(None, source, {"name": "Иван Петров"}, timeout=60)()
    box = find_signature_box(original)
    assert box is not None and box.page == 0
    assert (round(box.w / mm), round(box.h / mm)) == (BOX_WIDTH_MM, BOX_HEIGHT_MM)
    signed = signed_pdf.build_signed_pdf(original, RECORD, image_png=png(), box=box)
    assert {"Иван", "Петров", "203.0.113.5"} <= {
        w.text for w in _assert_block_in_box_over_no_text(original, signed, box)
    }


@pytest.mark.parametrize("kind", ["html", "docx"])
def test_the_recipient_reads_only_the_documents_words_in_every_copy_and_the_block_lands_in_the_box(
    app, users, smtp, run_jobs, client, kind
):
    """Nothing of ours that marks the box reaches a reader: not the PDF's text layer (copy-paste, screen readers),
    not the signing page's large print, not the signed copy's page; the box is found all the same."""
    text = "Работник {{ name }} подписывает здесь: {{ signature }} (дата ниже)"
    template = {"html": {"html": PAGE.format(body=f"<p>{text}</p>")}, "docx": {"file": docx_files.simple(text)}}[kind]
    batch = make_batch(
        user=users["staff"], now=NOW, recipients=[("ivan@example.com", "Иван Петров")], kind=kind, **template
    )
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")
    (request_id,) = request_ids(batch)
    original = db.session.scalar(select(Document).where(Document.request_id == request_id))
    original_pdf = get_storage().get(original.storage_key)
    words = "Работник Иван Петров подписывает здесь: (дата ниже)".split()
    assert _pdftotext(original_pdf).split() == words, "the text layer holds the document's words and nothing else"

    token = current_token(db.session.get(SigningRequest, request_id), secret=app.config["SECRET_KEY"])
    page = client.get(f"/sign/{token}").get_data(as_text=True)
    large_print = re.search(r'<details class="doc-text">.*?</summary>(.*?)</details>', page, re.S).group(1)
    assert re.sub(r"<[^>]+>", " ", large_print).split() == words, "the large print is the document's text"
    assert "BULKSIGN" not in page

    box = SignatureBox.from_json(original.signature_box)
    assert box is not None and box.page == 0
    assert (round(box.w / mm), round(box.h / mm)) == (BOX_WIDTH_MM, BOX_HEIGHT_MM)
    signed = _sign_and_seal(request_id, run_jobs)
    first_page = page_words(signed)[0]
    block = _assert_block_in_box_over_no_text(original_pdf, signed, box)
    assert {"Иван", "Петров", "203.0.113.5"} <= {w.text for w in block}
    assert [w.text for w in first_page.words if w not in block] == words, "the signed page: the words and the block"
    assert "BULKSIGN" not in _pdftotext(signed)

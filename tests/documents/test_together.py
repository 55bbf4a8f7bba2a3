"""Several recipients' documents from one wkhtmltopdf run: each part is what a solo render gives, or none is.

Each part: its recipient's pages, words at their places, page images, metadata, and fonts with only its letters."""

from __future__ import annotations

import io
import logging
import subprocess
from pathlib import Path

import pytest
from fontTools.ttLib import TTFont
from PIL import Image, ImageChops
from pypdf import PdfReader, PdfWriter
from pypdf.annotations import Link
from pypdf.generic import IndirectObject
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.doc_templates.jinja_sandbox import render_html
from bulksign.documents import together
from bulksign.documents.field_boxes import field_colour
from bulksign.documents.pdf import render_pdf
from bulksign.documents.pdf_fonts import unicode_map
from bulksign.documents.poppler import page_png
from bulksign.documents.rendering import document_context, render_chunk
from bulksign.documents.signature_box import (
    MAX_MARKS,
    SignatureBox,
    find_framed_boxes,
    find_signature_box,
    html_mark,
    mark_colour,
)
from bulksign.documents.storage import get_storage
from bulksign.models import Document, SigningRequest
from bulksign.models.status import Status
from tests.support.batches import TWO_PAGES, make_batch, request_ids, requests_of
from tests.support.clock import NOW

#: A contract in standards mode (a doctype), its body's margin the default; {{ clauses }} lines of text each.
CONTRACT = (
    '<!doctype html><meta charset="utf-8"><title>Договор</title><body style="font-family:\'DejaVu Serif\'">'
    "<h1>Договор {{ number }}</h1><p>Работник: {{ name }}.</p>"
    "{% for i in range(clauses|int) %}<p>Пункт {{ i }}. Условия договора, {{ name }}.</p>{% endfor %}"
    "<p>Конец договора, {{ name }}.</p></body>"
)
PEOPLE = [("Анна Иванова", 3), ("Пётр Сидоров", 70), ("Жанна Юрьева", 0), ("Олег Шульц", 130)]


def _filled(template: str, people=PEOPLE) -> list[str]:
    return [
        render_html(
            template,
            {
                "name": name,
                "number": str(i),
                "clauses": str(clauses),
                "contract_number": f"2026-{i}",
                "city": ["Москва", "Тверь", "Казань", "Омск"][i],
                "email": f"person{i}@example.com",
                "position": "Инженер" * (i + 1),
                "salary": f"{1000 * (i + 1)} ₽",
                "start_date": f"2026-12-0{i + 1}",
                "signature": html_mark(),
            },
        )
        for i, (name, clauses) in enumerate(people)
    ]


def _text(pdf: bytes) -> str:
    return subprocess.run(
        ["pdftotext", "-", "-"], input=pdf, capture_output=True, check=True, timeout=30
    ).stdout.decode()


def _fonts(pdf: bytes) -> dict[str, object]:
    """The Type0 fonts of a PDF's pages by base name."""
    return {
        str(font["/BaseFont"]): font
        for page in PdfReader(io.BytesIO(pdf)).pages
        for font in (f.get_object() for f in page["/Resources"]["/Font"].values())
    }


def _unreferenced(pdf: bytes) -> set[int]:
    """The numbers of a PDF's objects that nothing reached from its trailer refers to."""
    reader = PdfReader(io.BytesIO(pdf))
    reached, todo = set(), list(reader.trailer.values())
    while todo:
        item = todo.pop()
        if isinstance(item, IndirectObject):
            if item.idnum not in reached:
                reached.add(item.idnum)
                todo.append(item.get_object())
        elif isinstance(item, dict):
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return set(reader.xref[0]) - reached


def _font_letters(pdf: bytes) -> dict[str, set[str]]:
    """Per font, the letters its ToUnicode map lists (as pdftotext reads them)."""
    return {
        name: set(unicode_map(font["/ToUnicode"].get_object().get_data()).values())
        for name, font in _fonts(pdf).items()
    }


def _outlines(pdf: bytes) -> dict[str, int]:
    """Per font, how many glyphs of its embedded program have an outline or a width."""
    counts = {}
    for name, font in _fonts(pdf).items():
        descriptor = font["/DescendantFonts"][0].get_object()["/FontDescriptor"].get_object()
        program = TTFont(io.BytesIO(descriptor["/FontFile2"].get_object().get_data()))
        counts[name] = sum(
            1
            for glyph in program.getGlyphOrder()
            if program["glyf"][glyph].numberOfContours or program["hmtx"][glyph][0]
        )
    return counts


def test_each_part_has_exactly_its_recipients_pages_words_and_look():
    documents = _filled(CONTRACT)
    split = together.render_together(CONTRACT, documents, timeout=60)
    assert isinstance(split, list) and len(split) == len(PEOPLE)
    for (name, _), document, part in zip(PEOPLE, documents, [p.pdf for p in split]):
        alone = render_pdf(document)
        assert together.same_pages(part, alone), name
        pages = PdfReader(io.BytesIO(part)).pages
        assert len(pages) == len(PdfReader(io.BytesIO(alone)).pages)
        assert not any("/Annots" in page for page in pages), "the first-page link is taken out"
        metadata, alone_metadata = (PdfReader(io.BytesIO(pdf)).metadata for pdf in (part, alone))
        assert {k: v for k, v in metadata.items() if k != "/CreationDate"} == {
            k: v for k, v in alone_metadata.items() if k != "/CreationDate"
        }
        text = _text(part)
        assert name in text and not [other for other, _ in PEOPLE if other != name and other in text]
        assert "bulksign.invalid" not in part.decode("latin-1")
        assert not _unreferenced(part), "no object of the run carried along unused (our link, the run's /CIDSet)"
        sizes = [PdfReader(io.BytesIO(pdf)).trailer["/Size"] for pdf in (part, alone)]
        assert sizes[0] <= sizes[1], "no object of the run carried along that a solo render does not have"
        assert _font_letters(part) == _font_letters(alone), f"{name}'s fonts hold only the letters of {name}'s pages"
        assert _outlines(part) == _outlines(alone), "and only their outlines and widths"
        for number in (1, len(pages)):
            drawn = [
                Image.open(io.BytesIO(page_png(pdf, number=number, width_px=600))).convert("RGB")
                for pdf in (part, alone)
            ]
            assert ImageChops.difference(*drawn).getbbox() is None, f"{name}, page {number} looks as alone"


@pytest.mark.parametrize(
    "start",
    [
        "<body style='font-family:serif'><h1>Договор {{ number }}</h1>",
        "<body style='font-family:serif'><p style='margin:0'>Договор {{ number }}</p>",
        "<body style='font-family:serif;margin:0'><h1>Договор {{ number }}</h1>",
        "<style>body{margin:30px} h1{margin-top:5px}</style><body style='font-family:serif'><h1>Д {{ number }}</h1>",
    ],
    ids=["default-margin-h1", "default-margin-p0", "no-margin", "styled-margins"],
)
def test_a_later_document_starts_where_it_starts_alone(start):
    template = f"<!doctype html><meta charset='utf-8'>{start}<p>{{{{ name }}}}</p>" + "<p>Текст.</p>" * 60 + "</body>"
    _assert_each_part_is_its_solo_render(template)


def test_the_demo_contract_renders_together_as_alone():
    """The bench's contract: mm margins and a line height of 1.5 put lines on fractions of a pixel."""
    _assert_each_part_is_its_solo_render(
        (Path(__file__).parents[2] / "bulksign/cli/demo_files/contract.html").read_text(encoding="utf-8")
    )


def _assert_each_part_is_its_solo_render(template: str) -> None:
    documents = _filled(template, PEOPLE[:3])
    parts = together.render_together(template, documents, timeout=60)
    assert isinstance(parts, list), parts
    assert all(together.same_pages(part.pdf, render_pdf(document)) for part, document in zip(parts, documents))


def test_a_template_that_lays_out_otherwise_together_is_refused_whole():
    """Without a doctype (quirks mode) WebKit drops the default margin of a body's first element (an <h1> here),
    not of one after our page start: the later parts would start 8 pt lower."""
    refused = together.render_together(TWO_PAGES, _filled(TWO_PAGES), timeout=60)
    assert refused == together.NotTogether("a document rendered together differs from the same one rendered alone")


@pytest.mark.parametrize(
    "template, reason",
    [
        ("<meta charset='utf-8'><p>{{ name }}</p>", "no <body> tag"),
        ("<title>{{ name }}</title><body><p>x</p></body>", "head or <body> tag holds a placeholder"),
        ("<body style='color:{{ colour }}'><p>x</p></body>", "head or <body> tag holds a placeholder"),
        ("<body><p>{{ name }}</p></body><p>after</p>", "content after </body>"),
    ],
)
def test_templates_that_cannot_be_put_together_say_why(template, reason):
    refused = together.combined_html(template, _filled(template))
    assert isinstance(refused, together.NotTogether) and reason in refused.reason


def test_a_recipient_past_the_page_limit_sends_the_run_back_to_one_run_each():
    documents = _filled(CONTRACT, [("Анна Иванова", 1), ("Пётр Сидоров", 300)])
    assert together.render_together(CONTRACT, documents, timeout=60, max_pages=3) == together.NotTogether(
        "a document runs past the page limit", lasting=False
    )


def test_links_stay_in_their_parts_and_carry_no_other_page():
    """wkhtmltopdf (Debian's) writes a link to an anchor as an address (``file://…#end``), like every other link:
    each part keeps its own links and nothing more."""
    linked = CONTRACT.replace(
        "<h1>", '<p><a href="#end">To the end</a> <a href="https://example.com/r">Rules</a></p><h1>'
    )
    linked = linked.replace("<p>Конец", '<p id="end">Конец')
    documents = _filled(linked)
    parts = together.render_together(linked, documents, timeout=60)
    assert not isinstance(parts, together.NotTogether)
    for part, document in zip([p.pdf for p in parts], documents):
        reader = PdfReader(io.BytesIO(part))
        assert len(reader.pages) == len(PdfReader(io.BytesIO(render_pdf(document))).pages)
        links = [a.get_object()["/A"]["/URI"] for a in reader.pages[0]["/Annots"]]
        assert links[0].endswith("#end") and links[1] == "https://example.com/r"
        assert _unreferenced(part) == set()


def test_each_parts_marks_view_is_the_part_with_its_text_left_out_and_the_same_marks():
    template = CONTRACT.replace("<p>Конец", "{{ signature }}<p>Конец")
    parts = together.render_together(template, _filled(template), timeout=60)
    assert isinstance(parts, list), parts
    colours = [mark_colour(index) for index in range(MAX_MARKS)] + [field_colour(index) for index in range(8)]
    for part in parts:
        assert part.marks_view.startswith(part.pdf), "the part, with an update appended"
        view, whole = PdfReader(io.BytesIO(part.marks_view)), PdfReader(io.BytesIO(part.pdf))
        assert len(view.pages) == len(whole.pages)
        for shown, full in zip(view.pages, whole.pages):
            assert b"BT" not in shown.get_contents().get_data() and b"BT" in full.get_contents().get_data()
            assert shown.extract_text().strip() == "" and full.extract_text().strip() != ""
        # Every frame the finder can be asked for, of any size: found in the view where it is in the part.
        assert find_framed_boxes(part.marks_view, colours=colours, min_w=1, min_h=1) == find_framed_boxes(
            part.pdf, colours=colours, min_w=1, min_h=1
        )
        assert find_signature_box(part.marks_view) == find_signature_box(part.pdf) is not None


def test_a_run_with_a_link_that_names_a_page_does_not_split():
    """A link to a page (``/Dest``, a GoTo action) would be cloned with the page it names: perhaps another
    recipient's (with one anchor name in every body). Should a renderer write one, the run is refused."""
    run = PdfReader(io.BytesIO(render_pdf(together.combined_html(CONTRACT, _filled(CONTRACT)))))
    writer = PdfWriter(clone_from=run)
    writer.add_annotation(1, Link(rect=(50, 50, 100, 100), target_page_index=0))
    out = io.BytesIO()
    writer.write(out)
    with pytest.raises(together.SplitError, match="a link within the document"):
        together.split(out.getvalue(), len(PEOPLE))


def test_a_pdf_without_the_first_page_links_does_not_split():
    with pytest.raises(together.SplitError, match="0 first pages found for 2 documents"):
        together.split(render_pdf(_filled(CONTRACT)[0]), 2)


#: A chunk's template: standards mode, the recipient's name, a signature box; the third row (salary 1002) runs
#: 300 pages.
CHUNK = (
    "<!doctype html><meta charset='utf-8'><body style=\"font-family:'DejaVu Serif'\"><h1>Договор</h1>"
    "<p>Работник: {{ name }}, оклад {{ salary }}.</p><p>Подпись: {{ signature }}</p>"
    "{% if salary == '1002' %}{% for i in range(300) %}<p style='page-break-after:always'>{{ i }}</p>{% endfor %}"
    "{% endif %}</body>"
)
NAMES = [("anna@example.com", "Анна Иванова"), ("petr@example.com", "Пётр Сидоров"), ("zh@example.com", "Жанна Юрьева")]


@pytest.fixture
def runs(monkeypatch):
    """The wkhtmltopdf runs of ``together``, by how many documents each held (0: a solo render to check against)."""
    made = []
    real = together.render_pdf

    def counting(html, **kwargs):
        made.append(html.count(together.FIRST_PAGE_URI))
        return real(html, **kwargs)

    monkeypatch.setattr(together, "render_pdf", counting)
    return made


def _originals(batch_id: int) -> dict[int, tuple[SigningRequest, Document | None]]:
    found = {}
    for request in requests_of(batch_id):
        found[request.id] = request, db.session.scalar(select(Document).where(Document.request_id == request.id))
    return found


def test_a_render_job_renders_its_chunk_in_one_run_and_keeps_each_recipients_own(app, users, runs):
    app.config["RENDER_TOGETHER"] = True
    template = CHUNK.replace("{% if salary == '1002' %}", "{% if false %}")
    batch = make_batch(user=users["staff"], now=NOW, recipients=NAMES, html=template)
    assert "generated 3" in render_chunk(request_ids(batch), app=app)
    assert runs == [3, 0], "one run of the chunk, one solo render to check it against"
    for request, original in _originals(batch).values():
        part = get_storage().get(original.storage_key)
        alone = render_pdf(render_html(template, document_context(request)))
        assert together.same_pages(part, alone) and _font_letters(part) == _font_letters(alone)
        assert [name for _, name in NAMES if name in _text(part)] == [request.name]
        box, solo_box = SignatureBox.from_json(original.signature_box), find_signature_box(alone)
        assert box.page == solo_box.page == 0 and abs(box.y - solo_box.y) < 0.5 and abs(box.x - solo_box.x) < 0.5
        assert box == SignatureBox.from_json(find_signature_box(part).to_json()), "found in its marks view as in it"


def test_a_chunk_that_cannot_run_together_is_rendered_one_by_one_and_a_long_row_fails_alone(app, users, runs, caplog):
    app.config["RENDER_TOGETHER"] = True
    batch = make_batch(user=users["staff"], now=NOW, recipients=NAMES, html=CHUNK)
    with caplog.at_level(logging.INFO, logger="bulksign.documents.together"):
        outcome = render_chunk(request_ids(batch), app=app)
    assert "generated 2" in outcome and "failed 1" in outcome
    states = {request.name: (request.status, request.error_message) for request, _ in _originals(batch).values()}
    assert states["Анна Иванова"][0] == states["Пётр Сидоров"][0] == Status.GENERATED
    assert states["Жанна Юрьева"][0] == Status.FAILED and "runs past 100 pages" in states["Жанна Юрьева"][1]
    told = [r.getMessage() for r in caplog.records if r.name == "bulksign.documents.together"]
    assert told == ["rendered one by one"] and runs == [3]
    # A quirks-mode template is the template's doing: found once, then its chunks go one by one without a try.
    for _ in range(2):
        quirks = make_batch(user=users["staff"], now=NOW, recipients=NAMES[:2], html=TWO_PAGES)
        assert "generated 2" in render_chunk(request_ids(quirks), app=app)
    assert runs == [3, 2, 0], "the second chunk of the quirks template was not tried together"


def test_a_row_that_cannot_be_filled_in_fails_alone_with_its_message_and_the_rest_run_together(app, users, runs):
    app.config["RENDER_TOGETHER"] = True
    # The second row's salary (1001) divides by zero: its template fails on its values, not the renderer.
    template = CHUNK.replace("{% if salary == '1002' %}", "<p>{{ 100 // (salary|int - 1001) }}</p>{% if false %}")
    batch = make_batch(user=users["staff"], now=NOW, recipients=NAMES, html=template)
    outcome = render_chunk(request_ids(batch), app=app)
    assert "generated 2" in outcome and "failed 1" in outcome
    assert runs == [2, 0], "the two others in one run, checked against one solo render"
    for request, original in _originals(batch).values():
        if request.name == "Пётр Сидоров":
            assert request.status == Status.FAILED and original is None
            assert request.error_message == "line 1: The template could not be filled in: it divides by zero."
            continue
        assert request.status == Status.GENERATED and request.error_message is None
        part = get_storage().get(original.storage_key)
        assert together.same_pages(part, render_pdf(render_html(template, document_context(request))))
        assert [name for _, name in NAMES if name in _text(part)] == [request.name]


def test_a_template_that_matched_its_solo_render_is_compared_again_one_run_in_check_every(monkeypatch):
    compared = []

    def rendering(template, documents, *, timeout, compare):
        compared.append(compare)
        return [b"%PDF-1.4" for _ in documents]

    monkeypatch.setattr(together, "render_together", rendering)
    monkeypatch.setattr(together, "_MATCHED", {})
    monkeypatch.setattr(together, "CHECK_EVERY", 3)
    for _ in range(7):
        together.render_chunk_together(
            version_id=1,
            template=CONTRACT,
            rows={n: {"name": name, "number": str(n), "clauses": "1"} for n, (name, _) in enumerate(PEOPLE)},
            timeout=60,
        )
    assert compared == [True, False, False, True, False, False, True]

"""Several recipients' documents from one wkhtmltopdf run: each part is what a solo render gives.

Each part: its recipient's pages, words at their places, page images, metadata, and fonts with only its letters.
Every HTML document is printed in the same frame alone or with others (``html_frame``), so a template with or
without a doctype, whatever its first element, lays out the same either way."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
from fontTools.ttLib import TTFont
from pypdf import PdfReader, PdfWriter
from pypdf.annotations import Link
from pypdf.generic import IndirectObject

from bulksign.doc_templates.jinja_sandbox import render_html
from bulksign.documents import html_frame, together
from bulksign.documents.field_boxes import field_colour
from bulksign.documents.font_programs import unicode_map
from bulksign.documents.pdf import render_pdf
from bulksign.documents.signature_box import MAX_MARKS, find_framed_boxes, find_signature_box, html_mark, mark_colour
from tests.support.pdf_compare import same_look, same_pages

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


def _run(template: str, people=PEOPLE) -> tuple[list[str], list[together.Part] | together.NotTogether]:
    documents = _filled(template, people)
    return documents, together.render_run([together.Filled.of(d) for d in documents], timeout=60)


def _alone(document: str) -> bytes:
    return together.render_alone(document, timeout=60)


def test_each_part_has_exactly_its_recipients_pages_words_and_look():
    documents, parts = _run(CONTRACT)
    assert isinstance(parts, list) and len(parts) == len(PEOPLE), parts
    for (name, _), document, part in zip(PEOPLE, documents, [p.pdf for p in parts]):
        alone = _alone(document)
        assert same_pages(part, alone), name
        pages = PdfReader(io.BytesIO(part)).pages
        assert not any("/Annots" in page for page in pages), "the first-page link is taken out"
        metadata, alone_metadata = (PdfReader(io.BytesIO(pdf)).metadata for pdf in (part, alone))
        assert {k: v for k, v in metadata.items() if k != "/CreationDate"} == {
            k: v for k, v in alone_metadata.items() if k != "/CreationDate"
        }
        text = _text(part)
        assert name in text and not [other for other, _ in PEOPLE if other != name and other in text]
        assert "bulksign.invalid" not in part.decode("latin-1")
        assert not _unreferenced(part), "no object of the run carried along unused (our link, the run's /CIDSet)"
        assert _font_letters(part) == _font_letters(alone), f"{name}'s fonts hold only the letters of {name}'s pages"
        assert _outlines(part) == _outlines(alone), "and only their outlines and widths"
        assert same_look(part, alone), f"{name}'s pages look as alone"


@pytest.mark.parametrize(
    "start",
    [
        "<!doctype html><meta charset='utf-8'><body style='font-family:serif'><h1>Договор {{ number }}</h1>",
        "<!doctype html><meta charset='utf-8'><body style='font-family:serif'><p style='margin:0'>Д {{ number }}</p>",
        "<!doctype html><meta charset='utf-8'><body style='font-family:serif;margin:0'><h1>Д {{ number }}</h1>",
        "<!doctype html><meta charset='utf-8'><style>body{margin:30px} h1{margin-top:5px}</style><body><h1>Д</h1>",
        "<meta charset='utf-8'><body style='font-family:serif'><h1>Договор {{ number }}</h1>",
        "<meta charset='utf-8'><h1>Договор {{ number }}</h1>",
        "<h1>Договор {{ number }}</h1>",
        "<meta charset='utf-8'><p>Договор {{ number }}</p>",
        "<meta charset='utf-8'><table><tr><td><h2>Договор {{ number }}</h2></td></tr></table>",
        "<html><head><meta charset='utf-8'><style>body{margin:2cm;font-size:12pt} h1{margin-top:0}</style></head>"
        "<body><h1>Д {{ number }}</h1>",
    ],
    ids=[
        "doctype-h1",
        "doctype-p0",
        "doctype-no-margin",
        "doctype-styled-margins",
        "no-doctype-h1",
        "no-body-tag-h1",
        "fragment",
        "no-doctype-p",
        "no-doctype-table",
        "no-doctype-page-margins",
    ],
)
def test_a_later_document_starts_where_it_starts_alone(start):
    """With or without a doctype, whatever the body begins with; the last of these, a body margin of 2 cm, once left
    a blank last page to a recipient printed alone (and to no part of a run)."""
    template = f"{start}<p>{{{{ name }}}}</p>" + "{% for i in range(clauses|int) %}<p>Пункт {{ i }}.</p>{% endfor %}"
    template += "<p>Текст.</p>" * 40
    documents, parts = _run(template)
    assert isinstance(parts, list), parts
    for part, document in zip(parts, documents):
        assert same_pages(part.pdf, _alone(document))


def test_an_office_document_renders_together_as_alone():
    """What office documents have: a logo, a header table, numbered and lettered clauses, a schedule whose header
    row repeats on every page it spans (its rows cut at a page's edge are drawn on both), a footer note."""
    logo = "data:image/gif;base64,R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw=="
    template = (
        "<html><head><meta charset='utf-8'><style>body{font-family:'DejaVu Sans';font-size:11pt;margin:1.5cm}"
        "th{background:#eee} td,th{border:1px solid #999;padding:3px} .foot{font-size:8pt;color:#666}"
        "</style></head><body>"
        f"<table style='width:100%'><tr><td><img src='{logo}' width='80' height='30'></td>"
        "<td style='text-align:right'>No. {{ number }}<br>{{ name }}</td></tr></table>"
        "<h2>Employment agreement</h2><ol><li>Position: engineer.</li><li>Start: today."
        "<ol type='a'><li>probation</li><li>notice</li></ol></li><li>Salary: {{ number }}00 EUR.</li></ol>"
        "<table><thead><tr><th>Month</th><th>Amount</th></tr></thead><tbody>"
        "{% for i in range(clauses|int) %}<tr><td>Month {{ i }}</td><td>{{ i }}00</td></tr>{% endfor %}"
        "</tbody></table><p class='foot'>Prepared for {{ name }}.</p></body></html>"
    )
    documents, parts = _run(template)
    assert isinstance(parts, list), parts
    for part, document in zip(parts, documents):
        assert same_pages(part.pdf, _alone(document))


def test_the_demo_contract_renders_together_as_alone():
    """The bench's contract: mm margins and a line height of 1.5 put lines on fractions of a pixel."""
    template = (Path(__file__).parents[2] / "bulksign/cli/demo_files/contract.html").read_text(encoding="utf-8")
    documents, parts = _run(template, PEOPLE[:3])
    assert isinstance(parts, list), parts
    assert all(same_pages(part.pdf, _alone(document)) for part, document in zip(parts, documents))


def test_a_body_with_padding_at_its_top_is_found_out_and_said():
    """Its later documents would start lower than alone (the padding is the body's, above the first only)."""
    template = "<meta charset='utf-8'><style>body{padding:20px}</style><body><h1>Д {{ number }}</h1><p>{{ name }}</p>"
    _, refused = _run(template)
    assert isinstance(refused, together.NotTogether) and refused.lasting
    assert "padding at the top of the page's body" in refused.message


@pytest.mark.parametrize(
    "template, reason",
    [
        ("<title>{{ name }}</title><body><p>x</p></body>", "its head (before the body) holds a placeholder"),
        ("<body style='color:{{ colour }}'><p>x</p></body>", "its head (before the body) holds a placeholder"),
        ("<style>@font-face{font-family:X;src:url(data:font/ttf;base64,AA==)}</style><p>{{ name }}</p>", "@font-face"),
        ("<p style='opacity:0.3'>DRAFT</p><p>{{ name }}</p>", "semi-transparent"),
        (f"<p class='{html_frame.RESERVED}'>{{{{ name }}}}</p>", html_frame.RESERVED),
    ],
)
def test_templates_that_cannot_be_put_together_say_why(template, reason):
    refused = together.template_problem(template)
    assert isinstance(refused, together.NotTogether) and reason in refused.message


def test_templates_as_staff_write_them_have_no_problem():
    assert together.template_problem("<h1>Договор</h1><p>{{ name }}</p>") is None
    assert together.template_problem(CONTRACT) is None


def test_a_recipient_past_the_page_limit_sends_the_run_back_to_one_run_each():
    documents = _filled(CONTRACT, [("Анна Иванова", 1), ("Пётр Сидоров", 300)])
    refused = together.render_run([together.Filled.of(d) for d in documents], timeout=60, max_pages=3)
    assert isinstance(refused, together.NotTogether) and not refused.lasting
    assert "runs past 3 pages" in refused.message


def test_links_stay_in_their_parts_and_carry_no_other_page():
    """wkhtmltopdf (Debian's) writes a link to an anchor as an address (``file://…#end``), like every other link:
    each part keeps its own links and nothing more."""
    linked = CONTRACT.replace(
        "<h1>", '<p><a href="#end">To the end</a> <a href="https://example.com/r">Rules</a></p><h1>'
    )
    linked = linked.replace("<p>Конец", '<p id="end">Конец')
    documents, parts = _run(linked)
    assert isinstance(parts, list), parts
    for part, document in zip([p.pdf for p in parts], documents):
        reader = PdfReader(io.BytesIO(part))
        assert len(reader.pages) == len(PdfReader(io.BytesIO(_alone(document))).pages)
        links = [a.get_object()["/A"]["/URI"] for a in reader.pages[0]["/Annots"]]
        assert links[0].endswith("#end") and links[1] == "https://example.com/r"
        assert _unreferenced(part) == set()


def test_each_parts_marks_view_is_the_part_with_its_text_left_out_and_the_same_marks():
    template = CONTRACT.replace("<p>Конец", "{{ signature }}<p>Конец")
    _, parts = _run(template)
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


def _run_pdf() -> bytes:
    filled = [together.Filled.of(d) for d in _filled(CONTRACT)]
    return render_pdf(html_frame.framed(filled[0].document.head, [f.document.body for f in filled]), max_pages=400)


def test_a_run_with_a_link_that_names_a_page_does_not_split():
    """A link to a page (``/Dest``, a GoTo action) would be cloned with the page it names: perhaps another
    recipient's (with one anchor name in every body). Should a renderer write one, the run is refused."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(_run_pdf())))
    writer.add_annotation(1, Link(rect=(50, 50, 100, 100), target_page_index=0))
    out = io.BytesIO()
    writer.write(out)
    with pytest.raises(together.SplitError, match="a link within the document"):
        together.split(out.getvalue(), len(PEOPLE))


def test_a_pdf_without_the_first_page_links_does_not_split():
    with pytest.raises(together.SplitError, match="0 first pages found for 2 documents"):
        together.split(render_pdf(_filled(CONTRACT)[0]), 2)


def test_a_solo_render_keeps_no_trace_of_the_frame():
    pdf = _alone(_filled(CONTRACT)[0])
    assert "bulksign.invalid" not in pdf.decode("latin-1")
    assert not any("/Annots" in page for page in PdfReader(io.BytesIO(pdf)).pages)
    assert "Анна Иванова" in _text(pdf)

"""Several recipients' Word documents from one LibreOffice conversion: each part is its copy converted alone, or
the template goes one by one for a reason staff can read, and no part holds anything of another recipient."""

from __future__ import annotations

import io
import logging
import subprocess

import pytest
from fontTools.ttLib import TTFont
from PIL import Image, ImageChops
from pypdf import PdfReader
from pypdf.generic import IndirectObject
from sqlalchemy import select

from bulksign.batches.rendering import document_context, render_chunk
from bulksign.core.extensions import db
from bulksign.core.messages import N_
from bulksign.doc_templates import docx_alone, docx_copies, docx_templates
from bulksign.doc_templates.docx_copy_text import copy_text
from bulksign.doc_templates.together import render_word_run
from bulksign.documents import docx_parts, docx_together, libreoffice
from bulksign.documents.field_boxes import find_field_boxes, stored_marks
from bulksign.documents.font_programs import unicode_map
from bulksign.documents.poppler import page_png
from bulksign.documents.signature_box import SignatureBox, find_signature_box
from bulksign.documents.storage import get_storage
from bulksign.models import Batch, Document, SigningRequest
from bulksign.models.status import Status
from tests.support import docx_files, word_copies
from tests.support.batches import make_batch, request_ids, requests_of
from tests.support.clock import NOW
from tests.support.pdf_compare import same_pages
from tests.support.word_copies import ROWS


def _text(pdf: bytes) -> str:
    return subprocess.run(
        ["pdftotext", "-", "-"], input=pdf, capture_output=True, check=True, timeout=30
    ).stdout.decode()


def _packed(source: bytes, filled: dict[str, bytes]) -> bytes:
    return docx_templates._prepared(source).pack(filled)


def _alone(source: bytes, filled: dict[str, bytes]) -> bytes:
    """The copy ``filled`` converted on its own, as the one-by-one path converts it."""
    return libreoffice.converter().convert(_packed(source, filled), timeout=60)


def _fonts(pdf: bytes) -> dict[str, object]:
    """The fonts of a PDF's pages by base name, without the subset's tag (``BAAAAA+``)."""
    return {
        str(font["/BaseFont"]).split("+", 1)[-1]: font
        for page in PdfReader(io.BytesIO(pdf)).pages
        for font in (f.get_object() for f in page["/Resources"].get("/Font", {}).values())
    }


def _letters(pdf: bytes) -> dict[str, set[str]]:
    """Per font, the letters its ToUnicode map lists."""
    return {name: set(unicode_map(f["/ToUnicode"].get_object().get_data()).values()) for name, f in _fonts(pdf).items()}


def _drawn(pdf: bytes) -> dict[str, set]:
    """Per font, the outlines (composites resolved) and widths of the glyphs its embedded program draws. Compared as
    sets: a run's subset may hold one outline twice (once a letter's, once a part of another letter)."""
    drawn = {}
    for name, font in _fonts(pdf).items():
        program = TTFont(io.BytesIO(font["/FontDescriptor"]["/FontFile2"].get_object().get_data()))
        glyphs, widths = program["glyf"], program["hmtx"]
        drawn[name] = {
            (tuple(glyphs[glyph].getCoordinates(glyphs)[0]), widths[glyph][0])
            for glyph in program.getGlyphOrder()
            if glyphs[glyph].numberOfContours or widths[glyph][0]
        }
    return drawn


def _unreferenced(pdf: bytes) -> set[int]:
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


def _looks_alike(part: bytes, alone: bytes) -> bool:
    count = len(PdfReader(io.BytesIO(alone)).pages)
    for number in range(1, count + 1):
        drawn = [
            Image.open(io.BytesIO(page_png(pdf, number=number, width_px=600))).convert("RGB") for pdf in (part, alone)
        ]
        if ImageChops.difference(*drawn).getbbox() is not None:
            return False
    return True


def _metadata(pdf: bytes) -> dict:
    return {k: v for k, v in (PdfReader(io.BytesIO(pdf)).metadata or {}).items() if k != "/CreationDate"}


def _links(pdf: bytes) -> list[tuple[int, object]]:
    """Each link of a PDF: (its page, the page it goes to or the address)."""
    reader = PdfReader(io.BytesIO(pdf))
    numbers = {page.indirect_reference.idnum: index for index, page in enumerate(reader.pages)}
    found = []
    for index, page in enumerate(reader.pages):
        for annotation in page.get("/Annots", []) or []:
            annotation = annotation.get_object()
            if "/Dest" in annotation:
                found.append((index, numbers[annotation["/Dest"][0].idnum]))
            else:
                found.append((index, str(annotation["/A"]["/URI"])))
    return found


def _own_and_nobody_elses(text: str, row: dict) -> None:
    others = [other for other in ROWS if other is not row]
    for key in ("name", "number", "salary", "city"):
        assert not [other[key] for other in others if other[key] in text], f"{row['name']}'s holds another's {key}"
    assert row["name"] in text, f"{row['name']}'s lacks its own name"


ORDINARY = {
    "contract": docx_files.contract,  # header and footer with a row's value and PAGE, a table, an image
    "a 10-page copy among 2-page ones": word_copies.long_contract,
    "a first page with a header of its own": word_copies.title_page,
    "a landscape second section": word_copies.landscape_section,
    "numbered lists, bullets, a table, an image": word_copies.numbered_list,
    "floating text boxes": word_copies.floating_shape,
    "a cross-reference": word_copies.cross_reference,
    "links into the document and out": word_copies.inner_links,
    "a last paragraph kept with the next": word_copies.kept_with_next,
    "two columns": word_copies.two_columns,
    "a first section that says continuous": word_copies.continuous_section,
    "numbered lines": word_copies.numbered_lines,
}


@pytest.mark.parametrize("make", ORDINARY.values(), ids=ORDINARY.keys())
def test_each_part_is_its_copy_converted_alone(make):
    source = make()
    assert docx_alone.why_alone(source) is None
    copies = [docx_templates.fill_parts(source, row) for row in ROWS]
    parts = render_word_run(source, copies, timeout=60)
    assert isinstance(parts, list) and len(parts) == len(ROWS), parts
    for row, filled, part in zip(ROWS, copies, parts):
        alone = _alone(source, filled)
        assert same_pages(part.pdf, alone), f"{row['name']}: pages, words and places as alone"
        assert _looks_alike(part.pdf, alone), f"{row['name']}: every page looks as alone"
        assert _letters(part.pdf) == _letters(alone), f"{row['name']}'s fonts hold the letters of its pages only"
        assert _drawn(part.pdf) == _drawn(alone), "and only their outlines and widths"
        assert _metadata(part.pdf) == _metadata(alone)
        assert _links(part.pdf) == _links(alone), "its links, to its own pages and addresses"
        assert not _unreferenced(part.pdf), "nothing of the run carried along unused"
        assert part.marks_view == part.pdf
        _own_and_nobody_elses(_text(part.pdf), row)


def test_each_part_takes_its_title_and_subject_from_its_own_copy():
    from docx import Document

    document = Document(io.BytesIO(docx_files.contract()))
    document.core_properties.title = "Договор {{ number }}"
    document.core_properties.subject = "Для {{ name }}"
    source = docx_files.save(document)
    copies = [docx_templates.fill_parts(source, row) for row in ROWS]
    parts = render_word_run(source, copies, timeout=60)
    for row, filled, part in zip(ROWS, copies, parts):
        metadata = _metadata(part.pdf)
        assert metadata["/Title"] == f"Договор {row['number']}" and metadata["/Subject"] == f"Для {row['name']}"
        assert metadata == _metadata(_alone(source, filled))
        assert PdfReader(io.BytesIO(part.pdf)).trailer["/Root"]["/ViewerPreferences"]["/DisplayDocTitle"]


def test_a_copy_past_the_page_limit_sends_the_run_back_to_one_by_one():
    source = word_copies.long_contract()
    copies = [docx_templates.fill_parts(source, row) for row in ROWS]
    refused = render_word_run(source, copies, timeout=60, max_pages=5)
    assert isinstance(refused, docx_together.NotTogether) and not refused.lasting
    assert refused.message == docx_together._TOO_LONG


#: Templates whose copies cannot be kept apart in one document, and what the template page says of each.
ALONE = {
    "page X of Y": (word_copies.page_of_pages, "total number of pages"),
    "footnotes": (word_copies.footnote, "footnotes or endnotes"),
    "a header only a later section has": (word_copies.header_in_second_section, "a header or footer of a kind"),
    "tracked changes": (word_copies.tracked_changes, "tracked changes"),
    "a deleted last paragraph mark": (word_copies.deleted_paragraph_mark, "tracked changes"),
    "comments": (word_copies.comment, "comments"),
    "a table of contents": (word_copies.table_of_contents, "table of contents"),
    "a field that reads the document's properties": (word_copies.title_field, "Word field (TITLE)"),
    "linked text boxes": (word_copies.linked_text_boxes, "text boxes linked"),
    "a last table": (word_copies.last_table, "ends with a table"),
}


@pytest.mark.parametrize("make, reason", ALONE.values(), ids=ALONE.keys())
def test_a_template_whose_copies_cannot_be_kept_apart_says_why(make, reason):
    said = docx_alone.why_alone(make())
    assert isinstance(said, N_) and reason in said.english, said


@pytest.fixture
def conversions(monkeypatch):
    """The LibreOffice conversions made: "run" for several copies at once, "alone" for one."""
    made = []
    real = libreoffice.Converter.convert

    def counting(self, data, **kwargs):
        made.append("run" if kwargs.get("options") == docx_together.EXPORT else "alone")
        return real(self, data, **kwargs)

    monkeypatch.setattr(libreoffice.Converter, "convert", counting)
    return made


def _word_batch(users, source: bytes, rows=ROWS, *, version=None) -> int:
    """A batch of ``rows`` on a new template of ``source``, or on ``version`` (a later batch of the same one)."""
    batch = make_batch(
        user=users["staff"],
        now=NOW,
        recipients=[(row["email"], row["name"]) for row in rows],
        html="",
        kind="docx",
        file=source,
        version=version,
    )
    for request, row in zip(requests_of(batch), rows):
        request.data = {k: v for k, v in row.items() if k not in ("name", "email")}
    db.session.commit()
    return batch


def _stored(batch: int) -> list[tuple[SigningRequest, Document | None]]:
    return [
        (request, db.session.scalar(select(Document).where(Document.request_id == request.id)))
        for request in requests_of(batch)
    ]


def _assert_each_stored_pdf_is_its_own(batch: int, source: bytes) -> None:
    for (request, original), row in zip(_stored(batch), ROWS):
        assert request.status == Status.GENERATED, request.error_message
        stored = get_storage().get(original.storage_key)
        alone = docx_templates.prepare(request.batch.template_version, source, document_context(request), timeout=60)()
        assert _text(stored) == _text(alone), f"{row['name']}'s stored PDF reads as its document alone"
        assert _looks_alike(stored, alone), f"{row['name']}'s stored PDF looks as its document alone"
        _own_and_nobody_elses(_text(stored), row)


#: Templates whose copies stay apart only because the merge makes each copy's own what Word would share.
KEPT_APART = {
    "headers and footers with a row's values, PAGE": docx_files.contract,
    "a first-page header": word_copies.title_page,
    "numbered lists": word_copies.numbered_list,
    "a cross-reference to a bookmark": word_copies.cross_reference,
    "floating text boxes": word_copies.floating_shape,
    "a first section that says continuous": word_copies.continuous_section,
}


@pytest.mark.parametrize("make", KEPT_APART.values(), ids=KEPT_APART.keys())
def test_a_chunk_is_converted_once_and_each_recipient_keeps_exactly_their_own(app, users, conversions, make):
    app.config["RENDER_TOGETHER"] = True
    source = make()
    batch = _word_batch(users, source)
    assert "generated 3" in render_chunk(request_ids(batch), app=app)
    assert conversions == ["run"], "one conversion for the chunk, every part kept"
    conversions.clear()
    _assert_each_stored_pdf_is_its_own(batch, source)


@pytest.mark.parametrize(
    "make, reason", [v for k, v in ALONE.items() if k not in ("comments",)], ids=[k for k in ALONE if k != "comments"]
)
def test_a_template_whose_copies_cannot_be_kept_apart_is_converted_one_by_one(
    app, users, conversions, caplog, make, reason
):
    app.config["RENDER_TOGETHER"] = True
    source = make()
    batch = _word_batch(users, source)
    with caplog.at_level(logging.INFO, logger="bulksign.doc_templates.together"):
        assert "generated 3" in render_chunk(request_ids(batch), app=app)
    assert conversions == ["alone"] * 3, "no run: each converted alone"
    told = [r for r in caplog.records if "rendered one by one from now on" in r.getMessage()]
    assert len(told) == 1 and reason in told[0].fields["reason"]
    stored = _stored_reason(batch)
    assert reason in N_(stored["msgid"], **stored["values"]).english
    conversions.clear()
    _assert_each_stored_pdf_is_its_own(batch, source)


def _stored_reason(batch_id: int) -> dict:
    """Why the batch's template version goes one by one, as the version keeps it for the template page."""
    return db.session.get(Batch, batch_id).template_version.render_alone


def _run_of(source: bytes) -> tuple[list[dict[str, bytes]], object]:
    copies = [docx_templates.fill_parts(source, row) for row in ROWS]
    return copies, render_word_run(source, copies, timeout=60)


@pytest.mark.parametrize(
    "make, undone",
    [
        (word_copies.header_in_second_section, None),  # the rule that keeps it alone is not asked here
        (word_copies.cross_reference, "_rename_bookmarks"),  # each REF names the first copy's bookmark
        (docx_files.contract, "_own_part"),  # every copy shows the first copy's header
    ],
    ids=["a header taken over from the copy before", "a cross-reference to the first copy", "shared headers"],
)
def test_a_part_that_holds_another_recipients_words_fails_the_run_for_good(monkeypatch, make, undone):
    """What the rules and the merge keep apart, the check of every part catches when they do not."""
    if undone == "_rename_bookmarks":
        monkeypatch.setattr(docx_copies, undone, lambda body, index: None)
    elif undone == "_own_part":
        monkeypatch.setattr(docx_copies._Merge, undone, lambda self, rid, index: rid)
    _, refused = _run_of(make())
    assert isinstance(refused, docx_together.NotTogether) and refused.lasting
    assert refused.message == docx_together._MISMATCH


def _piece(pages: int = 1, links: tuple[str, ...] | None = ()) -> docx_parts.Piece:
    return docx_parts.Piece(b"%PDF-", range(pages), links)


def test_the_check_of_a_part_names_what_is_not_its_copys_own():
    source = word_copies.inner_links()
    copies = [docx_templates.fill_parts(source, row) for row in ROWS]
    texts = [copy_text(docx_templates.package(source), filled) for filled in copies]
    everyone = frozenset().union(*(text.words for text in texts))
    anna = texts[0]
    page_one = "Работник Анна Иванова: к подписи (туда) сайт\n1"
    pages = [page_one, "Подпись Анна Иванова.\n2"]
    check = docx_together.check
    assert check(_piece(2, ("https://example.com/rules",)), anna, pages, everyone=everyone) == ""
    assert check(_piece(1), anna, pages[:1], everyone=everyone) == "pages", "the page break makes two pages at least"
    assert check(_piece(2, ("https://example.com/other",)), anna, pages, everyone=everyone) == "links"
    assert check(_piece(2, None), anna, pages, everyone=everyone) == "links", "an annotation that is not a link"
    leaked = [page_one, "Подпись Пётр Сидоров.\n2"]
    assert check(_piece(2), anna, leaked, everyone=everyone) == "another copy's word"
    assert check(_piece(2), anna, [page_one, "Подпись Анна Иванова. Секрет\n2"], everyone=everyone) == (
        "a word not in the copy"
    )
    assert check(_piece(2), anna, [page_one, "Анна Иванова.\n2"], everyone=everyone) == "a word of the copy missing"
    hyphenated = ["Работник Анна Ива-\nнова: к подписи (туда) сайт\n1", "Подпись Анна Иванова.\n2"]
    assert check(_piece(2), anna, hyphenated, everyone=everyone) == "", "a word hyphenated at a line's end is one"


def test_a_chunk_whose_run_fails_its_check_is_converted_one_by_one_and_its_template_after_it(
    app, users, conversions, caplog, monkeypatch
):
    app.config["RENDER_TOGETHER"] = True
    monkeypatch.setattr(docx_alone, "why_alone", lambda source: None)  # as if no rule had seen the header
    source = word_copies.header_in_second_section()
    batch = _word_batch(users, source)
    with caplog.at_level(logging.INFO, logger="bulksign.doc_templates.together"):
        assert "generated 3" in render_chunk(request_ids(batch), app=app)
    assert conversions == ["run", "alone", "alone", "alone"]
    told = [r.fields for r in caplog.records if "rendered one by one from now on" in r.getMessage()]
    assert len(told) == 1 and "did not hold exactly its own text" in told[0]["reason"]
    assert _stored_reason(batch)["msgid"] == docx_together._MISMATCH.msgid
    conversions.clear()
    _assert_each_stored_pdf_is_its_own(batch, source)
    conversions.clear()
    again = _word_batch(users, source, version=db.session.get(Batch, batch).template_version)
    assert "generated 3" in render_chunk(request_ids(again), app=app)
    assert conversions == ["alone"] * 3, "the version's later chunks are not tried together"


def test_a_row_the_template_cannot_take_fails_alone_and_the_others_share_a_run(app, users, conversions):
    app.config["RENDER_TOGETHER"] = True
    from docx import Document

    document = Document(io.BytesIO(docx_files.contract()))
    document.add_paragraph("Доля: {{ 100 // (salary|int - 5300) }}.")  # Пётр's salary divides by zero
    source = docx_files.save(document)
    batch = _word_batch(users, source)
    outcome = render_chunk(request_ids(batch), app=app)
    assert "generated 2" in outcome and "failed 1" in outcome
    assert conversions == ["run"], "the two others in one run, nothing converted for the third"
    for (request, original), row in zip(_stored(batch), ROWS):
        if row["salary"] == "5300":
            assert request.status == Status.FAILED and original is None and "divides by zero" in request.error_message
            continue
        _own_and_nobody_elses(_text(get_storage().get(original.storage_key)), row)


def test_with_render_together_off_each_word_document_is_converted_alone(app, users, conversions):
    app.config["RENDER_TOGETHER"] = False
    batch = _word_batch(users, docx_files.contract())
    assert "generated 3" in render_chunk(request_ids(batch), app=app)
    assert conversions == ["alone"] * 3


def test_each_part_keeps_its_signature_and_field_marks_where_its_document_alone_has_them(app, users, conversions):
    from docx import Document

    from bulksign.doc_templates.versions import create_template, save_fields

    app.config["RENDER_TOGETHER"] = True
    document = Document(io.BytesIO(docx_files.contract()))
    document.add_paragraph("Подпись: {{ signature }}")
    document.add_paragraph("ИНН: {{ field_inn }}")
    source = docx_files.save(document)
    template = create_template(
        db.session, name="Договор", html="", kind="docx", file=source, user=users["staff"], now=NOW
    ).template
    version = save_fields(
        db.session, template=template, fields=[{"name": "inn", "required": False}], user=users["staff"], now=NOW
    ).version
    db.session.commit()
    batch = make_batch(
        user=users["staff"], now=NOW, recipients=[(r["email"], r["name"]) for r in ROWS], version=version
    )
    assert "generated 3" in render_chunk(request_ids(batch), app=app)
    assert conversions == ["run"]
    conversions.clear()
    for request, original in _stored(batch):
        alone = docx_templates.prepare(version, source, document_context(request), timeout=60)()
        box, own = SignatureBox.from_json(original.signature_box), find_signature_box(alone)
        assert (box.page, round(box.x, 1), round(box.y, 1)) == (own.page, round(own.x, 1), round(own.y, 1))
        inn, own_inn = (
            SignatureBox.from_json(original.field_boxes["inn"]),
            find_field_boxes(alone, variables=stored_marks(version.fields))["inn"],
        )
        assert (inn.page, round(inn.x, 1), round(inn.y, 1)) == (own_inn.page, round(own_inn.x, 1), round(own_inn.y, 1))


def test_a_run_counts_each_of_its_documents_towards_the_converters_replacement():
    """LibreOffice is replaced after ``max_documents`` documents, a run of three counting three."""
    source = docx_files.contract()
    copies = [docx_templates.fill_parts(source, row) for row in ROWS]
    merged = docx_copies.merge(docx_templates.package(source), copies)
    converter = libreoffice.Converter(max_documents=3)
    try:
        converter.convert(merged, timeout=120, options=docx_together.EXPORT, documents=len(copies))
        assert converter.starts == 1 and converter.served == 3
        converter.convert(_packed(source, copies[0]), timeout=120)
        assert converter.starts == 2, "the run used up its LibreOffice"
    finally:
        converter.stop()

"""PDF templates: form fields become variables, each recipient's copy is filled and flattened, bad files refused."""

from __future__ import annotations

import subprocess
from io import BytesIO

import pytest
from pypdf import PdfReader

from bulksign.doc_templates import pdf_cleaning, pdf_fill, pdf_forms
from bulksign.doc_templates.errors import TemplateError
from tests.support.pdf_files import (
    CONTRACT_FIELDS,
    HTTPS_LINK,
    active_content,
    contract_form,
    encrypted_pdf,
    hostile_form,
    nested_pdf,
    plain_pdf,
    xfa_form,
)

RECIPIENTS = [
    {"name": "Иван Петров", "city": "Москва", "position": "Инженер", "salary": "4200 €", "contract_number": "C-1001"},
    {"name": "Jānis Bērziņš", "city": "Rīga", "position": "Engineer", "salary": "3900 €", "contract_number": "C-1002"},
    {
        "name": "Zoë Łukasiewicz",
        "city": "Kraków",
        "position": "Analyst",
        "salary": "3100 €",
        "contract_number": "C-1003",
    },
]


def text_of(pdf: bytes) -> str:
    return subprocess.run(
        ["pdftotext", "-enc", "UTF-8", "-", "-"], input=pdf, capture_output=True, timeout=30, check=True
    ).stdout.decode()


def test_form_fields_are_the_variables_and_signature_marks_the_place():
    form = pdf_forms.read_form(contract_form(signature=True, checkbox=True, multiline="notes"))
    assert form.variables == sorted([*CONTRACT_FIELDS, "notes"])  # not the check box, not the signature
    assert len(form.pages) == 2 and round(form.pages[0].width) == 595
    place = pdf_forms.signature_place(form.fields)
    assert (place.page, place.x, place.y, place.w, place.h) == (1, 300, 40, 200, 60)


def test_each_recipient_gets_their_values_only_in_their_own_flattened_pdf():
    template = contract_form(signature=True, checkbox=True)
    documents = [pdf_fill.fill(template, row) for row in RECIPIENTS]
    texts = [text_of(d) for d in documents]
    for mine, row in enumerate(RECIPIENTS):
        for other, text in enumerate(texts):
            for value in row.values():
                assert (value in text) == (mine == other), (value, other)
    for document in documents:
        reader = PdfReader(BytesIO(document))
        assert "/AcroForm" not in reader.root_object
        assert not reader.get_fields()
        assert not [a for p in reader.pages for a in p.get("/Annots") or () if a.get_object()["/Subtype"] == "/Widget"]
        assert len(reader.pages) == 2
    fonts = subprocess.run(["pdffonts", "-"], input=documents[0], capture_output=True, check=True).stdout.decode()
    assert any("DejaVu Sans" in line and " yes " in line for line in fonts.splitlines()), fonts


def test_multiline_fields_wrap_and_keep_every_word():
    notes = "Испытательный срок три месяца. " * 6
    document = pdf_fill.fill(contract_form(fields=("name",), multiline="notes"), {"name": "A", "notes": notes})
    assert " ".join(text_of(document).split()).count("Испытательный срок три месяца.") == 6


def test_a_value_the_font_cannot_show_fails_that_recipient_with_a_clear_message():
    with pytest.raises(TemplateError, match="cannot show: 李 小 龍"):
        pdf_fill.fill(contract_form(), {**RECIPIENTS[0], "name": "李小龍"})
    with pytest.raises(TemplateError, match="at most 2000"):
        pdf_fill.fill(contract_form(), {**RECIPIENTS[0], "city": "x" * 2001})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (encrypted_pdf(), "encrypted or password-protected"),
        (xfa_form(dynamic=True), "XFA form"),  # its pages only say "please wait": nothing to fill without the XFA
        (b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer <<>>\n%%EOF", "could not be read"),
        (contract_form()[:3000], "could not be read"),
        (b"PK\x03\x04 a zip, not a PDF", "not a PDF"),
    ],
)
def test_files_that_cannot_be_templates_are_refused_saying_why(data, message):
    with pytest.raises(TemplateError, match=message):
        pdf_forms.read_form(pdf_forms.clean(data).data)  # as an upload is checked: cleaned, then read


def test_page_and_size_limits(monkeypatch):
    with pytest.raises(TemplateError, match="101 pages; the limit is 100"):
        pdf_forms.read_form(plain_pdf(pages=101))
    monkeypatch.setattr(pdf_forms, "MAX_PDF_BYTES", 1000)
    with pytest.raises(TemplateError, match="the limit is 0 MB"):
        pdf_forms.read_form(plain_pdf())


def test_boxes_placed_on_a_plain_pdf_are_filled_like_fields():
    template = plain_pdf(pages=2)
    form = pdf_forms.read_form(template)
    assert form.variables == []
    boxes = pdf_forms.check_boxes(
        form,
        [
            {"name": "full_name", "page": 0, "x": 72, "y": 60, "w": 200, "h": 20, "font_size": 12},
            {"name": "signature", "page": 1, "x": 300, "y": 40, "w": 200, "h": 60, "font_size": 0},
        ],
    )
    assert pdf_forms.signature_place(boxes).page == 1
    document = pdf_fill.fill(template, {"full_name": "Мария Иванова-Петрова"}, placed=boxes)
    assert "Мария Иванова-Петрова" in text_of(document)


def test_a_long_value_in_a_small_box_shrinks_rather_than_being_cut_off():
    template = plain_pdf()
    boxes = pdf_forms.check_boxes(
        pdf_forms.read_form(template),
        [{"name": "name", "page": 0, "x": 72, "y": 60, "w": 120, "h": 16, "font_size": 12}],
    )
    long_name = "Александра Константиновна Преображенская"
    assert long_name in " ".join(text_of(pdf_fill.fill(template, {"name": long_name}, placed=boxes)).split())


@pytest.mark.parametrize(
    ("box", "message"),
    [
        ({"name": "x", "page": 3, "x": 10, "y": 10, "w": 50, "h": 20}, "on page 4; the PDF has 1"),
        ({"name": "x", "page": 0, "x": 500, "y": 10, "w": 200, "h": 20}, "beyond the edge of page 1"),
        ({"name": "x", "page": 0, "x": 10, "y": 10, "w": 200, "h": 2}, "too small: make it at least 4 pt"),
        ({"name": "x", "page": 0, "x": 10, "y": 10, "w": 50, "h": 20, "font_size": 200}, "between 4 and 72 pt"),
        ({"name": "{{ x }}", "page": 0, "x": 10, "y": 10, "w": 50, "h": 20}, "name of a column"),
        ({"page": 0, "x": 10, "y": 10, "w": 50, "h": 20}, "incomplete"),
    ],
)
def test_wrong_boxes_are_refused_naming_the_box(box, message):
    with pytest.raises(TemplateError, match=message):
        pdf_forms.check_boxes(pdf_forms.read_form(plain_pdf()), [box])


def test_a_signature_box_too_small_for_the_block_is_refused_at_save():
    with pytest.raises(TemplateError, match="signature box is too small"):
        pdf_fill.place(plain_pdf(), [{"name": "signature", "page": 0, "x": 72, "y": 60, "w": 60, "h": 20}])


def test_one_signature_place_only():
    form = pdf_forms.read_form(contract_form(signature=True))
    with pytest.raises(TemplateError, match="one place for the signature"):
        pdf_forms.check_boxes(form, [{"name": "signature", "page": 0, "x": 10, "y": 10, "w": 150, "h": 50}])


def test_every_kind_of_active_content_is_taken_out_and_named_while_fields_and_harmless_links_stay():
    hostile = hostile_form()
    assert {
        "/JS",
        "/JavaScript",
        "/Launch",
        "/EmbeddedFiles",
        "/AA",
        "/XFA",
        "/RichMedia",
        "/FileAttachment",
        "/SubmitForm",
        "/GoToR",
        "payload.exe",
        "cmd.exe",
    } <= active_content(hostile)
    cleaned = pdf_forms.clean(hostile)
    assert [label.english for label in cleaned.removed] == [
        "JavaScript",
        "launch actions (programs to start)",
        "links that are not https",
        "links to other files",
        "form submission and data import",
        "embedded files",
        "file attachments",
        "media and 3D content",
        "XFA form data",
    ]
    assert active_content(cleaned.data) == set()
    page = PdfReader(BytesIO(cleaned.data)).pages[0]
    actions = [a.get_object()["/A"] for a in page["/Annots"] if "/A" in a.get_object()]
    # The https link and the move to page 2 stay; the other links stay as boxes that do nothing.
    assert [(a["/S"], a.get("/URI")) for a in actions] == [("/URI", HTTPS_LINK), ("/GoTo", None)]
    assert pdf_forms.read_form(cleaned.data).variables == ["email", "name", "salary"]
    assert pdf_forms.clean(cleaned.data) == pdf_cleaning.Cleaned(data=cleaned.data)  # nothing left to take out
    row = {"name": "Иван Петров", "email": "ivan@example.com", "salary": "4200 €"}
    document = pdf_fill.fill(cleaned.data, row)
    assert active_content(document) == set()
    assert all(value in text_of(document) for value in row.values())


def test_a_pdf_without_active_content_is_kept_byte_for_byte():
    form = contract_form(signature=True, checkbox=True)
    assert pdf_forms.clean(form) == pdf_cleaning.Cleaned(data=form, removed=())


def test_a_form_with_xfa_beside_its_acroform_fields_keeps_the_fields():
    cleaned = pdf_forms.clean(xfa_form())
    assert cleaned.removed == (pdf_cleaning.XFA,) and "/XFA" not in active_content(cleaned.data)
    assert pdf_forms.read_form(cleaned.data).variables == sorted(CONTRACT_FIELDS)


def test_a_template_saved_before_cleaning_reaches_recipients_without_its_active_content():
    document = pdf_fill.fill(hostile_form(), {"name": "Anna", "email": "anna@example.com", "salary": "1"})
    assert active_content(document) == set() and "Anna" in text_of(document)


@pytest.mark.parametrize("depth", [300, 50_000])
def test_a_pdf_nested_too_deeply_is_refused_saying_so_not_a_crash(depth):
    # 300 levels pypdf reads and the cleaning's walk refuses; 50,000 exhaust the stack of pypdf's reader.
    for check in (pdf_forms.clean, lambda data: pdf_fill.fill(data, {})):
        with pytest.raises(TemplateError, match="nested more than 100 levels deep"):
            check(nested_pdf(depth))

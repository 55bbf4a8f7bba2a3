"""Fields the signer fills: ``{{ field_<name> }}`` in HTML and Word, a form field or placed box
``field_<name>`` in PDF; each found in document order with its box on its page, never a column the file must have
(a column ``field_<name>`` prefills it), and its settings checked and kept with the template version."""

from __future__ import annotations

import io
import json

import pytest
from docx import Document as WordDocument
from docx.enum.text import WD_BREAK
from pypdf import PdfReader
from reportlab.pdfgen import canvas
from sqlalchemy import update

from bulksign.core.extensions import db
from bulksign.doc_templates import kinds, pdf_fill, pdf_forms
from bulksign.doc_templates.columns import needed_columns
from bulksign.doc_templates.errors import FieldSettingsError, TemplateError
from bulksign.doc_templates.fields import (
    FieldSettings,
    check_settings,
    marked_fields,
    template_fields,
)
from bulksign.doc_templates.variables import sample_row
from bulksign.doc_templates.versions import create_template, get_version, place_boxes, save_fields, save_version
from bulksign.documents.field_boxes import MAX_FIELDS, field_colour, field_indexes, field_name, find_field_boxes
from bulksign.documents.signature_box import find_signature_box, mark_colour
from bulksign.documents.storage import get_storage
from bulksign.models import Document, SigningRequest
from bulksign.people.users import create_api_key
from bulksign.recipients.validation import validate_recipients
from bulksign.work.pipeline import enqueue_renders
from tests.support import docx_files
from tests.support.batches import make_batch, request_ids
from tests.support.clock import NOW
from tests.support.web import csrf_from

PAGE = '<meta charset="utf-8"><body style="font-family:\'DejaVu Serif\'">{body}</body>'
#: Three fields over two pages, the document's order not the names' (z, a, m).
HTML_FIELDS = PAGE.format(
    body="<h1>Employment contract</h1><p>Employee {{ name }}.</p><p>IBAN: {{ field_zz_iban }}</p>"
    "<p>I have read the work rules: {{ field_agree }}</p>"
    '<p style="page-break-before:always">Start date: {{ field_m_start }}</p><p>{{ signature }}</p>'
)
MM = 72 / 25.4


def test_a_mark_names_its_field_and_nothing_else_does():
    names = ["field_iban", "field_tax_class_2", "field_", "field_IBAN", "iban", "signature_field_x"]
    assert [field_name(v) for v in names] == ["iban", "tax_class_2", None, None, None, None]
    assert field_indexes(["name", "field_b", "field_a", "signature"]) == {"field_a": 0, "field_b": 1}
    # 64 shades, none of them a signature's.
    shades = {field_colour(i) for i in range(64)}
    assert len(shades) == 64 and not shades & {mark_colour(i) for i in range(16)}


def test_an_html_templates_fields_are_found_in_document_order_each_on_its_page(app, users):
    version = create_template(db.session, name="Contract", html=HTML_FIELDS, user=users["staff"], now=NOW).version
    assert marked_fields(version) == ("zz_iban", "agree", "m_start")
    pdf = kinds.render_document(version, sample_row(version.variables), timeout=60)
    boxes = kinds.field_boxes(version, pdf)
    assert set(boxes) == {"zz_iban", "agree", "m_start"}
    assert boxes["zz_iban"].page == boxes["agree"].page == 0 and boxes["m_start"].page == 1
    assert boxes["zz_iban"].y > boxes["agree"].y  # top to bottom
    # A text field's box is about 60 × 8 mm, a checkbox's 5 mm square (the frame's line counts half).
    assert abs(boxes["zz_iban"].w - 60 * MM) < 3 and abs(boxes["zz_iban"].h - 8 * MM) < 3
    # The signature's own box is still the signature's, not a field's.
    signature = find_signature_box(pdf)
    assert signature is not None and signature.page == 1 and signature.h > boxes["m_start"].h


def _form(*fields: tuple[str, str, int, int]) -> bytes:
    """Two pages; each field (name, kind ``text`` or ``checkbox``, page, y) as a form field."""
    buffer = io.BytesIO()
    drawing = canvas.Canvas(buffer, pagesize=(595, 842))
    for page in range(2):
        drawing.drawString(72, 800, f"Act of completed work, page {page + 1}")
        for name, kind, on, y in fields:
            if on != page:
                continue
            if kind == "checkbox":
                drawing.acroForm.checkbox(name=name, x=72, y=y, size=14)
            else:
                drawing.acroForm.textfield(name=name, x=72, y=y, width=200, height=20)
        drawing.showPage()
    drawing.save()
    return buffer.getvalue()


def test_a_pdf_templates_fields_and_placed_boxes_are_found_on_their_pages_and_are_not_columns(app, users):
    source = _form(
        ("name", "text", 0, 700), ("field_iban", "text", 0, 600), ("field_agree", "checkbox", 0, 500),
        ("field_city", "text", 1, 700),
    )  # fmt: skip
    saved = create_template(db.session, name="Act", html=None, user=users["staff"], now=NOW, kind="pdf", file=source)
    assert saved.version.variables == ["name"]
    version = place_boxes(
        db.session,
        template=saved.template,
        boxes=[{"name": "field_start", "page": 1, "x": 72, "y": 400, "w": 150, "h": 20}],
        user=users["staff"],
        now=NOW,
    ).version
    assert version.variables == ["name"]
    assert marked_fields(version) == ("iban", "agree", "city", "start")
    pdf = pdf_fill.fill(kinds.source(version.source_key), {"name": "Ivan"}, placed=pdf_forms.placed_boxes(version))
    boxes = kinds.field_boxes(version, pdf)
    assert {n: (b.page, round(b.y)) for n, b in boxes.items()} == {
        "iban": (0, 600),
        "agree": (0, 500),
        "city": (1, 700),
        "start": (1, 400),
    }
    # Nothing is left to edit: the field is an empty place a later step stamps.
    assert pdf_forms.read_form(pdf).fields == ()


def test_settings_are_checked_with_a_reason_for_each_refusal():
    names, roles = ["iban", "start", "tax", "agree"], ["recipient", "employer"]
    given = [
        {"name": "iban", "label": "Your IBAN", "pattern": "[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}"},
        {"name": "start", "type": "date", "minimum": "2026-01-01", "maximum": "2026-12-31", "role": "employer"},
        {"name": "tax", "type": "choice", "options": ["I", "II", " ", "II", "III"], "required": False},
    ]
    iban, start, tax, agree = check_settings(given, names=names, roles=roles)
    assert iban == FieldSettings(name="iban", label="Your IBAN", pattern="[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}")
    assert (start.type, start.minimum, start.maximum, start.role) == ("date", "2026-01-01", "2026-12-31", "employer")
    assert tax.options == ("I", "II", "III") and not tax.required
    assert agree == FieldSettings(name="agree") and agree.required and agree.type == "text"
    refusals = {
        "The template has no field “bic”. Its fields: iban, start, tax, agree.": {"name": "bic"},
        "The field “tax” is a choice: give it at least one option.": {"name": "tax", "type": "choice"},
        "The pattern of “iban” is not a valid regular expression: missing ).": {
            "name": "iban",
            "pattern": "([A-Z]",
        },
        "The lowest value of “start” (2026-12-31) is above its highest (2026-01-01).": {
            "name": "start",
            "type": "date",
            "minimum": "2026-12-31",
            "maximum": "2026-01-01",
        },
        "The lowest value of “tax” (10) is above its highest (2.5).": {
            "name": "tax",
            "type": "number",
            "minimum": 10,
            "maximum": "2,5",
        },
        "The field “iban” is given to “witness”, who does not sign this template. Who signs: recipient, employer.": {
            "name": "iban",
            "role": "witness",
        },
        "The field “iban” has the type “signature”; a field is one of: text, number, date, checkbox, choice, "
        "attachment, signed_date, signer_name.": {"name": "iban", "type": "signature"},
        "“soon” is not a date for “start”: write it as YYYY-MM-DD.": {
            "name": "start",
            "type": "date",
            "minimum": "soon",
        },
        "“nan” is not a number for “tax”.": {"name": "tax", "type": "number", "maximum": "nan"},
        "Only a text field has a pattern; “agree” is not one.": {"name": "agree", "type": "checkbox", "pattern": "x"},
        "Only a number or date field has a range; “iban” is not one.": {"name": "iban", "minimum": 1},
        "Only a choice field has options; “iban” is not one.": {"name": "iban", "options": ["a"]},
    }
    for message, raw in refusals.items():
        with pytest.raises(FieldSettingsError) as refused:
            check_settings([raw], names=names, roles=roles)
        assert refused.value.message.english == message
        assert refused.value.field == raw["name"]
    with pytest.raises(FieldSettingsError, match="given twice"):
        check_settings([{"name": "iban"}, {"name": "iban"}], names=names, roles=roles)


def test_a_mark_prints_only_its_box_and_no_word(app, users):
    version = create_template(db.session, name="Contract", html=HTML_FIELDS, user=users["staff"], now=NOW).version
    pdf = kinds.render_document(version, sample_row(version.variables), timeout=60)
    text = " ".join(p.extract_text() for p in PdfReader(io.BytesIO(pdf)).pages)
    assert "field_" not in text and "[" not in text
    assert find_field_boxes(pdf, variables=["name"]) == {}


def test_the_fields_are_kept_with_each_version_in_document_order_and_an_edit_keeps_their_settings(app, users):
    saved = create_template(db.session, name="Contract", html=HTML_FIELDS, user=users["staff"], now=NOW)
    assert [f.name for f in template_fields(saved.version)] == ["zz_iban", "agree", "m_start"]
    assert all(f.type == "text" and f.required and f.role == "recipient" for f in template_fields(saved.version))
    set_fields = save_fields(
        db.session,
        template=saved.template,
        fields=[{"name": "agree", "type": "checkbox", "label": "I have read the work rules"}],
        user=users["staff"],
        now=NOW,
    )
    assert set_fields.version.version == 2 and set_fields.version.html == saved.version.html
    # An edit of the document keeps the settings of the fields still marked; a new mark starts with the defaults.
    html = HTML_FIELDS.replace("{{ field_zz_iban }}", "{{ field_bic }}")
    edited = save_version(
        db.session, template=saved.template, html=html, user=users["staff"], now=NOW, **_mail(set_fields.version)
    ).version
    assert [(f.name, f.type, f.label) for f in template_fields(edited)] == [
        ("bic", "text", ""),
        ("agree", "checkbox", "I have read the work rules"),
        ("m_start", "text", ""),
    ]


def _mail(version) -> dict:
    return {f: getattr(version, f) for f in ("email_subject", "email_body", "reminder_subject", "reminder_body")}


def test_a_field_is_never_a_column_the_file_must_have_and_a_field_column_prefills_it(app, users):
    version = create_template(db.session, name="Contract", html=HTML_FIELDS, user=users["staff"], now=NOW).version
    columns = needed_columns(version)
    assert columns == {"name": "document", "field_agree": "optional", "field_m_start": "optional",
                       "field_zz_iban": "optional"}  # fmt: skip
    report = validate_recipients(
        b"email,name\nivan@example.com,Ivan\n", filename="r.csv", variables=columns, keep_rows=True
    )
    assert not report.errors and not report.missing_columns and report.valid_rows == 1
    assert not [w for w in report.warnings if "field_" in str(w)]
    prefilled = validate_recipients(
        b"email,name,field_zz_iban\nivan@example.com,Ivan,DE89370400440532013000\n",
        filename="r.csv",
        variables=columns,
        keep_rows=True,
    )
    assert prefilled.valid_rows == 1 and not prefilled.warnings
    assert prefilled.recipients[0].data["field_zz_iban"] == "DE89370400440532013000"


def test_each_rendered_document_keeps_where_its_fields_are(app, run_jobs):
    batch_id = make_batch(now=NOW, recipients=1, html=HTML_FIELDS)
    db.session.execute(update(SigningRequest).values(data={"field_zz_iban": "DE89"}))  # the file prefilled it
    db.session.commit()
    enqueue_renders(request_ids(batch_id))
    run_jobs("pdf")
    document = db.session.query(Document).filter_by(kind="original").one()
    pdf = get_storage().get(document.storage_key)
    assert set(document.field_boxes) == {"zz_iban", "agree", "m_start"}
    assert document.field_boxes["m_start"]["page"] == 1
    # The prefilled value is not printed: the box stays empty for the signer (and a later step stamps it).
    assert "DE89" not in " ".join(p.extract_text() for p in PdfReader(io.BytesIO(pdf)).pages)


def test_a_word_templates_fields_are_found_in_document_order_each_on_its_page(app, users):
    document = WordDocument()
    document.add_paragraph("IBAN {{ field_zz_iban }} and {{ name }}, I agree {{ field_agree }}")
    document.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
    document.add_paragraph("Start date: {{ field_m_start }}")
    source = docx_files.save(document)
    saved = create_template(db.session, name="Word", html=None, user=users["staff"], now=NOW, kind="docx", file=source)
    version = save_fields(
        db.session,
        template=saved.template,
        fields=[{"name": "agree", "type": "checkbox"}],
        user=users["staff"],
        now=NOW,
    ).version
    assert [f.name for f in template_fields(version)] == ["zz_iban", "agree", "m_start"]
    pdf = kinds.render_document(version, {"name": "Ivan", "field_zz_iban": "prefilled"}, timeout=60)
    boxes = kinds.field_boxes(version, pdf)
    assert set(boxes) == {"zz_iban", "agree", "m_start"} and boxes["zz_iban"].page == 0 and boxes["m_start"].page == 1
    assert boxes["zz_iban"].x < boxes["agree"].x  # one line, left to right
    assert abs(boxes["agree"].w - 5 * MM) < 3 and abs(boxes["zz_iban"].w - 60 * MM) < 3
    assert "prefilled" not in PdfReader(io.BytesIO(pdf)).pages[0].extract_text()


def test_the_fields_api_answers_the_settings_and_sets_them_as_a_new_version(app, users, client):
    saved = create_template(db.session, name="Contract", html=HTML_FIELDS, user=users["staff"], now=NOW)
    secret = create_api_key(db.session, user=users["staff"], name="integration", now=NOW).secret
    db.session.commit()
    headers = {"Authorization": f"Bearer {secret}"}
    url = f"/api/v1/templates/{saved.template.id}/fields"
    read = client.get(url, headers=headers).json
    assert read["version"] == 1 and read["roles"] == ["recipient"]
    assert [(f["name"], f["column"], f["type"], f["required"]) for f in read["fields"]] == [
        ("zz_iban", "field_zz_iban", "text", True),
        ("agree", "field_agree", "text", True),
        ("m_start", "field_m_start", "text", True),
    ]
    sent = [
        {"name": "m_start", "type": "date", "minimum": "2026-01-01", "label": "Start date"},
        {"name": "agree", "type": "checkbox", "required": False},
        {"name": "zz_iban", "pattern": "[A-Z]{2}[0-9]+", "read_only": True},
    ]
    answer = client.put(url, headers=headers, json={"fields": sent})
    assert answer.status_code == 200 and answer.json["version"] == 2
    again = client.get(url, headers=headers).json
    assert again == answer.json
    start = next(f for f in again["fields"] if f["name"] == "m_start")
    assert (start["type"], start["minimum"], start["maximum"], start["label"]) == (
        "date",
        "2026-01-01",
        None,
        "Start date",
    )
    for body, message in [
        ({"name": "tax", "type": "choice"}, "The template has no field “tax”."),
        ({"name": "agree", "type": "choice"}, "The field “agree” is a choice: give it at least one option."),
        ({"name": "zz_iban", "pattern": "(["}, "The pattern of “zz_iban” is not a valid regular expression"),
        ({"name": "m_start", "type": "number", "minimum": 5, "maximum": 1}, "The lowest value of “m_start” (5)"),
        ({"name": "agree", "role": "employer"}, "The field “agree” is given to “employer”"),
    ]:
        refused = client.put(url, headers=headers, json={"fields": [body]})
        assert refused.status_code == 422, body
        assert refused.json["error"]["code"] == "fields_invalid"
        assert message in refused.json["error"]["message"]
        assert refused.json["error"]["details"]["field"] == body["name"]
    assert client.get(url, headers=headers).json["version"] == 2  # nothing refused was saved


def test_a_box_bound_to_a_field_in_the_box_editor_is_a_field_and_the_editor_offers_the_fields(client, auth, users):
    auth.login()
    saved = create_template(
        db.session, name="Act", html="", kind="pdf", file=_form(("field_iban", "text", 0, 600)), user=users["staff"],
        now=NOW,
    )  # fmt: skip
    db.session.commit()
    template_id = saved.template.id
    page = client.get(f"/templates/{template_id}/place")
    assert '<option value="field_iban">' in page.get_data(as_text=True)
    boxes = [{"name": "field_start", "page": 1, "x": 72, "y": 400, "w": 150, "h": 20, "font_size": 0}]
    response = client.post(
        f"/templates/{template_id}/place", data={"csrf_token": csrf_from(page), "boxes": json.dumps(boxes)}
    )
    assert response.status_code == 302
    version = get_version(db.session, template_id=template_id)
    assert version.variables == [] and [f["name"] for f in version.fields] == ["iban", "start"]
    detail = client.get(f"/templates/{template_id}").get_data(as_text=True)
    assert "<code>field_iban</code>" in detail and "<code>field_start</code>" in detail


def test_a_refused_setting_is_said_in_the_callers_language(app, users, client):
    saved = create_template(db.session, name="Contract", html=HTML_FIELDS, user=users["staff"], now=NOW)
    secret = create_api_key(db.session, user=users["staff"], name="integration", now=NOW).secret
    users["staff"].locale = None  # the key's owner follows the caller's language
    db.session.commit()
    russian = client.put(
        f"/api/v1/templates/{saved.template.id}/fields",
        headers={"Authorization": f"Bearer {secret}", "Accept-Language": "ru"},
        json={"fields": [{"name": "agree", "type": "choice"}]},
    )
    assert russian.json["error"]["message"] == "Поле «agree» — это выбор: задайте хотя бы один вариант."


def test_a_template_marking_more_fields_than_there_are_shades_is_refused_at_save(app, users):
    marks = "".join(f"{{{{ field_f{i} }}}}" for i in range(MAX_FIELDS + 1))
    with pytest.raises(TemplateError) as refused:
        create_template(db.session, name="Many", html=f"<p>{marks}</p>", user=users["staff"], now=NOW)
    assert refused.value.message.english == f"A template may mark at most {MAX_FIELDS} fields."

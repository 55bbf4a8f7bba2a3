"""Roles from the template's marks: ``{{ signature_<role> }}`` in HTML and Word, ``signature_<role>`` fields and boxes
in PDF; each mark printed as its own shade of the grey frame and found by it; never a column; shown in document order
on the template page and in the API."""

from __future__ import annotations

import io

import pytest
from reportlab.pdfgen import canvas

from bulksign.core.extensions import db
from bulksign.doc_templates import docx_templates
from bulksign.doc_templates.columns import needed_columns
from bulksign.doc_templates.roles import template_roles
from bulksign.doc_templates.versions import create_template
from bulksign.documents.signature_box import find_signature_box, find_signature_boxes, mark_indexes, mark_role
from bulksign.documents.storage import get_storage
from bulksign.models import Document, SigningRequest
from bulksign.people.users import create_api_key
from bulksign.recipients.validation import validate_recipients
from bulksign.work.pipeline import enqueue_renders
from tests.support import docx_files
from tests.support.batches import make_batch, request_ids
from tests.support.clock import NOW

PAGE = '<meta charset="utf-8"><body style="font-family:\'DejaVu Serif\'">{body}</body>'
TWO_PARTIES = PAGE.format(
    body="<h1>Employment contract</h1><p>Employee {{ name }}, salary {{ salary }}.</p>"
    "<p>For the employer: {{ signature_employer }}</p><p>The employee: {{ signature }}</p>"
    "<p>Witness: {{ signature_hr_2 }}</p>"
)


def test_a_mark_names_its_role_and_nothing_else_does():
    assert [mark_role(v) for v in ["signature", "signature_employer", "signature_hr_2", "name", "signature_"]] == [
        "recipient",
        "employer",
        "hr_2",
        None,
        None,
    ]
    assert mark_role("signature_Boss") is None and mark_role("signature_recipient") is None
    # The recipient's frame is the one single-signer documents always had; the others by name.
    assert mark_indexes(["name", "signature_hr_2", "signature", "signature_employer"]) == {
        "signature": 0,
        "signature_employer": 1,
        "signature_hr_2": 2,
    }


def test_an_html_templates_roles_are_its_marks_in_document_order_and_none_is_a_column(app, users):
    saved = create_template(db.session, name="Two sides", html=TWO_PARTIES, user=users["staff"], now=NOW)
    db.session.commit()
    assert template_roles(saved.version) == ["employer", "recipient", "hr_2"]
    assert needed_columns(saved.version) == {"name": "document", "salary": "document"}
    report = validate_recipients(
        b"email,name,salary\nivan@example.com,Ivan,7\n", filename="r.csv", variables=saved.version.variables
    )
    assert not report.errors and not report.missing_columns and report.valid_rows == 1


def test_a_template_without_other_marks_is_signed_by_its_recipient_alone(app, users):
    for html in ["<p>{{ name }}</p>", "<p>{{ name }} {{ signature }}</p>", "<p>{{ signature_boss }}</p>"]:
        version = create_template(db.session, name="T", html=html, user=users["staff"], now=NOW).version
        expected = ["recipient", "boss"] if "boss" in html else ["recipient"]
        assert template_roles(version) == expected


def test_each_roles_mark_is_found_in_the_rendered_document_and_the_recipients_box_is_its_own(app, run_jobs):
    batch_id = make_batch(now=NOW, recipients=1, html=TWO_PARTIES)
    enqueue_renders(request_ids(batch_id))
    run_jobs("pdf")
    document = db.session.query(Document).filter_by(kind="original").one()
    pdf = get_storage().get(document.storage_key)
    recipient, employer, witness = find_signature_boxes(pdf, count=3)
    assert recipient and employer and witness
    # Top to bottom as the document has them: employer, employee, witness (y grows upwards).
    assert employer.y > recipient.y > witness.y
    assert len({(b.x, b.y) for b in (recipient, employer, witness)}) == 3
    # The stored box, where sealing stamps the recipient's signature, is the recipient's mark, not the first one.
    assert find_signature_box(pdf) == recipient
    assert document.signature_box == recipient.to_json()


def test_a_word_templates_marks_are_its_roles_and_each_is_found(app, users):
    source = docx_files.simple("Employer: {{ signature_employer }} Employee {{ name }}: {{ signature }}")
    saved = create_template(
        db.session, name="Word", html=None, user=users["staff"], now=NOW, kind="docx", file=source
    ).version
    db.session.commit()
    assert template_roles(saved) == ["employer", "recipient"]
    row = {"name": "Ivan Petrov", "signature": "", "signature_employer": ""}
    pdf = docx_templates.prepare(None, source, row, timeout=60)()
    recipient, employer = find_signature_boxes(pdf, count=2)
    assert recipient and employer
    assert (-employer.y, employer.x) < (-recipient.y, recipient.x)  # the employer's comes first
    assert find_signature_box(pdf) == recipient


def _pdf_with_fields(*names: str) -> bytes:
    """One page with a signature-sized text field per name, top to bottom."""
    buffer = io.BytesIO()
    drawing = canvas.Canvas(buffer, pagesize=(595, 842))
    drawing.drawString(72, 800, "Act of completed work")
    for number, name in enumerate(names):
        drawing.acroForm.textfield(name=name, x=72, y=620 - number * 120, width=228, height=80, borderWidth=1)
    drawing.save()
    return buffer.getvalue()


def test_a_pdf_templates_signature_fields_are_its_roles_top_to_bottom_and_none_is_a_column(app, users):
    source = _pdf_with_fields("signature_customer", "signature")
    saved = create_template(db.session, name="Act", html=None, user=users["staff"], now=NOW, kind="pdf", file=source)
    db.session.commit()
    assert template_roles(saved.version) == ["customer", "recipient"]
    assert saved.version.variables == [] and not any(map(mark_role, needed_columns(saved.version)))


def test_the_template_page_and_the_api_show_the_roles_in_document_order(app, users, client, auth):
    saved = create_template(db.session, name="Two sides", html=TWO_PARTIES, user=users["staff"], now=NOW)
    db.session.commit()
    template_id = saved.template.id
    auth.login()
    page = client.get(f"/templates/{template_id}").get_data(as_text=True)
    assert '<dd id="roles">Employer, Recipient, Hr 2</dd>' in page
    secret = create_api_key(db.session, user=users["staff"], name="integration", now=NOW).secret
    db.session.commit()
    answer = client.get("/api/v1/templates", headers={"Authorization": f"Bearer {secret}"})
    (shown,) = [t for t in answer.json["items"] if t["id"] == template_id]
    assert shown["roles"] == ["employer", "recipient", "hr_2"]


def test_a_template_marking_more_signatures_than_there_are_shades_is_refused_at_save(app, users):
    from bulksign.doc_templates.errors import TemplateError
    from bulksign.documents.signature_box import MAX_MARKS

    marks = "".join(f"{{{{ signature_p{i} }}}}" for i in range(MAX_MARKS))
    with pytest.raises(TemplateError) as refused:
        create_template(
            db.session, name="Many", html=f"<p>{{{{ signature }}}}{marks}</p>", user=users["staff"], now=NOW
        )
    assert refused.value.message.english == f"A template may mark at most {MAX_MARKS} signatures."
    fits = "".join(f"{{{{ signature_p{i} }}}}" for i in range(MAX_MARKS - 1))
    version = create_template(
        db.session, name="Fits", html=f"<p>{{{{ signature }}}}{fits}</p>", user=users["staff"], now=NOW
    )
    assert len(template_roles(version.version)) == MAX_MARKS


def test_the_roles_are_stored_at_save_and_an_earlier_versions_signature_date_stays_a_column(app, users):
    from bulksign.batches.rendering import document_context

    saved = create_template(db.session, name="Two sides", html=TWO_PARTIES, user=users["staff"], now=NOW)
    db.session.commit()
    assert saved.version.roles == ["employer", "recipient", "hr_2"]
    # Saved before roles were read (the migration's ``["recipient"]``): ``signature_date`` was, and is, a column.
    html = PAGE.format(body="<p>{{ name }} signs on {{ signature_date }}: {{ signature }}</p>")
    batch_id = make_batch(now=NOW, recipients=1, html=html)
    request = db.session.get(SigningRequest, request_ids(batch_id)[0])
    request.data = {"signature_date": "1 March"}
    version = request.batch.template_version
    version.roles = ["recipient"]
    db.session.commit()
    assert template_roles(version) == ["recipient"]
    assert "signature_date" in needed_columns(version)
    assert document_context(request)["signature_date"] == "1 March"

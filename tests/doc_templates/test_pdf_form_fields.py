"""A fillable PDF's own form fields assigned on its placement page: to a party who fills them (with a type), to a
party's signature, to a column of the file, or left as they are; kept per version, checked, and in a routed
request each party's value lands in its form field's place in the sealed PDF, as a placed box's does."""

from __future__ import annotations

import io
import subprocess
from datetime import timedelta

import pytest
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.doc_templates import kinds
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.fields import template_fields
from bulksign.doc_templates.roles import pdf_role_places
from bulksign.doc_templates.template_check import check_template
from bulksign.doc_templates.versions import create_template, place_boxes, save_parties
from bulksign.documents.seal_keys import seal_key
from bulksign.documents.sealing import check_seal
from bulksign.documents.signature_box import SignatureBox
from bulksign.documents.storage import get_storage
from bulksign.models import Document, Party, SigningRequest, utcnow
from bulksign.work.pipeline import enqueue_renders
from tests.support.batches import batch_from_file, request_ids
from tests.support.clock import NOW
from tests.support.form_signing import sign_filled


def form_pdf() -> bytes:
    """An agreement as an office makes it in Acrobat: a name, a position, a salary, a contract number, a choice of
    office, and a big field for the employer's signature, none named as bulksign's marks."""
    buffer = io.BytesIO()
    c = canvas.Canvas(buffer, pagesize=A4)
    c.drawString(72, 800, "Employment agreement")
    for y, name in ((700, "Employee name"), (660, "Position"), (620, "Salary"), (580, "Contract No")):
        c.drawString(72, y + 5, f"{name}:")
        c.acroForm.textfield(name=name, x=200, y=y, width=250, height=20, borderWidth=0, fillColor=None)
    c.acroForm.choice(name="Office", x=200, y=540, width=150, height=20, options=["Riga", "Tallinn"], value="Riga")
    c.drawString(72, 420, "For the employer:")
    c.acroForm.textfield(name="Employer signature", x=200, y=330, width=250, height=90, borderWidth=1)
    c.showPage()
    c.save()
    return buffer.getvalue()


USES = [
    {"name": "Position", "use": "field", "party": "employer", "type": "text"},
    {"name": "Salary", "use": "field", "party": "recipient", "type": "number"},
    {"name": "Contract No", "use": "column", "column": "contract_number"},
    {"name": "Office", "use": "field", "party": "employer", "type": "choice"},
    {"name": "Employer signature", "use": "signature", "party": "employer"},
    {"name": "Employee name", "use": ""},  # left as it is: the column of its own name
]


def _template(users, uses=USES):
    saved = create_template(
        db.session, name="Agreement", html=None, user=users["staff"], now=NOW, kind="pdf", file=form_pdf()
    )
    assert saved.version.variables == [
        "Contract No",
        "Employee name",
        "Employer signature",
        "Office",
        "Position",
        "Salary",
    ]
    assert saved.version.pdf_form_fields is None  # nothing assigned: every field is a column, as before
    return place_boxes(db.session, template=saved.template, boxes=None, form_fields=uses, user=users["staff"], now=NOW)


def test_assigned_form_fields_become_a_partys_fields_signature_and_a_column(app, users):
    version = _template(users).version
    assert version.variables == ["Employee name", "contract_number"]
    assert version.roles == ["recipient", "employer"]
    fields = {f.name: (f.role, f.type, f.label, f.options) for f in template_fields(version)}
    assert fields == {
        "position": ("employer", "text", "Position", ()),
        "salary": ("recipient", "number", "Salary", ()),
        "office": ("employer", "choice", "Office", ("Riga", "Tallinn")),
    }
    assert round(pdf_role_places(version)["employer"].h) == 90
    assert [u["name"] for u in version.pdf_form_fields] == [
        "Position",
        "Salary",
        "Contract No",
        "Office",
        "Employer signature",
    ]

    pdf = kinds.render_document(version, {"Employee name": "Eva Employee", "contract_number": "C-17"}, timeout=30)
    text = subprocess.run(["pdftotext", "-", "-"], input=pdf, capture_output=True, check=True).stdout.decode()
    assert "Eva Employee" in text and "C-17" in text
    boxes = kinds.field_boxes(version, pdf)
    assert {n: round(b.y) for n, b in boxes.items()} == {"position": 660, "salary": 620, "office": 540}
    # A version without a change of the form's fields keeps them (a new set of placed boxes).
    again = place_boxes(db.session, template=version.template, boxes=[], user=users["staff"], now=NOW).version
    assert again.pdf_form_fields == version.pdf_form_fields and again.variables == version.variables


def test_a_field_assigned_again_keeps_its_name_and_takes_the_new_party_and_type(app, users):
    version = _template(users).version
    changed = [{**u, "party": "recipient", "type": "date"} if u["name"] == "Position" else u for u in USES]
    again = place_boxes(
        db.session, template=version.template, boxes=None, form_fields=changed, user=users["staff"], now=NOW
    )
    position = next(f for f in template_fields(again.version) if f.name == "position")
    assert (position.role, position.type) == ("recipient", "date")
    # Nothing assigned any more: today's behaviour, every field a column of its own name.
    plain = place_boxes(db.session, template=version.template, boxes=None, form_fields=[], user=users["staff"], now=NOW)
    assert plain.version.pdf_form_fields is None and "Position" in plain.version.variables


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ([{"name": "Nope", "use": "column", "column": "x"}], "The PDF has no form field “Nope”"),
        ([{"name": "Salary", "use": "field", "type": "choice"}], "offers no options"),
        ([{"name": "Salary", "use": "field", "type": "attachment"}], "has the type “attachment”"),
        ([{"name": "Salary", "use": "column", "column": "{{ x }}"}], "needs the name of a column"),
        ([{"name": "Salary", "use": "field", "party": "Boss!"}], "needs a party's key"),
        ([{"name": "Salary", "use": "paint"}], "is made “paint”"),
        ([{"name": "Salary", "use": "column", "column": "a"}, {"name": "Salary", "use": ""}], "given twice"),
    ],
)
def test_a_wrong_assignment_is_refused_naming_the_field(app, users, given, said):
    with pytest.raises(TemplateError) as refused:
        _template(users, given)
    assert said in str(refused.value.message)


def test_the_check_warns_of_a_form_field_given_to_no_party_and_of_a_party_with_no_signature_place(app, users):
    uses = [{"name": "Position", "use": "field", "party": "manager"}]
    version = _template(users, uses).version
    found = check_template(version, language="en")
    assert any(
        "“Position” is given to “manager”, who is not one of the template's parties" in str(w) for w in found.warnings
    )
    assert not found.errors
    assert template_fields(version)[0].role == "recipient"  # filled by someone meanwhile
    # The employer a party without a place of its own: it signs on a page added at the end, and is told so.
    parties = [{"key": "recipient"}, {"key": "employer", "source": "columns"}]
    version = save_parties(
        db.session, template=version.template, parties=parties, routing=None, user=users["staff"], now=NOW
    ).version
    warnings = [str(w) for w in check_template(version, language="en").warnings]
    assert any("has no signature place" in w for w in warnings), warnings


def _document(request_id: int, kind: str) -> Document:
    db.session.expire_all()
    return db.session.scalars(
        select(Document).where(Document.request_id == request_id, Document.kind == kind).order_by(Document.id.desc())
    ).first()


def _party(request_id: int, role: str) -> Party:
    db.session.expire_all()
    return db.session.scalars(select(Party).where(Party.request_id == request_id, Party.role == role)).one()


def test_each_party_fills_its_own_form_fields_and_the_sealed_pdf_prints_them_there(app, users, smtp, run_jobs):
    version = _template(users).version
    db.session.commit()
    rows = "email,name,Employee name,contract_number\neva@example.com,Eva,Eva Employee,C-17\n"
    parties = {"parties": '{"employer": {"email": "hr@acme.example", "name": "Anna Boss"}}'}
    batch = batch_from_file(
        user=users["staff"], version=version, rows=rows, form=parties, now=utcnow() - timedelta(minutes=5)
    )
    (request_id,) = request_ids(batch.id)
    enqueue_renders([request_id])
    run_jobs("pdf", "mail")
    sign_filled(request_id, "Eva Employee", _party(request_id, "recipient"), typed={"salary": "4200"})
    run_jobs("pdf", "mail")
    sign_filled(
        request_id, "Anna Boss", _party(request_id, "employer"), typed={"position": "Welder", "office": "Tallinn"}
    )
    run_jobs("pdf", "mail")
    assert db.session.get(SigningRequest, request_id).status == "signed"

    signed = get_storage().get(_document(request_id, "signed").storage_key)
    assert check_seal(signed, seal_key(app.config)).valid
    boxes = {n: SignatureBox.from_json(b) for n, b in _document(request_id, "original").field_boxes.items()}
    for field, value in (("position", "Welder"), ("salary", "4,200"), ("office", "Tallinn")):
        box = boxes[field]
        top = 841.89 - box.y - box.h
        words = subprocess.run(
            ["pdftotext", "-x", str(round(box.x)), "-y", str(round(top)), "-W", str(round(box.w)), "-H",
             str(round(box.h)), "-f", "1", "-l", "1", "-", "-"],
            input=signed, capture_output=True, check=True,
        ).stdout.decode()  # fmt: skip
        assert words.split() == [value], (field, words)

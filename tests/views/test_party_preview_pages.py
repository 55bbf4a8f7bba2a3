"""The template's sample row, edited on the template page, and the template previewed as each party: each party
sees its own fields only, where it signs, and hostile sample values as text."""

from __future__ import annotations

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template, save_fields, save_parties
from bulksign.models import DocumentTemplate
from bulksign.people.teams import create_team
from tests.support import docx_files, pdf_files
from tests.support.clock import NOW
from tests.support.web import csrf_from

CONTRACT = (
    "<h1>Employment contract</h1><p>Employee: {{ name }}, salary {{ salary }}, {{ city }}.</p>"
    "<p>IBAN {{ field_iban }}</p><p>Children {{ field_children }}</p><p>Stamp {{ field_stamp }}</p>"
    "<p>The employee: {{ signature }}</p><p>For the employer: {{ signature_employer }}</p>"
)


def _contract(users) -> DocumentTemplate:
    template = create_template(db.session, name="Contract", html=CONTRACT, user=users["staff"], now=NOW).template
    save_parties(
        db.session,
        template=template,
        parties=[
            {"key": "recipient", "labels": {"en": "Employee", "ru": "Работник"}, "colour": "#1f6feb"},
            {"key": "employer", "labels": {"en": "Employer", "ru": "Работодатель"}, "colour": "#b35900"},
        ],
        routing=[["recipient"], ["employer"]],
        user=users["staff"],
        now=NOW,
    )
    save_fields(
        db.session,
        template=template,
        fields=[
            {"name": "iban", "label": "Your IBAN", "role": "recipient"},
            {
                "name": "children",
                "type": "number",
                "label": "Children",
                "role": "recipient",
                "condition": {"kind": "field", "source": "iban", "operator": "filled", "value": ""},
            },
            {"name": "stamp", "label": "Company stamp number", "role": "employer"},
        ],
        user=users["staff"],
        now=NOW,
    )
    db.session.commit()
    return template


def test_each_party_sees_its_own_fields_and_where_it_signs(app, client, auth, users):
    template = _contract(users)
    auth.login()
    detail = client.get(f"/templates/{template.id}").get_data(as_text=True)
    assert 'id="sample-form"' in detail and "Preview as Employee" in detail and "Preview as Employer" in detail
    assert 'name="sample-salary" value="[salary]"' in detail

    employee = client.get(f"/templates/{template.id}/preview/recipient")
    text = employee.get_data(as_text=True)
    assert employee.status_code == 200, text
    assert 'id="field-iban"' in text and 'id="field-children"' in text and 'id="field-stamp"' not in text
    assert "Shown only when" in text or 'data-when-field="field-iban"' in text
    assert 'id="sign-here"' in text and "Employee signs here" in text
    assert "Company stamp number — Employer" in text
    assert client.get(f"/templates/{template.id}/preview/recipient/pages/1.png").mimetype == "image/png"

    employer = client.get(f"/templates/{template.id}/preview/employer").get_data(as_text=True)
    assert 'id="field-stamp"' in employer and 'id="field-iban"' not in employer
    assert "Employer signs here" in employer and "Your IBAN — Employee" in employer
    assert client.get(f"/templates/{template.id}/preview/witness").status_code == 404


def test_a_hostile_sample_is_saved_and_shown_as_text(app, client, auth, users):
    template = _contract(users)
    auth.login()
    page = client.get(f"/templates/{template.id}")
    answer = client.post(
        f"/templates/{template.id}/sample",
        data={"csrf_token": csrf_from(page), "sample-name": "<script>alert(1)</script>", "sample-salary": "{{ 7*7 }}"},
        headers={"HX-Request": "true"},
    )
    text = answer.get_data(as_text=True)
    assert answer.status_code == 200 and 'id="sample-saved"' in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "<script>alert" not in text
    db.session.expire_all()
    assert db.session.get(DocumentTemplate, template.id).sample == {
        "name": "<script>alert(1)</script>",
        "salary": "{{ 7*7 }}",
    }
    preview = client.get(f"/templates/{template.id}/preview/recipient").get_data(as_text=True)
    # The document's text (the large-print reading) holds the values as typed: not run, not made markup.
    read = preview.split('class="doc-text"')[1].split("</details>")[0]
    assert "{{ 7*7 }}" in read and "49" not in read and "&lt;script&gt;alert(1)&lt;/script&gt;" in read
    assert "<script>alert" not in preview
    # The city was left out: the check warns, in plain words.
    detail = client.get(f"/templates/{template.id}").get_data(as_text=True)
    assert "The sample row has no value for the column “city”" in detail


def test_the_sample_form_goes_back_to_the_preview_without_scripts(app, client, auth, users):
    template = _contract(users)
    auth.login()
    page = client.get(f"/templates/{template.id}/preview/employer")
    answer = client.post(
        f"/templates/{template.id}/sample",
        data={"csrf_token": csrf_from(page), "party": "employer", "sample-city": "Riga"},
    )
    assert answer.status_code == 302 and answer.headers["Location"].endswith(
        f"/templates/{template.id}/preview/employer"
    )


def test_another_teams_template_is_out_of_reach(app, client, auth, users):
    template = _contract(users)
    template.team_id = create_team(db.session, name="Elsewhere", now=NOW).id
    template.created_by_id = users["admin"].id
    db.session.commit()
    auth.login()
    assert client.get(f"/templates/{template.id}/preview/recipient").status_code == 404
    page = client.get("/templates/")
    answer = client.post(f"/templates/{template.id}/sample", data={"csrf_token": csrf_from(page), "sample-city": "x"})
    assert answer.status_code == 404
    db.session.expire_all()
    assert db.session.get(DocumentTemplate, template.id).sample is None


def test_a_pdf_and_a_word_template_are_previewed_from_their_rendered_pages(app, client, auth, users):
    form = create_template(
        db.session,
        name="Form",
        html="",
        kind="pdf",
        file=pdf_files.contract_form(fields=("name", "city"), signature=True),
        user=users["staff"],
        now=NOW,
    ).template
    word = create_template(
        db.session,
        name="Letter",
        html="",
        kind="docx",
        file=docx_files.simple("Hello {{ name }} from {{ city }}. {{ signature }}"),
        user=users["staff"],
        now=NOW,
    ).template
    form.sample = {"name": "Olga", "city": "Riga <b>"}
    word.sample = {"name": "Olga", "city": "Tallinn"}
    db.session.commit()
    auth.login()
    pdf = client.get(f"/templates/{form.id}/preview/recipient").get_data(as_text=True)
    assert 'id="sign-here"' in pdf and "Riga &lt;b&gt;" in pdf
    assert client.get(f"/templates/{form.id}/preview/recipient/pages/1.png").mimetype == "image/png"
    letter = client.get(f"/templates/{word.id}/preview/recipient").get_data(as_text=True)
    assert "Hello Olga from Tallinn." in letter and 'id="sign-here"' in letter

"""A fillable PDF's own form fields on the placement page and over the API: listed where they are with what each
becomes, assigned with selects (no braces typed), saved as a new version, and answered with the template."""

from __future__ import annotations

import json

from bulksign.core.extensions import db
from bulksign.doc_templates.fields import template_fields
from bulksign.doc_templates.versions import create_template, get_version, save_parties
from bulksign.people.users import create_api_key
from tests.doc_templates.test_pdf_form_fields import form_pdf
from tests.support.clock import NOW
from tests.support.web import csrf_from

EMPLOYER = [
    {"key": "recipient"},
    {"key": "employer", "source": "fixed", "name": "Anna Boss", "email": "hr@acme.example"},
]


def _pdf_template(users) -> int:
    saved = create_template(
        db.session, name="Agreement", html="", kind="pdf", file=form_pdf(), user=users["staff"], now=NOW
    )
    save_parties(db.session, template=saved.template, parties=EMPLOYER, routing=None, user=users["staff"], now=NOW)
    db.session.commit()
    return saved.template.id


def test_the_placement_page_lists_the_forms_fields_and_saves_what_each_becomes(client, auth, users):
    auth.login()
    template_id = _pdf_template(users)
    page = client.get(f"/templates/{template_id}/place")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and "own fields</h2>" in html
    # Each field once, in the form's order, with the parties by their labels and no choice typed.
    names = ["Employee name", "Position", "Salary", "Contract No", "Office", "Employer signature"]
    for index, name in enumerate(names):
        assert f'name="ff-{index}-name" value="{name}"' in html
    assert '<option value="field:employer"' in html and "Employer fills it in" in html
    assert '<option value="signature:employer"' in html and "Signature: Employer" in html

    form = {
        "csrf_token": csrf_from(page),
        "boxes": "[]",
        **{f"ff-{i}-name": name for i, name in enumerate(names)},
        "ff-1-use": "field:employer",
        "ff-1-type": "text",
        "ff-2-use": "field:recipient",
        "ff-2-type": "number",
        "ff-3-use": "column",
        "ff-3-column": "name",
        "ff-5-use": "signature:employer",
    }
    assert client.post(f"/templates/{template_id}/place", data=form).status_code == 302
    version = get_version(db.session, template_id=template_id)
    assert [(u["name"], u["use"], u["party"]) for u in version.pdf_form_fields] == [
        ("Position", "field", "employer"),
        ("Salary", "field", "recipient"),
        ("Contract No", "column", "recipient"),
        ("Employer signature", "signature", "employer"),
    ]
    assert {f.name: f.role for f in template_fields(version)} == {"position": "employer", "salary": "recipient"}
    assert version.variables == ["Employee name", "Office", "name"]
    # Shown again as saved.
    again = client.get(f"/templates/{template_id}/place").get_data(as_text=True)
    assert '<option value="field:employer" data-colour=' in again
    assert 'value="signature:employer"' in again.split('name="ff-5-use"')[1].split("</select>")[0]
    assert " selected>" in again.split('name="ff-5-use"')[1].split("</select>")[0]

    # A choice for a field the form gives no options is refused in words, nothing saved.
    wrong = client.post(f"/templates/{template_id}/place", data={**form, "ff-1-type": "choice"})
    assert wrong.status_code == 422
    assert "offers no options to choose from" in wrong.get_data(as_text=True)
    assert get_version(db.session, template_id=template_id).version == version.version


def test_the_api_answers_the_forms_fields_and_sets_what_each_becomes(client, users):
    headers = {"Authorization": f"Bearer {create_api_key(db.session, user=users['staff'], name='t', now=NOW).secret}"}
    template_id = _pdf_template(users)
    listed = client.get("/api/v1/templates", headers=headers).json["items"]
    (shown,) = [t for t in listed if t["id"] == template_id]
    assert [f["name"] for f in shown["form_fields"]][:3] == ["Employee name", "Position", "Salary"]
    assert shown["form_fields"][1] | {"x": 0} == {
        "name": "Position",
        "use": "",
        "party": "recipient",
        "type": "text",
        "column": "",
        "field": "",
        "page": 1,
        "x": 0,
        "y": 660.0,
        "width": 250.0,
        "height": 20.0,
    }
    body = {
        "form_fields": [
            {"name": "Position", "use": "field", "party": "employer", "type": "date"},
            {"name": "Employer signature", "use": "signature", "party": "employer"},
        ]
    }
    saved = client.put(f"/api/v1/templates/{template_id}/form-fields", json=body, headers=headers)
    assert saved.status_code == 200, saved.json
    position = next(f for f in saved.json["form_fields"] if f["name"] == "Position")
    assert (position["use"], position["party"], position["type"], position["field"]) == (
        "field",
        "employer",
        "date",
        "position",
    )
    fields = client.get(f"/api/v1/templates/{template_id}/fields", headers=headers).json
    assert [(f["name"], f["role"], f["type"]) for f in fields["fields"]] == [("position", "employer", "date")]

    unknown = client.put(
        f"/api/v1/templates/{template_id}/form-fields",
        json={"form_fields": [{"name": "Nope", "use": "column", "column": "x"}]},
        headers=headers,
    )
    assert unknown.status_code == 422 and unknown.json["error"]["code"] == "form_fields_invalid"
    assert "no form field “Nope”" in unknown.json["error"]["message"]
    odd = client.put(
        f"/api/v1/templates/{template_id}/form-fields",
        json={"form_fields": [{"name": "Position", "use": "paint"}]},
        headers=headers,
    )
    assert odd.status_code == 400
    html = client.post("/api/v1/templates", json={"name": "Letter", "html": "<p>{{ name }}</p>"}, headers=headers).json
    assert html["form_fields"] == []
    not_pdf = client.put(f"/api/v1/templates/{html['id']}/form-fields", json={"form_fields": []}, headers=headers)
    assert not_pdf.status_code == 409
    assert json.loads(not_pdf.data)["error"]["code"] == "not_a_pdf_template"

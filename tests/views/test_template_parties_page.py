"""The template page's parties and signing order: saved from the form as a new version, refused in plain words
with the typed parties kept, labels shown as text, and another team's template out of reach."""

from __future__ import annotations

import json

from bulksign.core.extensions import db
from bulksign.doc_templates.template_parties import party_labels, template_routing
from bulksign.doc_templates.versions import create_template, get_version
from bulksign.models import utcnow
from bulksign.people.teams import create_team
from tests.support.clock import NOW
from tests.support.web import csrf_from

CONTRACT = "<p>{{ name }}</p><p>{{ signature }}</p><p>{{ signature_employer }}</p>"


def _form(token: str, parties: list[dict], routing) -> dict:
    return {
        "csrf_token": token,
        "party-key": [p["key"] for p in parties],
        "party-label-en": [p.get("en", "") for p in parties],
        "party-label-ru": [p.get("ru", "") for p in parties],
        "party-colour": [p.get("colour", "#1f6feb") for p in parties],
        "party-source": [p.get("source", "columns") for p in parties],
        "party-name": [p.get("name", "") for p in parties],
        "party-email": [p.get("email", "") for p in parties],
        "routing": json.dumps(routing),
    }


EMPLOYEE = {"key": "recipient", "en": "Employee", "ru": "Работник", "source": "row"}
EMPLOYER = {"key": "employer", "en": "Employer", "ru": "Работодатель", "colour": "#b35900"}


def test_staff_save_labels_and_an_order_where_both_sign_at_once(app, client, auth, users):
    template = create_template(db.session, name="Contract", html=CONTRACT, user=users["staff"], now=NOW).template
    db.session.commit()
    auth.login()
    page = client.get(f"/templates/{template.id}")
    text = page.get_data(as_text=True)
    assert 'id="parties-form"' in text and '<dd id="roles">Recipient, Employer</dd>' in text
    answer = client.post(
        f"/templates/{template.id}/parties",
        data=_form(csrf_from(page), [EMPLOYEE, EMPLOYER], [["employer", "recipient"]]),
    )
    assert answer.status_code == 302 and answer.headers["Location"].endswith(f"/templates/{template.id}#parties")
    version = get_version(db.session, template_id=template.id)
    assert version.version == 2
    assert party_labels(version, language="ru") == {"recipient": "Работник", "employer": "Работодатель"}
    assert template_routing(version) == [["employer", "recipient"]]
    shown = client.get(f"/templates/{template.id}").get_data(as_text=True)
    assert '<dd id="roles">Employee, Employer</dd>' in shown
    assert (
        '<input type="hidden" name="routing" id="routing" value="[[&#34;employer&#34;, &#34;recipient&#34;]]">' in shown
    )


def test_hostile_parties_are_refused_or_shown_as_text(app, client, auth, users):
    template = create_template(db.session, name="Contract", html=CONTRACT, user=users["staff"], now=NOW).template
    db.session.commit()
    auth.login()
    token = csrf_from(client.get(f"/templates/{template.id}"))
    url = f"/templates/{template.id}/parties"
    for parties, routing, message in [
        ([EMPLOYEE, {**EMPLOYER, "key": "../x"}], None, "Party 2: “../x” cannot be a party&#39;s key"),
        ([EMPLOYEE, EMPLOYER, EMPLOYER], None, "Two parties have the key employer: each needs its own."),
        ([EMPLOYEE, *({"key": f"p{i}"} for i in range(50))], None, "A template may have at most 16 parties."),
        ([EMPLOYEE, EMPLOYER], [["recipient"]], "The signing order leaves out employer: put every party in a step."),
    ]:
        refused = client.post(url, data=_form(token, parties, routing))
        assert refused.status_code == 422
        assert message in refused.get_data(as_text=True)
    assert get_version(db.session, template_id=template.id).version == 1
    script = {
        **EMPLOYER,
        "en": "<script>alert(1)</script>",
        "ru": "",
        "source": "fixed",
        "name": "<img src=x onerror=alert(2)>",
        "email": "hr@acme.example",
    }
    assert client.post(url, data=_form(token, [EMPLOYEE, script], None)).status_code == 302
    for shown in (f"/templates/{template.id}", f"/batches/new?template_id={template.id}"):
        page = client.get(shown).get_data(as_text=True)
        assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page, shown
        assert "<img src=x" not in page and "&lt;img src=x onerror=alert(2)&gt;" in page, shown


def test_another_teams_template_is_out_of_reach(app, client, auth, users):
    legal = create_team(db.session, name="Legal", now=utcnow())
    db.session.flush()
    template = create_template(db.session, name="Theirs", html=CONTRACT, user=None, now=NOW, team_id=legal.id).template
    db.session.commit()
    auth.login()
    token = csrf_from(client.get("/templates/"))
    answer = client.post(f"/templates/{template.id}/parties", data=_form(token, [EMPLOYEE, EMPLOYER], None))
    assert answer.status_code == 404
    assert get_version(db.session, template_id=template.id).version == 1


def test_the_pdf_box_editor_offers_each_partys_signature_by_its_label(app, client, auth, users):
    from bulksign.doc_templates.versions import save_parties
    from tests.support.pdf_files import plain_pdf

    saved = create_template(db.session, name="Act", html="", user=users["staff"], now=NOW, kind="pdf", file=plain_pdf())
    parties = [{"key": "recipient", "labels": {"en": "Employee"}}, {"key": "employer", "labels": {"en": "Employer"}}]
    save_parties(db.session, template=saved.template, parties=parties, routing=None, user=None, now=NOW)
    db.session.commit()
    auth.login()
    page = client.get(f"/templates/{saved.template.id}/place").get_data(as_text=True)
    assert '<option value="signature" label="Signature: Employee"></option>' in page
    assert '<option value="signature_employer" label="Signature: Employer"></option>' in page

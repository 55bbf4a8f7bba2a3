"""The API's template parties: read and set the parties (labels, colours, who by default) and the signing order
with the template check, refused in plain words with the party named, another team's template out of reach, all
described in the OpenAPI document."""

from __future__ import annotations

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.models import User, utcnow
from bulksign.people.teams import create_team
from bulksign.people.users import create_api_key
from tests.support.clock import NOW

CONTRACT = "<p>{{ name }}</p><p>{{ signature }}</p><p>{{ signature_employer }}</p>"


def _key(user: User) -> dict:
    secret = create_api_key(db.session, user=user, name="integration", now=NOW).secret
    db.session.commit()
    return {"Authorization": f"Bearer {secret}"}


def test_parties_and_order_are_read_and_set_with_the_check(app, client, users):
    template = create_template(db.session, name="Contract", html=CONTRACT, user=users["staff"], now=NOW).template
    headers = _key(users["staff"])
    url = f"/api/v1/templates/{template.id}/parties"
    read = client.get(url, headers=headers).get_json()
    assert read["routing"] == [["recipient"], ["employer"]]
    assert [(p["key"], p["source"], p["labels"]) for p in read["parties"]] == [
        ("recipient", "row", {}),
        ("employer", "columns", {}),
    ]
    assert read["check"] == {"errors": [], "warnings": []}
    body = {
        "parties": [
            {"key": "recipient", "labels": {"en": "Employee", "ru": "Работник"}, "colour": "#1f6feb"},
            {
                "key": "employer",
                "labels": {"en": "Employer", "ru": "Работодатель"},
                "source": "fixed",
                "name": "Anna Boss",
                "email": "hr@acme.example",
            },
            {"key": "witness", "labels": {"en": "Witness"}},
        ],
        "routing": [["recipient", "employer"], ["witness"]],
    }
    saved = client.put(url, json=body, headers=headers)
    assert saved.status_code == 200, saved.get_json()
    answer = saved.get_json()
    assert answer["version"] == 2 and answer["routing"] == [["recipient", "employer"], ["witness"]]
    assert answer["parties"][1] == {
        "key": "employer",
        "labels": {"en": "Employer", "ru": "Работодатель"},
        "colour": "#b35900",
        "source": "fixed",
        "name": "Anna Boss",
        "email": "hr@acme.example",
    }
    assert answer["check"]["warnings"] == [
        "Witness has no signature place in the document: they sign on a page added at the end."
    ]
    listed = client.get("/api/v1/templates", headers=headers).get_json()["items"][0]
    assert listed["roles"] == ["recipient", "employer", "witness"]


def test_hostile_parties_are_refused_naming_the_party_and_another_teams_template_is_404(app, client, users):
    template = create_template(db.session, name="Contract", html=CONTRACT, user=users["staff"], now=NOW).template
    headers = _key(users["staff"])
    url = f"/api/v1/templates/{template.id}/parties"
    for parties, routing, party, message in [
        ([{"key": "../x"}], None, "../x", "Party 1: “../x” cannot be a party's key"),
        ([{"key": "{{"}], None, "{{", "Party 1: “{{” cannot be a party's key"),
        ([{"key": "employer"}, {"key": "employer"}], None, "employer", "Two parties have the key employer"),
        ([{"key": "recipient"}], None, "employer", "The document has a signature place for employer"),
        ([{"key": "employer", "labels": {"en": "x" * 81}}], None, "employer", "The label of employer must be one line"),
        ([{"key": "employer"}], [["employer"]], "recipient", "The signing order leaves out recipient"),
    ]:
        refused = client.put(url, json={"parties": parties, "routing": routing}, headers=headers)
        assert refused.status_code == 422, refused.get_json()
        error = refused.get_json()["error"]
        assert error["code"] == "parties_invalid" and error["details"]["party"] == party
        assert error["message"].startswith(message), error["message"]
    too_many = client.put(url, json={"parties": [{"key": f"p{i}"} for i in range(50)]}, headers=headers)
    assert too_many.status_code == 400
    legal = create_team(db.session, name="Legal", now=utcnow())
    db.session.flush()
    theirs = create_template(db.session, name="Theirs", html=CONTRACT, user=None, now=NOW, team_id=legal.id).template
    db.session.commit()
    assert client.get(f"/api/v1/templates/{theirs.id}/parties", headers=headers).status_code == 404
    assert (
        client.put(
            f"/api/v1/templates/{theirs.id}/parties", json={"parties": [{"key": "employer"}]}, headers=headers
        ).status_code
        == 404
    )


def test_the_openapi_document_describes_the_parties(app, client):
    spec = client.get("/api/v1/openapi.json").get_json()
    assert set(spec["paths"]["/templates/{template_id}/parties"]) == {"get", "put"}
    party = spec["components"]["schemas"]["PartyIn"]["properties"]
    assert set(party) == {"key", "labels", "colour", "source", "name", "email"}

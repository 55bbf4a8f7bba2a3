"""What signers filled in, for integrators: the request object and the batch's request list carry
``fields`` and ``attachments`` with links the team's keys follow (and no other team's), the ``request.signed``
webhook carries the values, and the OpenAPI description says all of it."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import pytest
from sqlalchemy import select

from bulksign.batches.states import transition
from bulksign.core.extensions import db
from bulksign.integrations import webhooks_out
from bulksign.jobs.webhooks import dispatch
from bulksign.models import SigningRequest, User
from bulksign.people.teams import add_member, create_team
from bulksign.people.users import create_api_key, create_user
from tests.integrations.test_webhooks_out import Receiver
from tests.support.batchdata import batch_in_states
from tests.support.batches import request_ids
from tests.support.clock import NOW
from tests.support.field_values import GIVEN, batch_with_fields, fill, scan_png

APP_URL = "http://127.0.0.1:5000"


def _key(user: User) -> dict:
    secret = create_api_key(db.session, user=user, name="integration", now=NOW).secret
    db.session.commit()
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def filled(app, users):
    """A batch of two whose first request's signer filled every field and attached a scan."""
    batch_id = batch_with_fields(user=users["staff"], now=NOW)
    ids = request_ids(batch_id)
    scan = scan_png()
    fill(ids[0], now=NOW, scan=scan)
    return {"batch_id": batch_id, "ids": ids, "scan": scan, "key": _key(users["staff"])}


def test_the_request_carries_its_fields_and_attachment_links_the_teams_key_follows(client, filled):
    first, second = filled["ids"]
    body = client.get(f"/api/v1/requests/{first}", headers=filled["key"]).json
    # As stored, for machines: the ISO date, the plain number, true/false; an attachment's value is its file name.
    assert body["fields"] == {**GIVEN, "id_scan": "passport scan.png"}
    (attached,) = body["attachments"]
    url = f"{APP_URL}/api/v1/requests/{first}/attachments/id_scan"
    assert attached == {
        "field": "id_scan",
        "filename": "passport scan.png",
        "content_type": "image/png",
        "size": len(filled["scan"]),
        "sha256": hashlib.sha256(filled["scan"]).hexdigest(),
        "role": "recipient",
        "entered_at": "2026-11-02T09:00:00Z",
        "url": url,
    }
    got = client.get(url.removeprefix(APP_URL), headers=filled["key"])
    assert got.status_code == 200 and got.data == filled["scan"]
    assert got.headers["Content-Type"] == "image/png"
    assert got.headers["Content-Disposition"] == 'attachment; filename="passport scan.png"'
    assert got.headers["X-Content-Type-Options"] == "nosniff"
    # A request nobody filled yet: empty, not absent.
    other = client.get(f"/api/v1/requests/{second}", headers=filled["key"]).json
    assert (other["fields"], other["attachments"]) == ({}, [])


def test_the_batchs_request_list_carries_the_fields_too(client, filled):
    page = client.get(f"/api/v1/batches/{filled['batch_id']}/requests", headers=filled["key"]).json
    by_id = {item["id"]: item for item in page["items"]}
    first, second = filled["ids"]
    assert by_id[first]["fields"]["start"] == "2027-01-31"
    assert by_id[first]["attachments"][0]["url"].endswith(f"/requests/{first}/attachments/id_scan")
    assert by_id[second]["fields"] == {}


def test_another_teams_key_gets_404_for_the_attachment(app, client, filled):
    elsewhere = create_team(db.session, name="Elsewhere", now=NOW)
    outsider = create_user(db.session, email="out@example.com", password="outsider-pass", role="manager", now=NOW)
    add_member(db.session, team=elsewhere, user=outsider, by=None, now=NOW)
    db.session.commit()
    first = filled["ids"][0]
    headers = _key(outsider)
    for path in (f"/api/v1/requests/{first}/attachments/id_scan", f"/api/v1/requests/{first}"):
        response = client.get(path, headers=headers)
        assert response.status_code == 404 and response.json["error"]["code"] == "not_found", path
    assert client.get(f"/api/v1/requests/{first}/attachments/id_scan").status_code == 401


def test_the_description_says_fields_attachments_and_the_webhook_values(client):
    spec = client.get("/api/v1/openapi.json").json
    download = spec["paths"]["/requests/{request_id}/attachments/{name}"]["get"]
    assert set(download["responses"]["200"]["content"]) == {"application/pdf", "image/jpeg", "image/png"}
    assert {"404", "410"} <= set(download["responses"])
    schemas = spec["components"]["schemas"]
    request = schemas["RequestOut"]["properties"]
    assert "a date `2027-01-31`" in request["fields"]["description"]
    assert "url" in schemas["AttachmentOut"]["properties"] and "sha256" in schemas["AttachmentOut"]["properties"]
    assert "fields" in schemas["SigningRequestOut"]["properties"]
    assert "On `request.signed`" in schemas["RequestEvent"]["properties"]["fields"]["description"]


@pytest.fixture
def receiver(app):
    app.config["WEBHOOK_ALLOW_LOCAL"] = True
    with Receiver() as r:
        yield r


def test_the_request_signed_webhook_carries_the_values(app, users, receiver, run_jobs):
    batch = batch_in_states(db.session, statuses=["opened", "opened"], now=NOW)
    webhooks_out.create_endpoint(
        db.session,
        url=receiver.url,
        events=["request.signed", "request.opened"],
        user_id=users["admin"].id,
        now=NOW,
    )
    db.session.commit()
    dispatch(now=NOW)  # the cursor: what happens from now on is sent
    ids = db.session.scalars(
        select(SigningRequest.id).where(SigningRequest.batch_id == batch.id).order_by(SigningRequest.id)
    ).all()
    fill(ids[0], now=NOW, values={"iban": "DE89370400440532013000", "rules": "true", "hours": None})
    transition(db.session, ids[0], frm="opened", to="signed", now=NOW + timedelta(seconds=1))
    db.session.commit()
    assert dispatch(now=NOW + timedelta(seconds=2)) == 1
    run_jobs("webhooks")
    ((_, body),) = receiver.received
    payload = json.loads(body)
    assert payload["event"] == "request.signed"
    assert payload["data"]["fields"] == {"hours": None, "iban": "DE89370400440532013000", "rules": "true"}

"""``POST /api/v1/privacy/erasures``: an admin's key erases a person from every batch and hears what was kept and
why; any other key finds no such thing."""

from __future__ import annotations

from datetime import timedelta

from bulksign.batches import retention
from bulksign.core.extensions import db
from bulksign.people.users import create_api_key
from tests.support.batchdata import batch_in_states
from tests.support.clock import NOW
from tests.support.signing_requests import fresh


def _headers(user) -> dict:
    secret = create_api_key(db.session, user=user, name="privacy", now=NOW).secret
    db.session.commit()
    return {"Authorization": f"Bearer {secret}"}


def test_an_admin_erases_a_person_and_hears_what_was_kept(app, client, users):
    admin, staff = _headers(users["admin"]), _headers(users["staff"])
    ended = batch_in_states(db.session, statuses=["declined"], now=NOW - timedelta(days=3), name="Ended")
    signed = batch_in_states(db.session, statuses=["signed"], now=NOW, name="Signed")
    held = batch_in_states(db.session, statuses=["expired"], now=NOW, name="Held")
    retention.place_hold(db.session, batch_id=held.id, reason="Case 9", by=None, now=NOW)
    db.session.commit()

    body = {"email": "PERSON000001@example.org"}
    assert client.post("/api/v1/privacy/erasures", json=body, headers=staff).status_code == 404
    assert client.post("/api/v1/privacy/erasures", json={"email": 7}, headers=admin).status_code == 400
    answer = client.post("/api/v1/privacy/erasures", json=body, headers=admin)
    assert answer.status_code == 200
    assert answer.json["erased"] == [{"request_id": 1, "batch_id": ended.id, "status": "declined"}]
    kept = {(k["batch_id"], k["reason"], k["kept_until"], k["hold_reason"]) for k in answer.json["kept"]}
    assert kept == {(signed.id, "signed_kept", None, None), (held.id, "legal_hold", None, "Case 9")}
    assert fresh(1).purged_at is not None and fresh(2).email == "person000001@example.org"
    again = client.post("/api/v1/privacy/erasures", json=body, headers=admin).json
    assert again["erased"] == [] and len(again["kept"]) == 2

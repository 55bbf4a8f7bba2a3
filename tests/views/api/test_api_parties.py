"""The API's request object says who signs it: its parties, a single-signer request's recipient followed through
the real render, invitation and signature."""

from __future__ import annotations

from datetime import timedelta

from bulksign.core.extensions import db
from bulksign.models import Batch, User
from bulksign.people.users import create_api_key
from bulksign.signing import parties
from bulksign.signing.recipient_actions import sign
from bulksign.work.pipeline import enqueue_renders
from tests.support.batches import make_batch, request_ids
from tests.support.clock import NOW


def test_a_single_signer_requests_parties_are_its_recipient_in_the_requests_own_state(app, client, run_jobs, smtp):
    batch_id = make_batch(now=NOW, recipients=[("ivan@example.com", "Ivan Petrov")])
    parties.add_recipients(db.session, batch_id=batch_id, now=NOW)
    db.session.commit()
    (request_id,) = request_ids(batch_id)
    enqueue_renders([request_id])
    run_jobs("pdf", "mail")
    owner = db.session.get(User, db.session.get(Batch, batch_id).created_by_id)
    secret = create_api_key(db.session, user=owner, name="integration", now=NOW).secret
    db.session.commit()
    headers = {"Authorization": f"Bearer {secret}"}

    invited = client.get(f"/api/v1/requests/{request_id}", headers=headers).json["parties"]
    assert [(p["role"], p["step"], p["email"], p["name"], p["status"]) for p in invited] == [
        ("recipient", 0, "ivan@example.com", "Ivan Petrov", "invited")
    ]
    assert invited[0]["invited_at"] and invited[0]["signed_at"] is None

    later = NOW + timedelta(hours=2)
    done = sign(
        db.session,
        request_id=request_id,
        now=later,
        signer_name="Ivan Petrov",
        signature_png=None,
        consent=True,
        ip="127.0.0.1",
        user_agent="test",
    )
    assert done.status == "signed"
    body = client.get(f"/api/v1/requests/{request_id}", headers=headers).json
    (party,) = body["parties"]
    assert body["status"] == "signed" and party["status"] == "signed"
    assert party["signed_at"].startswith(later.isoformat()[:19])

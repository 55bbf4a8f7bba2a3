"""Later bounces from the provider's webhook, and staff stopping or retrying a batch."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.models import Batch, OutgoingMail
from bulksign.people.users import create_api_key
from bulksign.signing.links import find_by_token
from bulksign.work.pipeline import enqueue_renders
from bulksign.work.queues import get_queue
from tests.support.batches import make_batch, request_ids, requests_of
from tests.support.clock import NOW
from tests.support.workers import one_per_job

SECRET = "bounce-secret-123"


@pytest.fixture
def sent_batch(app, users, smtp, run_jobs):
    app.config["BOUNCE_WEBHOOK_SECRET"] = SECRET
    batch = make_batch(user=users["staff"], now=NOW, recipients=[("a@example.com", "A"), ("b@example.com", "B")])
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")
    assert {r.status for r in requests_of(batch)} == {"sent"}
    return batch


def _post(client, body, *, secret=SECRET, **kwargs):
    headers = {"X-Bounce-Secret": secret} if secret else {}
    return client.post(
        "/webhooks/bounces",
        data=json.dumps(body),
        headers=headers,
        content_type=kwargs.pop("content_type", "application/json"),
        **kwargs,
    )


def test_a_generic_bounce_by_message_id_marks_the_request_bounced_with_the_reason(client, sent_batch):
    a, b = requests_of(sent_batch)
    message_id = db.session.scalar(select(OutgoingMail.message_id).where(OutgoingMail.request_id == a.id))
    response = _post(client, {"message_id": message_id, "reason": "mailbox full for good"})
    assert response.status_code == 200 and response.json["bounced"] == 1
    a, b = requests_of(sent_batch)
    assert a.status == "bounced" and "mailbox full for good" in a.error_message and b.status == "sent"


def test_a_postmark_bounce_marks_the_address_bounced(client, sent_batch):
    body = {
        "RecordType": "Bounce",
        "Type": "HardBounce",
        "TypeCode": 1,
        "MessageID": "883953f4-6105-42a2",
        "Email": "B@example.com",
        "Description": "The server was unable to deliver your message",
        "Details": "smtp;550 5.1.1 The email account that you tried to reach does not exist.",
    }
    response = client.post(f"/webhooks/bounces?token={SECRET}", json=body)
    assert response.status_code == 200
    a, b = requests_of(sent_batch)
    assert b.status == "bounced" and "550 5.1.1" in b.error_message and a.status == "sent"


def test_a_bounce_matches_the_address_whatever_its_case(app, users, smtp, run_jobs, client):
    app.config["BOUNCE_WEBHOOK_SECRET"] = SECRET
    batch = make_batch(
        user=users["staff"], now=NOW, recipients=[("Mixed.Case@Example.com", "M"), ("b@example.com", "B")]
    )
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")
    response = _post(client, {"email": "mixed.case@example.com", "reason": "550 no such user"})
    assert response.status_code == 200 and response.json["bounced"] == 1
    assert [r.status for r in requests_of(batch)] == ["bounced", "sent"]


def test_the_bounce_lookup_by_address_uses_an_index(app):
    from sqlalchemy import func, text

    from bulksign.models import SigningRequest

    query = select(SigningRequest.id).where(func.lower(SigningRequest.email) == "x@example.com")
    db.session.execute(text("SET LOCAL enable_seqscan = off"))
    plan = "\n".join(
        db.session.scalars(text("EXPLAIN " + str(query.compile(db.engine, compile_kwargs={"literal_binds": True}))))
    )
    db.session.rollback()
    assert "ix_signing_requests_email_lower" in plan, plan


def test_an_ses_bounce_through_sns_marks_the_request_bounced(client, sent_batch):
    a, _ = requests_of(sent_batch)
    message_id = db.session.scalar(select(OutgoingMail.message_id).where(OutgoingMail.request_id == a.id))
    ses = {
        "notificationType": "Bounce",
        "bounce": {
            "bounceType": "Permanent",
            "bounceSubType": "General",
            "bouncedRecipients": [
                {"emailAddress": "a@example.com", "status": "5.1.1", "diagnosticCode": "smtp; 550 5.1.1 user unknown"}
            ],
        },
        "mail": {"messageId": "0100-ses", "headers": [{"name": "Message-ID", "value": message_id}]},
    }
    sns = {
        "Type": "Notification",
        "MessageId": "sns-1",
        "TopicArn": "arn:aws:sns:eu-west-1:1:bounces",
        "Message": json.dumps(ses),
    }
    response = _post(client, sns, content_type="text/plain; charset=UTF-8")
    assert response.status_code == 200 and response.json["bounced"] == 1
    assert requests_of(sent_batch)[0].status == "bounced"
    assert db.session.get(Batch, sent_batch).status == "partially_failed"


def test_the_bounce_webhook_refuses_a_wrong_secret_and_hides_when_unset(client, sent_batch, app):
    body = {"email": "a@example.com", "reason": "x"}
    assert _post(client, body, secret="wrong").status_code == 401
    assert _post(client, body, secret=None).status_code == 401
    assert {r.status for r in requests_of(sent_batch)} == {"sent"}
    app.config["BOUNCE_WEBHOOK_SECRET"] = ""
    assert _post(client, body, secret="").status_code == 404


def test_a_bounce_without_a_recipient_is_a_clear_400(client, sent_batch):
    response = _post(client, {"reason": "x"})
    assert response.status_code == 400 and "email" in response.json["error"]
    assert _post(client, ["not", "an", "object"]).status_code == 400


def _api(client, user):
    key = create_api_key(db.session, user=user, name="t", now=NOW).secret
    db.session.commit()
    return {"Authorization": f"Bearer {key}"}


def test_cancelling_a_batch_stops_unsent_work_and_kills_sent_links(app, users, smtp, run_jobs, client):
    headers = _api(client, users["staff"])
    one_per_job(app)
    batch = make_batch(user=users["staff"], now=NOW, recipients=4)
    ids = request_ids(batch)
    enqueue_renders(ids)
    run_jobs("pdf", max_jobs=2)
    run_jobs("mail", max_jobs=1)
    sent = next(r for r in requests_of(batch) if r.status == "sent")
    token = __import__("re").search(r"/sign/([A-Za-z0-9_-]+)", smtp.of_kind("invitation")[0].text()).group(1)
    assert find_by_token(db.session, token).id == sent.id

    response = client.post(f"/api/v1/batches/{batch}/cancel", headers=headers)
    assert response.status_code == 202 and response.json["cancelled"] == 4
    run_jobs("pdf", "mail")
    assert {r.status for r in requests_of(batch)} == {"cancelled"}
    assert len(smtp.of_kind("invitation")) == 1
    # The link no longer signs: it opens the page that says the sender cancelled it.
    assert find_by_token(db.session, token).status == "cancelled"
    assert "This request was withdrawn" in client.get(f"/sign/{token}").get_data(as_text=True)
    assert db.session.get(Batch, batch).status == "cancelled"
    assert client.post(f"/api/v1/batches/{batch}/cancel", headers=headers).json["cancelled"] == 0


def test_retry_failed_retries_only_the_failed_and_only_once(app, users, smtp, run_jobs, client):
    headers = _api(client, users["staff"])
    batch = make_batch(user=users["staff"], now=NOW, recipients=[("ok@example.com", "Ok"), ("x@example.com", "X")])
    smtp.handler.reject_recipients["x@example.com"] = "554 5.7.1 Relay denied"
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")
    ok, x = requests_of(batch)
    assert ok.status == "sent" and x.status == "bounced"
    # Bounced is not failed: nothing to retry yet.
    assert client.post(f"/api/v1/batches/{batch}/retry-failed", headers=headers).json["retried"] == 0

    from bulksign.batches.states import transition

    transition(db.session, x.id, frm="bounced", to="generated", now=NOW)
    transition(db.session, x.id, frm="generated", to="failed", now=NOW, error_message="boom")
    db.session.commit()
    smtp.reset()
    first = client.post(f"/api/v1/batches/{batch}/retry-failed", headers=headers)
    second = client.post(f"/api/v1/batches/{batch}/retry-failed", headers=headers)
    assert first.status_code == 202 and first.json["retried"] == 1 and second.json["retried"] == 0
    assert len(get_queue("pdf")) == 1
    run_jobs("pdf", "mail")
    ok, x = requests_of(batch)
    assert ok.status == "sent" and x.status == "sent" and x.error_message is None
    assert [m.rcpt_tos for m in smtp.of_kind("invitation")] == [["x@example.com"]]
    assert db.session.get(Batch, batch).status == "awaiting_signatures"


def test_staff_cannot_act_on_someone_elses_batch(app, users, client):
    batch = make_batch(user=users["admin"], now=NOW, recipients=1)
    response = client.post(f"/api/v1/batches/{batch}/cancel", headers=_api(client, users["staff"]))
    assert response.status_code == 403
    assert client.post("/api/v1/batches/999/retry-failed", headers=_api(client, users["staff"])).status_code == 404

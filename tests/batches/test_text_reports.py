"""The SMS provider's webhook on real workers: delivered and failed texts (a failed one's link goes by mail where
the address works), STOP replies barring the number, and forged or odd posts changing nothing."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from flask import g
from sqlalchemy import select

from bulksign.batches.reminders import queue_due_reminders
from bulksign.core.extensions import db
from bulksign.models import Event, OutgoingMail, PhoneSuppression, SigningRequest, utcnow
from bulksign.people.users import create_api_key
from bulksign.work.pipeline import enqueue_sends
from tests.support.texting import create_batch

SECRET = "sms-secret-45"
PHONE_ONLY = "email,name,phone\n,Ivan,+79991234567\n"


@pytest.fixture
def reports(app):
    app.config["SMS_WEBHOOK_SECRET"] = SECRET
    app.config["BOUNCE_WEBHOOK_SECRET"] = SECRET


def _post(client, body, *, secret=SECRET, form=False):
    g.pop("_login_user", None)  # the test's app context is shared with the client: the workers ended its session
    headers = {"X-Sms-Secret": secret} if secret else {}
    if form:
        return client.post("/webhooks/sms", data=body, headers=headers)
    return client.post("/webhooks/sms", data=json.dumps(body), headers=headers, content_type="application/json")


def _texts() -> list[tuple[str, str, str | None]]:
    db.session.expire_all()
    return list(
        db.session.execute(
            select(OutgoingMail.kind, OutgoingMail.status, OutgoingMail.error)
            .where(OutgoingMail.channel == "text")
            .order_by(OutgoingMail.id)
        ).tuples()
    )


def test_a_delivery_report_marks_the_text_delivered_and_staff_see_it(
    app, users, client, auth, gateway, reports, run_jobs
):
    auth.login()
    batch_id = create_batch(client, users, PHONE_ONLY, channel="text_without_address")
    run_jobs("pdf", "mail")
    [texted] = gateway.received
    # The provider is asked to report to the webhook, with the secret.
    assert texted.body["status_url"].endswith(f"/webhooks/sms?token={SECRET}")
    assert _post(client, {"id": texted.id, "status": "delivered"}).json == {
        "matched": 1,
        "mailed": 0,
        "opted_out": False,
    }
    assert _texts() == [("invitation", "delivered", None)]
    g.pop("_login_user", None)
    assert "By text · delivered" in client.get(f"/batches/{batch_id}").get_data(as_text=True)
    # Told twice: nothing more to change.
    assert _post(client, {"id": texted.id, "status": "delivered"}).json["matched"] == 0


def test_a_failed_text_with_a_working_address_falls_back_to_mail(app, users, client, smtp, gateway, reports, run_jobs):
    batch_id = create_batch(
        client, users, "email,name,phone\nanna@example.com,Anna,+79991234567\n", channel="text_both"
    )
    run_jobs("pdf", "mail")
    [invitation] = smtp.of_kind("invitation")
    # A soft bounce: the address stays usable, the link goes by text meanwhile.
    bounce = {"message_id": invitation.message_id, "reason": "mailbox full", "permanent": False}
    assert client.post("/webhooks/bounces", json=bounce, headers={"X-Bounce-Secret": SECRET}).json["texted"] == 1
    run_jobs("mail")
    [texted] = gateway.received
    answer = _post(client, {"MessageSid": texted.id, "MessageStatus": "undelivered", "ErrorCode": "30003"}, form=True)
    assert answer.json == {"matched": 1, "mailed": 1, "opted_out": False}
    run_jobs("mail")
    again = [m for m in smtp.received if m.rcpt_tos == ["anna@example.com"]]
    assert len(again) == 2 and again[1].message_id != invitation.message_id
    assert _texts() == [("link_again", "failed", "The text was not delivered: undelivered (30003)")]
    [event] = db.session.scalars(select(Event).where(Event.type == "mail.fallback")).all()
    assert event.details == {"reason": "The text was not delivered: undelivered (30003)"}
    assert db.session.scalar(select(SigningRequest.status).where(SigningRequest.batch_id == batch_id)) == "sent"


def test_a_stop_reply_bars_the_number_from_later_texts(app, users, client, gateway, reports, run_jobs):
    create_batch(client, users, PHONE_ONLY, channel="text_without_address", reminder_days="1")
    run_jobs("pdf", "mail")
    # Twilio's inbound message, the number as the provider writes it.
    answer = _post(client, {"From": "+79991234567", "Body": "Stop", "OptOutType": "STOP"}, form=True)
    assert answer.json == {"matched": 1, "mailed": 0, "opted_out": True}
    assert db.session.scalar(select(PhoneSuppression.source)) == "opt_out"
    queued: list[int] = []
    queue_due_reminders(db.session, now=utcnow() + timedelta(days=1, hours=1), on_page=queued.extend)
    db.session.commit()
    enqueue_sends(queued)
    run_jobs("mail")
    assert len(gateway.received) == 1  # the invitation only
    assert _texts()[1] == (
        "reminder",
        "cancelled",
        "Not sent: +79991234567 replied STOP to our text messages; no text goes to it.",
    )
    # A reply that is no opt-out changes nothing.
    assert _post(client, {"from": "+79991234568", "text": "thanks"}).json == {"matched": 0}


@pytest.mark.parametrize(
    ("secret", "status"),
    [("wrong", 403), ("", 403), (SECRET[:-1], 403), (SECRET + "x", 403)],
)
def test_a_forged_report_is_refused_and_changes_nothing(app, users, client, gateway, reports, run_jobs, secret, status):
    create_batch(client, users, PHONE_ONLY, channel="text_without_address")
    run_jobs("pdf", "mail")
    [texted] = gateway.received
    assert _post(client, {"id": texted.id, "status": "failed"}, secret=secret).status_code == status
    assert _post(client, {"from": "+79991234567", "text": "STOP"}, secret=secret).status_code == status
    assert _texts() == [("invitation", "sent", None)]
    assert db.session.scalar(select(PhoneSuppression.id)) is None


def test_without_a_secret_the_webhook_does_not_exist(app, client):
    assert _post(client, {"id": "x", "status": "delivered"}, secret="anything").status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "answer"),
    [
        ({"id": "SM-unknown", "status": "delivered"}, 200, {"matched": 0, "mailed": 0, "opted_out": False}),
        ({"id": "SM1", "status": "queued"}, 200, {"matched": 0}),
        ({"id": "SM1", "status": "exploded"}, 400, None),
        ({"status": "delivered"}, 400, None),
        ({"id": "x" * 101, "status": "delivered"}, 400, None),
        ([1, 2], 400, None),
        ({"from": "not a number", "text": "STOP"}, 200, {"matched": 0, "mailed": 0, "opted_out": False}),
    ],
)
def test_odd_reports_get_a_clear_answer(app, client, reports, body, status, answer):
    response = _post(client, body)
    assert response.status_code == status
    if answer is not None:
        assert response.json == answer
    else:
        assert "error" in response.json


def test_the_api_and_the_csv_export_carry_the_channel_and_the_text_state(
    app, users, client, gateway, reports, run_jobs
):
    key = create_api_key(db.session, user=users["staff"], name="reader", now=utcnow()).secret
    batch_id = create_batch(
        client,
        users,
        "email,name,phone\n,Ivan,+79991234567\nanna@example.com,Anna,\n",
        channel="text_without_address",
    )
    run_jobs("pdf", "mail")
    [texted] = gateway.received
    _post(client, {"id": texted.id, "status": "delivered"})
    headers = {"Authorization": f"Bearer {key}"}
    items = client.get(f"/api/v1/batches/{batch_id}/requests", headers=headers).json["items"]
    assert [(i["email"], i["phone"], i["channel"], i["text_state"], i["text_reason"]) for i in items] == [
        ("", "+79991234567", "text", "delivered", "no_address"),
        ("anna@example.com", None, "mail", None, None),
    ]
    single = client.get(f"/api/v1/requests/{items[0]['id']}", headers=headers).json
    assert (single["channel"], single["text_state"]) == ("text", "delivered")
    exported = client.get(f"/api/v1/batches/{batch_id}/export.csv", headers=headers).get_data(as_text=True)
    header, ivan, anna = [line[-3:] for line in csv.reader(io.StringIO(exported.lstrip("\ufeff")))]
    assert (header, ivan, anna) == (
        ["channel", "text_state", "text_reason"],
        ["text", "delivered", "no_address"],
        ["mail", "", ""],
    )


def test_a_purge_takes_the_texted_phone_with_the_rest_of_the_row(app, users, client, gateway, run_jobs):
    from bulksign.batches.retention.purge import purge_requests
    from bulksign.documents.storage import get_storage

    batch_id = create_batch(client, users, PHONE_ONLY, channel="text_without_address")
    run_jobs("pdf", "mail")
    ids = list(db.session.scalars(select(SigningRequest.id).where(SigningRequest.batch_id == batch_id)))
    purge_requests(db.session, storage=get_storage(), request_ids=ids, now=utcnow(), reason="erasure")
    db.session.commit()
    assert db.session.scalar(select(OutgoingMail.to_phone).where(OutgoingMail.channel == "text")) is None
    assert db.session.scalar(select(SigningRequest.phone).where(SigningRequest.id == ids[0])) is None

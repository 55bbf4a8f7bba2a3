"""Invitations and reminders by text on real workers, with a loopback stand-in for the SMS gateway: rows with a
phone and no address are invited by text and sign from the texted link; the text fits two segments."""

from __future__ import annotations

import re
from datetime import timedelta

from flask import g
from sqlalchemy import select

from bulksign.batches.reminders import queue_due_reminders
from bulksign.core.extensions import db
from bulksign.mail.delivery import Sender
from bulksign.mail.smtp_link import SmtpLink
from bulksign.mail.text_segments import segments
from bulksign.models import OutgoingMail, SigningRequest, utcnow
from bulksign.models.mail import Channel
from bulksign.people.users import create_api_key
from bulksign.work.pipeline import enqueue_sends
from tests.support.texting import LINK, create_batch, sign_from
from tests.support.web import csrf_from


def test_phone_only_rows_are_invited_by_text_and_sign_from_the_texted_link(app, users, client, smtp, gateway, run_jobs):
    batch_id = create_batch(
        client,
        users,
        "email,name,phone\n,Иван Петров,8 999 123 45 67\n,Пётр Сидоров,+7 (999) 765-43-21\nanna@example.com,Анна,\n",
        channel="text_without_address",
        language="ru",
    )
    run_jobs("pdf", "mail")
    texted = {t.to: t for t in gateway.received}
    assert sorted(texted) == ["+79991234567", "+79997654321"]
    assert [m.rcpt_tos for m in smtp.of_kind("invitation")] == [["anna@example.com"]]
    ivan = texted["+79991234567"].text
    # The first name only, the sender, the title, the short link; in Russian; within two segments.
    link = LINK.search(ivan).group(1)
    assert ivan == f"Иван, Staff User просит подписать «Трудовой договор»: {link}"
    assert "Петров" not in ivan and segments(ivan).count <= 2
    requests = db.session.scalars(
        select(SigningRequest).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
    ).all()
    assert [r.status for r in requests] == ["sent", "sent", "sent"]
    for phone, name in (("+79991234567", "Иван Петров"), ("+79997654321", "Пётр Сидоров")):
        sign_from(client, LINK.search(texted[phone].text).group(1), name)
    run_jobs("pdf", "mail")
    statuses = db.session.scalars(
        select(SigningRequest.status).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
    ).all()
    assert statuses == ["signed", "signed", "sent"]
    # Nothing was mailed to the rows without an address (no confirmation to an empty one).
    assert all(m.rcpt_tos == ["anna@example.com"] for m in smtp.received)
    texts = db.session.scalars(
        select(OutgoingMail).where(OutgoingMail.channel == "text").order_by(OutgoingMail.id)
    ).all()
    assert [(t.status, t.text_reason, t.provider_ref) for t in texts] == [
        ("sent", "no_address", texted["+79991234567"].id),
        ("sent", "no_address", texted["+79997654321"].id),
    ]


def test_reminders_of_phone_only_rows_go_by_text(app, users, client, smtp, gateway, run_jobs):
    batch_id = create_batch(
        client, users, "email,name,phone\n,Ivan,+79991234567\n", channel="text_both", reminder_days="1"
    )
    run_jobs("pdf", "mail")
    assert len(gateway.received) == 1
    queued: list[int] = []
    queue_due_reminders(db.session, now=utcnow() + timedelta(days=1, hours=1), on_page=queued.extend)
    db.session.commit()
    enqueue_sends(queued)
    run_jobs("mail")
    first, reminder = gateway.received
    assert reminder.to == "+79991234567" and reminder.text.startswith("Reminder: Staff User asks you to sign")
    assert LINK.search(reminder.text).group(2) == LINK.search(first.text).group(2)
    assert smtp.received == []
    assert db.session.scalar(select(SigningRequest.status).where(SigningRequest.batch_id == batch_id)) == "sent"


def test_the_cap_stops_texts_and_the_batch_says_so(app, users, client, auth, smtp, gateway, run_jobs):
    auth.login()
    key = create_api_key(db.session, user=users["staff"], name="reader", now=utcnow()).secret
    rows = "".join(f",Person {i},+7999123456{i}\n" for i in range(3))
    batch_id = create_batch(client, users, "email,name,phone\n" + rows, channel="text_without_address", text_cap="2")
    run_jobs("pdf", "mail")
    assert len(gateway.received) == 2
    requests = db.session.execute(
        select(SigningRequest.status, SigningRequest.error_message)
        .where(SigningRequest.batch_id == batch_id)
        .order_by(SigningRequest.id)
    ).all()
    reason = "Not sent: the batch's limit of 2 text messages is reached; raise it to send more."
    assert requests == [("sent", None), ("sent", None), ("failed", reason)]
    g.pop("_login_user", None)
    page = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    assert "2 of at most 2 text messages sent" in page
    shown = client.get(f"/api/v1/batches/{batch_id}", headers={"Authorization": f"Bearer {key}"}).json
    assert (shown["channel"], shown["text_cap"], shown["texts_sent"]) == ("text_without_address", 2, 2)
    assert shown["text_cap_reached_at"] is not None
    assert "the batch reached its limit of 2 text messages" in page


def test_texts_have_their_own_global_throttle(app):
    app.config["SMS_RATE_PER_MINUTE"] = 7
    sender = Sender(app=app, link=SmtpLink())
    texts, mails = sender.throttles[Channel.TEXT], sender.throttles[Channel.MAIL]
    assert (texts.key, texts.rate) == ("bulksign:throttle:sms", 7)
    assert mails.key != texts.key and mails.rate == app.config["MAIL_RATE_PER_MINUTE"]


def test_invitations_go_through_twilio_when_it_is_configured(app, users, client, gateway, run_jobs):
    app.config.update(
        TWILIO_ACCOUNT_SID="AC45", TWILIO_AUTH_TOKEN="tok", TWILIO_FROM="+15005550006", TWILIO_API_URL=gateway.base
    )
    create_batch(client, users, "email,name,phone\n,Ivan,+79991234567\n", channel="text_without_address")
    run_jobs("pdf", "mail")
    [sent] = gateway.received
    assert sent.path == "/2010-04-01/Accounts/AC45/Messages.json" and sent.to == "+79991234567"
    assert db.session.scalar(select(OutgoingMail.provider_ref).where(OutgoingMail.channel == "text")) == sent.id


def test_the_short_link_leads_only_to_the_signing_page_of_its_token(client):
    assert client.get("/s/" + "A" * 129).status_code == 404
    unknown = client.get("/s/not-a-token")
    assert (unknown.status_code, unknown.headers["Location"]) == (302, "/sign/not-a-token")
    assert client.get(unknown.headers["Location"]).status_code == 404


def test_a_texted_link_is_no_identity_check_the_one_time_code_still_is(app, users, client, gateway, run_jobs):
    create_batch(
        client, users, "email,name,phone\n,Ivan,+79991234567\n", channel="text_without_address", one_time_code="true"
    )
    run_jobs("pdf", "mail")
    [texted] = gateway.received
    token = LINK.search(texted.text).group(2)
    g.pop("_login_user", None)
    page = client.get(f"/sign/{token}")
    assert b"Send me a code" in page.data and b"card document" not in page.data
    assert client.get(f"/sign/{token}/document").status_code == 403
    assert client.post(f"/sign/{token}/code", data={"csrf_token": csrf_from(page)}).status_code == 303
    run_jobs("mail")
    code = gateway.received[1]
    assert code.to == "+79991234567" and re.search(r"\b\d{6}\b", code.text)


def test_a_text_provider_out_of_reach_holds_back_the_texts_not_the_mail(app, users, client, smtp, run_jobs):
    from tests.support.services import free_port

    app.config.update(SMS_HTTP_URL=f"http://127.0.0.1:{free_port()}/messages", SMS_TIMEOUT_SECONDS=1)
    rows = "".join(f",Person {i},+7999123456{i}\n" for i in range(3)) + "anna@example.com,Anna,\n"
    batch_id = create_batch(client, users, "email,name,phone\n" + rows, channel="text_without_address")
    run_jobs("pdf")
    run_jobs("mail", max_jobs=1)
    assert [m.rcpt_tos for m in smtp.of_kind("invitation")] == [["anna@example.com"]]
    texts = db.session.execute(
        select(OutgoingMail.status, OutgoingMail.attempts)
        .where(OutgoingMail.channel == "text")
        .order_by(OutgoingMail.id)
    ).all()
    # The first text found the provider silent (an attempt); the others were not tried, so not counted.
    assert texts == [("queued", 1), ("queued", 0), ("queued", 0)]
    statuses = db.session.scalars(
        select(SigningRequest.status).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
    ).all()
    assert statuses == ["generated", "generated", "generated", "sent"]

"""A bounced invitation falls back to a text, on real workers with a stand-in SMS gateway: a refusal at sending
texts the same link within the same job, a provider's report texts it with the next; staff see it on the row."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from flask import g
from sqlalchemy import select

from bulksign.batches.reminders import queue_due_reminders
from bulksign.core.extensions import db
from bulksign.models import Event, OutgoingMail, SigningRequest, utcnow
from bulksign.work.pipeline import enqueue_sends
from tests.support.texting import LINK, create_batch

SECRET = "bounce-secret-45"
FILE = "email,name,phone\ngone@example.com,Ivan Petrov,+79991234567\nanna@example.com,Anna,\n"


def _statuses(batch_id: int) -> list[str]:
    return list(
        db.session.scalars(
            select(SigningRequest.status).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
        )
    )


def test_an_invitation_refused_at_sending_goes_by_text_within_the_same_job(
    app, users, client, auth, smtp, gateway, run_jobs
):
    auth.login()
    smtp.handler.reject_recipients["gone@example.com"] = "550 5.1.1 No such user"
    batch_id = create_batch(client, users, FILE, channel="text_on_bounce")
    run_jobs("pdf")
    assert run_jobs("mail", max_jobs=1) == 1
    [texted] = gateway.received
    assert texted.to == "+79991234567"
    assert texted.text.startswith('Ivan, Staff User asks you to sign "Трудовой договор": ')
    assert _statuses(batch_id) == ["sent", "sent"]
    [event] = db.session.scalars(select(Event).where(Event.type == "text.fallback")).all()
    assert event.details == {
        "kind": "invitation",
        "email": "gone@example.com",
        "reason": "550 5.1.1 No such user",
    }
    # The link texted is the request's live link.
    token = LINK.search(texted.text).group(2)
    g.pop("_login_user", None)  # the test's app context is shared with the client: the workers ended its session
    assert client.get(f"/s/{token}").status_code == 302
    page = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    assert "Mail bounced → sent by text · sent" in page


def test_a_reported_bounce_sends_the_same_link_by_text_and_the_request_stays_out(
    app, users, client, smtp, gateway, run_jobs
):
    app.config["BOUNCE_WEBHOOK_SECRET"] = SECRET
    batch_id = create_batch(client, users, FILE, channel="text_both")
    run_jobs("pdf", "mail")
    mailed = {m.rcpt_tos[0]: m for m in smtp.of_kind("invitation")}
    mailed_token = re.search(r"/sign/([A-Za-z0-9_-]+)", mailed["gone@example.com"].text()).group(1)
    answer = client.post(
        "/webhooks/bounces",
        data=json.dumps({"message_id": mailed["gone@example.com"].message_id, "reason": "mailbox unavailable"}),
        headers={"X-Bounce-Secret": SECRET},
        content_type="application/json",
    )
    assert answer.json == {"received": 1, "bounced": 0, "bounced_too": 0, "complained": 0, "texted": 1}
    assert run_jobs("mail", max_jobs=1) == 1
    [texted] = gateway.received
    assert LINK.search(texted.text).group(2) == mailed_token
    assert _statuses(batch_id) == ["sent", "sent"]
    mails = db.session.execute(
        select(OutgoingMail.channel, OutgoingMail.kind, OutgoingMail.status)
        .where(OutgoingMail.to_email.in_(["gone@example.com", ""]))
        .order_by(OutgoingMail.id)
    ).all()
    assert mails == [("mail", "invitation", "bounced"), ("text", "link_again", "sent")]


def test_a_batch_that_only_mails_still_bounces(app, users, client, smtp, gateway, run_jobs):
    smtp.handler.reject_recipients["gone@example.com"] = "550 5.1.1 No such user"
    batch_id = create_batch(client, users, FILE.replace(",+79991234567", ","))
    run_jobs("pdf", "mail")
    assert gateway.received == [] and _statuses(batch_id) == ["bounced", "sent"]


def test_a_reminder_refused_at_sending_goes_by_text_in_the_same_job(app, users, client, smtp, gateway, run_jobs):
    batch_id = create_batch(client, users, FILE, channel="text_on_bounce", reminder_days="1")
    run_jobs("pdf", "mail")
    assert gateway.received == []
    # The mailbox is gone by the time the reminder is due.
    smtp.handler.reject_recipients["gone@example.com"] = "550 5.1.1 No such user"
    queued: list[int] = []
    queue_due_reminders(db.session, now=utcnow() + timedelta(days=1, hours=1), on_page=queued.extend)
    db.session.commit()
    enqueue_sends(queued)
    assert run_jobs("mail", max_jobs=1) == 1
    [texted] = gateway.received
    assert texted.to == "+79991234567" and texted.text.startswith("Reminder: Staff User asks you to sign")
    assert _statuses(batch_id) == ["sent", "sent"]
    kinds = db.session.execute(
        select(OutgoingMail.channel, OutgoingMail.status)
        .where(OutgoingMail.kind == "reminder")
        .order_by(OutgoingMail.id)
    ).all()
    assert sorted(kinds) == [("mail", "bounced"), ("mail", "sent"), ("text", "sent")]

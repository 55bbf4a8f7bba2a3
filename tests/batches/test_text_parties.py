"""A template's other parties are reached by text like the row's recipient: their phones read into E.164 (a bad
one is a row error), invited and reminded by text when they have no address, and texted when their mail is refused;
on real workers with a stand-in SMS gateway."""

from __future__ import annotations

import io
import json
from datetime import timedelta

from sqlalchemy import select

from bulksign.batches.reminders import queue_due_reminders
from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.models import Event, OutgoingMail, Party, SigningRequest, utcnow
from bulksign.people.users import create_api_key
from bulksign.work.pipeline import enqueue_sends
from tests.signing.test_routing import CONTRACT, _mails_to, _sign, _token
from tests.support.clock import NOW
from tests.support.texting import LINK, create_batch, sign_from

HEADER = "email,name,employer_email,employer_name,employer_phone\n"


def _request(batch_id: int) -> SigningRequest:
    db.session.expire_all()
    return db.session.scalars(select(SigningRequest).where(SigningRequest.batch_id == batch_id)).one()


def _employer(batch_id: int) -> Party:
    db.session.expire_all()
    return db.session.scalars(select(Party).where(Party.batch_id == batch_id, Party.role == "employer")).one()


def test_an_employer_with_only_a_phone_is_invited_by_text_and_signs_from_the_texted_link(
    app, users, client, smtp, gateway, run_jobs
):
    batch_id = create_batch(
        client,
        users,
        HEADER + "eva@example.com,Eva Employee,,Анна Босс,8 999 123 45 67\n",
        html=CONTRACT,
        channel="text_without_address",
        language="ru",
    )
    employer = _employer(batch_id)
    assert (employer.email, employer.phone) == ("", "+79991234567")
    employer_id = employer.id
    run_jobs("pdf", "mail")
    [invitation] = _mails_to(smtp, "eva@example.com")
    assert _sign(client, _token(invitation), "Eva Employee").status_code == 303
    run_jobs("pdf", "mail")
    [texted] = gateway.received
    link = LINK.search(texted.text).group(1)
    assert texted.to == "+79991234567"
    assert texted.text == f"Анна, Staff User просит подписать «Трудовой договор»: {link}"
    # Nothing went by mail to the employer, who has no address.
    assert all(m.rcpt_tos == ["eva@example.com"] for m in smtp.received)
    assert _employer(batch_id).status == "invited"
    sign_from(client, link, "Анна Босс")
    run_jobs("pdf", "mail")
    assert (_employer(batch_id).status, _request(batch_id).status) == ("signed", "signed")
    text = db.session.scalars(select(OutgoingMail).where(OutgoingMail.channel == "text")).one()
    assert (text.kind, text.status, text.text_reason, text.party_id) == (
        "party_invitation",
        "sent",
        "no_address",
        employer_id,
    )
    # No mail with the sealed copy to an empty address.
    assert db.session.scalar(select(OutgoingMail.id).where(OutgoingMail.status == "failed")) is None


def test_a_phone_only_employers_reminder_goes_by_text(app, users, client, smtp, gateway, run_jobs):
    fixed = json.dumps({"employer": {"name": "Anna Boss", "phone": "+44 7911 123456"}})
    batch_id = create_batch(
        client,
        users,
        "email,name\neva@example.com,Eva Employee\n",
        html=CONTRACT,
        channel="text_both",
        parties=fixed,
        routing='[["employer"], ["recipient"]]',
        reminder_days="1",
    )
    assert (_employer(batch_id).email, _employer(batch_id).phone) == ("", "+447911123456")
    run_jobs("pdf", "mail")
    [invited] = gateway.received
    queued: list[int] = []
    queue_due_reminders(db.session, now=utcnow() + timedelta(days=1, hours=1), on_page=queued.extend)
    db.session.commit()
    enqueue_sends(queued)
    run_jobs("mail")
    first, reminder = gateway.received
    assert reminder.to == "+447911123456"
    assert reminder.text.startswith('Reminder: Staff User asks you to sign "Трудовой договор": ')
    assert LINK.search(reminder.text).group(2) == LINK.search(first.text).group(2)
    assert smtp.received == []


def test_an_employers_refused_invitation_goes_to_its_phone_within_the_same_job(
    app, users, client, smtp, gateway, run_jobs
):
    smtp.handler.reject_recipients["gone@acme.example"] = "550 5.1.1 No such user"
    batch_id = create_batch(
        client,
        users,
        HEADER + "eva@example.com,Eva Employee,gone@acme.example,Anna Boss,+44 7911 123456\n",
        html=CONTRACT,
        channel="text_on_bounce",
        routing='[["employer"], ["recipient"]]',
    )
    run_jobs("pdf")
    assert run_jobs("mail", max_jobs=1) == 1
    [texted] = gateway.received
    assert texted.to == "+447911123456" and texted.text.startswith("Anna, Staff User asks you to sign")
    [event] = db.session.scalars(select(Event).where(Event.type == "text.fallback")).all()
    assert event.details == {
        "kind": "party_invitation",
        "email": "gone@acme.example",
        "reason": "550 5.1.1 No such user",
    }
    assert _request(batch_id).status == "sent"
    sign_from(client, LINK.search(texted.text).group(1), "Anna Boss")
    assert _employer(batch_id).status == "signed"


def _validate(client, headers, template_id, file: str, **fields):
    return client.post(
        "/api/v1/batches/validate",
        content_type="multipart/form-data",
        headers=headers,
        data={"template_id": template_id, "file": (io.BytesIO(file.encode()), "p.csv"), **fields},
    )


def test_party_phones_are_checked_by_row_and_column_and_stand_in_for_an_address_only_when_the_channel_allows(
    app, users, client
):
    template = create_template(db.session, name="Contract", html=CONTRACT, user=users["staff"], now=NOW)
    key = create_api_key(db.session, user=users["staff"], name="test", now=NOW).secret
    db.session.commit()
    headers, template_id = {"Authorization": f"Bearer {key}"}, template.template.id
    rows = (
        HEADER + "a@example.com,A,,Boss,+7 999 123 45 6\n"  # too short
        'b@example.com,B,,Boss,=HYPERLINK("x")\n'  # letters
        "c@example.com,C,,Boss,\n"  # neither
        "d@example.com,D,,Boss,+79991234567\n"
        "e@example.com,E,boss@example.com,Boss,+79991234567\n"
    )
    checked = _validate(client, headers, template_id, rows, channel="text_without_address", language="ru")
    assert checked.status_code == 200, checked.json
    assert [(e["row"], e["column"]) for e in checked.json["errors"]] == [
        (2, "employer_phone"),
        (3, "employer_phone"),
        (4, "employer_email"),
    ]
    assert checked.json["errors"][2]["message"] == (
        "The address of the party who signs as employer is empty, and so is their phone: give one of them."
    )
    assert checked.json["valid_rows"] == 2
    mail_only = _validate(client, headers, template_id, HEADER + "d@example.com,D,,Boss,+79991234567\n")
    assert [(e["row"], e["column"], e["message"]) for e in mail_only.json["errors"]] == [
        (2, "employer_email", "The address of the party who signs as employer is empty.")
    ]
    for parties, said in (
        ({"employer": {"name": "Boss", "phone": "12"}}, "The phone of the party who signs as employer: "),
        ({"employer": {"name": "Boss", "phone": ["+79991234567"]}}, "must be text"),
        ({"employer": {"name": "Boss"}}, "Give the address of the party who signs as employer."),
        ({"employer": {"name": "Boss", "email": 7}}, "must be text"),
    ):
        refused = _validate(
            client,
            headers,
            template_id,
            "email,name\na@example.com,A\n",
            channel="text_both",
            parties=json.dumps(parties),
        )
        assert refused.status_code == 422, refused.json
        assert said in refused.json["error"]["message"]
    # A batch that only mails takes no phone in place of the fixed party's address.
    refused = _validate(
        client,
        headers,
        template_id,
        "email,name\na@example.com,A\n",
        parties=json.dumps({"employer": {"name": "Boss", "phone": "+79991234567"}}),
    )
    assert refused.json["error"]["message"] == "Give the address of the party who signs as employer."


def test_an_employers_reported_bounce_sends_its_link_by_text_and_the_request_stays_out(
    app, users, client, smtp, gateway, run_jobs
):
    app.config["BOUNCE_WEBHOOK_SECRET"] = "bounce-secret-45b"
    batch_id = create_batch(
        client,
        users,
        HEADER + "eva@example.com,Eva Employee,gone@acme.example,Anna Boss,+44 7911 123456\n",
        html=CONTRACT,
        channel="text_both",
        routing='[["employer"], ["recipient"]]',
    )
    run_jobs("pdf", "mail")
    [mailed] = _mails_to(smtp, "gone@acme.example")
    answer = client.post(
        "/webhooks/bounces",
        data=json.dumps({"message_id": mailed.message_id, "reason": "mailbox unavailable"}),
        headers={"X-Bounce-Secret": "bounce-secret-45b"},
        content_type="application/json",
    )
    assert answer.json == {"received": 1, "bounced": 0, "bounced_too": 0, "complained": 0, "texted": 1}
    assert run_jobs("mail", max_jobs=1) == 1
    [texted] = gateway.received
    assert LINK.search(texted.text).group(2) == _token(mailed)
    assert _request(batch_id).status == "sent"
    [event] = db.session.scalars(select(Event.details).where(Event.type == "text.fallback")).all()
    assert event == {"kind": "party_invitation", "email": "gone@acme.example", "reason": "mailbox unavailable"}
    sign_from(client, LINK.search(texted.text).group(1), "Anna Boss")
    assert _employer(batch_id).status == "signed"

"""The suppression list: hard bounces and spam complaints stop all later mail to the address until an admin lifts it."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import select

from bulksign.batches.reminders import queue_due_reminders
from bulksign.core.extensions import db
from bulksign.models import OutgoingMail, Suppression, User
from bulksign.people.users import create_api_key
from bulksign.work.pipeline import enqueue_renders
from tests.support.batches import make_batch, request_ids, requests_of
from tests.support.clock import NOW
from tests.support.web import csrf_from

SECRET = "bounce-secret-123"


def _webhook(client, body):
    return client.post(
        "/webhooks/bounces", data=json.dumps(body), headers={"X-Bounce-Secret": SECRET}, content_type="application/json"
    )


def _send(batch, run_jobs):
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")


@pytest.fixture
def webhook_on(app):
    app.config["BOUNCE_WEBHOOK_SECRET"] = SECRET


def _in_force() -> dict[str, Suppression]:
    db.session.expire_all()
    return {s.email: s for s in db.session.scalars(select(Suppression).where(Suppression.lifted_at.is_(None)))}


def test_a_hard_bounce_keeps_the_address_out_of_the_next_batch_until_an_admin_lifts_it(
    app, users, smtp, run_jobs, client, auth, webhook_on
):
    staff_id = users["staff"].id
    first = make_batch(
        user=users["staff"], now=NOW, recipients=[("gone@example.com", "Gone"), ("ok@example.com", "Ok")]
    )
    _send(first, run_jobs)
    assert (
        _webhook(
            client,
            {
                "RecordType": "Bounce",
                "Type": "HardBounce",
                "Email": "gone@example.com",
                "Details": "smtp;550 5.1.1 no such user",
            },
        ).json["bounced"]
        == 1
    )
    entry = _in_force()["gone@example.com"]
    assert entry.source == "bounce" and "5.1.1" in entry.reason and entry.batch_id == first

    smtp.reset()
    staff = db.session.get(User, staff_id)  # the webhook's request ended the test's session
    second = make_batch(user=staff, now=NOW, recipients=[("GONE@example.com", "Gone"), ("new@example.com", "New")])
    _send(second, run_jobs)
    gone, new = requests_of(second)
    assert [m.rcpt_tos for m in smtp.of_kind("invitation")] == [["new@example.com"]]
    assert gone.status == "failed" and "suppression list" in gone.error_message and "hard bounce" in gone.error_message
    assert new.status == "sent"

    # The admin sees the entry, finds it by search, and lifts it; a retry then mails the address.
    auth.login_admin()
    page = client.get("/admin/suppressions/?q=GONE")
    assert page.status_code == 200 and b"gone@example.com" in page.data and b"ok@example.com" not in page.data
    lifted = client.post(
        "/admin/suppressions/lift", data={"email": "gone@example.com", "csrf_token": csrf_from(page), "confirmed": "1"}
    )
    assert lifted.status_code == 303
    assert "gone@example.com" not in _in_force()
    key = create_api_key(db.session, user=db.session.get(User, staff_id), name="t", now=NOW).secret
    db.session.commit()
    retried = client.post(f"/api/v1/batches/{second}/retry-failed", headers={"Authorization": f"Bearer {key}"})
    assert retried.json["retried"] == 1
    smtp.reset()
    run_jobs("pdf", "mail")
    assert [m.rcpt_tos for m in smtp.of_kind("invitation")] == [["GONE@example.com"]]
    assert requests_of(second)[0].status == "sent"


def test_a_soft_bounce_bounces_the_request_but_does_not_suppress_the_address(
    app, users, smtp, run_jobs, client, webhook_on
):
    batch = make_batch(user=users["staff"], now=NOW, recipients=[("full@example.com", "Full")])
    _send(batch, run_jobs)
    ses = {
        "notificationType": "Bounce",
        "bounce": {
            "bounceType": "Transient",
            "bounceSubType": "MailboxFull",
            "bouncedRecipients": [{"emailAddress": "full@example.com"}],
        },
    }
    assert _webhook(client, {"Type": "Notification", "Message": json.dumps(ses)}).json["bounced"] == 1
    assert requests_of(batch)[0].status == "bounced"
    assert _in_force() == {}


def test_an_smtp_refusal_of_a_dead_address_suppresses_it_and_a_policy_refusal_does_not(app, users, smtp, run_jobs):
    smtp.handler.reject_recipients.update(
        {"dead@example.com": "550 5.1.1 No such user", "policy@example.com": "554 5.7.1 Relay denied"}
    )
    batch = make_batch(
        user=users["staff"], now=NOW, recipients=[("dead@example.com", "D"), ("policy@example.com", "P")]
    )
    _send(batch, run_jobs)
    assert {r.status for r in requests_of(batch)} == {"bounced"}
    assert list(_in_force()) == ["dead@example.com"] and _in_force()["dead@example.com"].source == "smtp"


@pytest.mark.parametrize(
    "body",
    [
        {"RecordType": "SpamComplaint", "Email": "Anna@example.com", "Type": "SpamComplaint"},
        {
            "Type": "Notification",
            "Message": json.dumps(
                {
                    "notificationType": "Complaint",
                    "complaint": {
                        "complaintFeedbackType": "abuse",
                        "complainedRecipients": [{"emailAddress": "anna@example.com"}],
                    },
                    "mail": {"headers": [{"name": "Message-ID", "value": "<not-ours@elsewhere>"}]},
                }
            ),
        },
        {"email": "anna@example.com", "type": "complaint", "reason": "marked as spam in the web mail"},
    ],
    ids=["postmark", "ses", "generic"],
)
def test_a_spam_complaint_flags_the_request_stops_its_reminders_and_suppresses_the_address(
    app, users, smtp, run_jobs, client, webhook_on, body
):
    batch = make_batch(
        user=users["staff"], now=NOW, recipients=[("anna@example.com", "Anna"), ("bob@example.com", "Bob")]
    )
    _send(batch, run_jobs)
    if "Message" in body:  # SES names the Message-ID of the mail complained about; use ours
        message = json.loads(body["Message"])
        anna_mail = db.session.scalar(
            select(OutgoingMail.message_id).where(OutgoingMail.to_email == "anna@example.com")
        )
        message["mail"]["headers"][0]["value"] = anna_mail
        body = {**body, "Message": json.dumps(message)}
    response = _webhook(client, body)
    assert response.status_code == 200 and response.json["complained"] == 1 and response.json["bounced"] == 0
    anna, bob = requests_of(batch)
    # The recipient may still sign: the status stays, the request is flagged.
    assert anna.status == "sent" and anna.complained_at is not None and bob.complained_at is None
    assert _in_force()["anna@example.com"].source == "complaint"

    queue_due_reminders(db.session, now=max(anna.sent_at, bob.sent_at) + timedelta(days=2))
    db.session.commit()
    reminded = db.session.scalars(select(OutgoingMail.to_email).where(OutgoingMail.kind == "reminder")).all()
    assert reminded == ["bob@example.com"]


def test_the_suppression_api_lists_searches_and_lifts_for_admins_only(app, users, client, smtp, run_jobs, webhook_on):
    ids = {role: user.id for role, user in users.items()}
    batch = make_batch(user=users["staff"], now=NOW, recipients=[("x1@example.com", "X"), ("x2@example.com", "Y")])
    _send(batch, run_jobs)
    for address in ("x1@example.com", "x2@example.com"):
        _webhook(client, {"email": address, "reason": "550 5.1.1 unknown user"})
    admin_user, staff_user = (db.session.get(User, ids[role]) for role in ("admin", "staff"))
    admin = {"Authorization": "Bearer " + create_api_key(db.session, user=admin_user, name="a", now=NOW).secret}
    staff = {"Authorization": "Bearer " + create_api_key(db.session, user=staff_user, name="s", now=NOW).secret}
    db.session.commit()

    assert client.get("/api/v1/suppressions", headers=staff).status_code == 404
    assert client.delete("/api/v1/suppressions/x1@example.com", headers=staff).status_code == 404
    listed = client.get("/api/v1/suppressions", headers=admin).json
    assert [i["email"] for i in listed["items"]] == ["x2@example.com", "x1@example.com"]
    assert listed["items"][0]["source"] == "bounce" and listed["next_cursor"] is None
    assert [i["email"] for i in client.get("/api/v1/suppressions?q=X1", headers=admin).json["items"]] == [
        "x1@example.com"
    ]
    assert client.get("/api/v1/suppressions?cursor=abc", headers=admin).status_code == 422  # not a cursor it issued

    assert client.delete("/api/v1/suppressions/X1@example.com", headers=admin).status_code == 200
    assert client.delete("/api/v1/suppressions/x1@example.com", headers=admin).status_code == 404
    assert [i["email"] for i in client.get("/api/v1/suppressions", headers=admin).json["items"]] == ["x2@example.com"]


# --- a later upload ------------------------------------------------------------------------------


def _listed(*emails: str) -> None:
    from bulksign.recipients.suppressions import suppress

    for email in emails:
        suppress(db.session, email=email, source="bounce", reason="smtp;550 5.1.1 no such user", now=NOW)
    db.session.commit()


def test_a_later_upload_warns_about_listed_addresses_and_the_batch_does_not_mail_them_until_lifted(
    app, users, client, auth, smtp, run_jobs
):
    import io
    import re

    from bulksign.doc_templates.versions import create_template
    from bulksign.models import Batch, BatchStatusCount, Event

    staff_id, admin_id = users["staff"].id, users["admin"].id  # requests below end the test's session
    _listed("gone@example.com")
    template = create_template(db.session, name="Contract", html="<p>{{ name }}</p>", user=users["staff"], now=NOW)
    db.session.commit()
    body = b"email,name\nok@example.com,Ok\nGONE@example.com,Gone\n"
    auth.login()
    page = client.get("/batches/new")
    preview = client.post(
        "/batches/new/validate",
        headers={"HX-Request": "true"},
        content_type="multipart/form-data",
        data={
            "csrf_token": csrf_from(page),
            "template_id": template.template.id,
            "file": (io.BytesIO(body), "people.csv"),
        },
    ).get_data(as_text=True)
    assert "1 address is on the suppression list: it will not be mailed unless an admin lifts its entry" in preview
    assert re.search(
        r"<td>3</td><td>GONE@example.com</td>\s*<td>its mail server reported it does not exist "
        r"\(hard bounce\) \(smtp;550 5.1.1 no such user\)",
        preview,
    )
    assert "Create batch with 2 valid rows" in preview  # kept in the batch: staff see it failed, with the reason

    # The API's check says the same; the warning does not count as an error.
    key = create_api_key(db.session, user=db.session.get(User, staff_id), name="t", now=NOW).secret
    db.session.commit()
    api = {"Authorization": f"Bearer {key}"}
    checked = client.post(
        "/api/v1/batches/validate",
        headers=api,
        content_type="multipart/form-data",
        data={"template_id": template.template.id, "file": (io.BytesIO(body), "p.csv")},
    ).json
    assert (checked["suppressed_count"], checked["invalid_rows"]) == (1, 0)
    assert checked["suppressed"][0]["email"] == "GONE@example.com" and checked["suppressed"][0]["source"] == "bounce"

    upload_id = re.search(r'name="upload_id" value="([0-9a-f]+)"', preview).group(1)
    created = client.post(
        "/batches/new", data={"csrf_token": csrf_from(page), "upload_id": upload_id, "form_token": "f1"}
    )
    assert created.status_code == 303
    batch_id = db.session.scalar(select(Batch.id))
    ok, gone = requests_of(batch_id)
    assert (ok.status, gone.status) == ("pending", "failed")
    assert "suppression list" in gone.error_message and "An admin can lift the entry" in gone.error_message
    counts = dict(
        db.session.execute(
            select(BatchStatusCount.status, BatchStatusCount.count).where(
                BatchStatusCount.batch_id == batch_id, BatchStatusCount.count > 0
            )
        ).all()
    )
    assert counts == {"pending": 1, "failed": 1}
    assert db.session.scalar(select(Event.details).where(Event.request_id == gone.id)) == {"suppressed": "bounce"}
    assert "1 address is on the suppression list and was not mailed" in client.get(f"/batches/{batch_id}").get_data(
        as_text=True
    )
    run_jobs("pdf", "mail")
    # No document, no mail for the listed one (the owner's notices aside).
    assert [m.rcpt_tos for m in smtp.received if m.rcpt_tos != ["staff@example.com"]] == [["ok@example.com"]]

    # Lifted by an admin, then retried: now it is mailed.
    from bulksign.recipients.suppressions import lift

    lift(db.session, email="gone@example.com", user=db.session.get(User, admin_id), now=NOW)
    db.session.commit()
    assert client.post(f"/api/v1/batches/{batch_id}/retry-failed", headers=api).json["retried"] == 1
    smtp.reset()
    run_jobs("pdf", "mail")
    assert [m.rcpt_tos for m in smtp.received if m.rcpt_tos != ["staff@example.com"]] == [["GONE@example.com"]]


def test_a_batch_of_listed_addresses_only_closes_at_once(app, users):
    from bulksign.batches.batch_settings import BatchSettings
    from bulksign.batches.creation import create_batch
    from bulksign.doc_templates.versions import create_template
    from bulksign.recipients.validation import Recipient

    _listed("a@example.com", "b@example.com")
    saved = create_template(db.session, name="Contract", html="<p>{{ name }}</p>", user=users["staff"], now=NOW)
    db.session.commit()
    rows = [Recipient(2, "a@example.com", "A", None, {}), Recipient(3, "B@example.com", "B", None, {})]
    result = create_batch(
        db.session,
        user=users["staff"],
        template_version=saved.version,
        rows=rows,
        settings=BatchSettings(name="All listed"),
        now=NOW,
    )
    assert (result.suppressed, result.enqueued) == (2, 0)
    assert result.batch.status == "closed"  # nobody left who could sign

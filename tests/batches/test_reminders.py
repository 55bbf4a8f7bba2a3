"""Automatic and manual reminders, with the time passed in: due on the batch's days, each exactly once."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy.orm import Session

from bulksign.batches.manual_reminders import send_manual_reminders
from bulksign.batches.progress import BatchActionError
from bulksign.batches.reminders import queue_due_reminders
from bulksign.batches.states import transition
from bulksign.core.extensions import db
from bulksign.core.tokens import hash_token
from bulksign.jobs.periodic import send_due_reminders
from bulksign.models import Event, utcnow
from bulksign.models.status import Status
from bulksign.work.pipeline import enqueue_renders
from tests.support.batches import make_batch, request_ids, requests_of
from tests.support.clock import NOW
from tests.support.races import race
from tests.support.waiting import mails, request, sent_batch
from tests.support.web import csrf_from

DAY = timedelta(days=1)


def tick(now):
    result = queue_due_reminders(db.session, now=now)
    db.session.commit()
    return result.queued


def test_reminders_go_out_on_day_2_and_day_4_only(app, users):
    _, (rid,) = sent_batch(user=users["staff"], sent_at=NOW)
    assert tick(NOW + 1 * DAY) == 0
    assert tick(NOW + 2 * DAY) == 1
    assert tick(NOW + 3 * DAY) == 0
    assert tick(NOW + 4 * DAY) == 1
    assert tick(NOW + 5 * DAY) == 0
    first, second = mails("reminder")
    assert first.message_id.endswith("-1@bulksign.local>") and second.message_id.endswith("-2@bulksign.local>")
    assert first.to_email == "person0@example.com" and first.request_id == rid
    assert request(rid).reminder_count == 2 and request(rid).last_reminder_at == NOW + 4 * DAY


def test_a_maximum_of_one_stops_after_the_first(app, users):
    sent_batch(user=users["staff"], sent_at=NOW, max_reminders=1)
    assert [tick(NOW + d * DAY) for d in (2, 4, 6)] == [1, 0, 0]


def test_a_maximum_of_zero_sends_none(app, users):
    sent_batch(user=users["staff"], sent_at=NOW, max_reminders=0)
    assert tick(NOW + 5 * DAY) == 0


def test_signing_between_reminders_stops_them(app, users):
    _, (rid,) = sent_batch(user=users["staff"], sent_at=NOW)
    assert tick(NOW + 2 * DAY) == 1
    transition(db.session, rid, frm=Status.SENT, to=Status.OPENED, now=NOW + 3 * DAY)
    transition(db.session, rid, frm=Status.OPENED, to=Status.SIGNED, now=NOW + 3 * DAY)
    db.session.commit()
    assert tick(NOW + 4 * DAY) == 0


@pytest.mark.parametrize("status", ["declined", "bounced", "cancelled", "expired"])
def test_requests_no_longer_waiting_are_never_reminded(app, users, status):
    _, (rid,) = sent_batch(user=users["staff"], sent_at=NOW)
    path = {
        "declined": ["opened", "declined"],
        "bounced": ["bounced"],
        "cancelled": ["cancelled"],
        "expired": ["expired"],
    }[status]
    frm = "sent"
    for to in path:
        transition(db.session, rid, frm=frm, to=to, now=NOW + DAY)
        frm = to
    db.session.commit()
    assert tick(NOW + 2 * DAY) == 0


def test_opened_but_unsigned_requests_are_reminded(app, users):
    _, (rid,) = sent_batch(user=users["staff"], sent_at=NOW)
    transition(db.session, rid, frm=Status.SENT, to=Status.OPENED, now=NOW + DAY)
    db.session.commit()
    assert tick(NOW + 2 * DAY) == 1


def test_a_personal_reminder_subject_is_rendered_for_each_recipient(app, users):
    from bulksign.models import Batch, TemplateVersion

    batch_id, _ = sent_batch(user=users["staff"], sent_at=NOW, recipients=2)
    version = db.session.get(TemplateVersion, db.session.get(Batch, batch_id).template_version_id)
    version.reminder_subject = "{{ name }}, please sign by {{ deadline }}"
    db.session.commit()
    assert tick(NOW + 2 * DAY) == 2
    assert [m.subject for m in mails("reminder")] == [
        "Person 0, please sign by 9 November 2026, 09:00 (UTC)",
        "Person 1, please sign by 9 November 2026, 09:00 (UTC)",
    ]


def test_a_missed_schedule_catches_up_with_one_reminder_not_two(app, users):
    sent_batch(user=users["staff"], sent_at=NOW)
    assert tick(NOW + 5 * DAY) == 1
    assert tick(NOW + 5 * DAY + timedelta(minutes=1)) == 0
    (mail,) = mails("reminder")
    assert mail.message_id.endswith("-2@bulksign.local>")


def test_two_ticks_at_the_same_instant_send_one_reminder(app, users):
    sent_batch(user=users["staff"], sent_at=NOW, recipients=3)
    assert send_due_reminders(now=NOW + 2 * DAY).startswith("3 reminders queued")
    assert send_due_reminders(now=NOW + 2 * DAY).startswith("0 reminders queued")
    assert len(mails("reminder")) == 3


def test_two_schedulers_racing_in_two_sessions_send_each_reminder_once(app, users):
    batch_id, _ = sent_batch(user=users["staff"], sent_at=NOW, recipients=200)

    def scheduler(_n: int) -> int:
        with Session(db.engine) as session:
            queued = queue_due_reminders(
                session, now=NOW + 2 * DAY, page_size=20, on_page=lambda _ids: session.commit()
            ).queued
            session.commit()
            return queued

    results = race(app, scheduler, callers=2)
    assert sum(results.values()) == 200
    assert len(mails("reminder")) == 200
    assert {r.reminder_count for r in requests_of(batch_id)} == {1}


def test_quiet_hours_hold_due_reminders_until_the_morning(app, users):
    # Berlin is UTC+1 in November: 20:00–08:00 local is 19:00–07:00 UTC.
    sent_at = NOW.replace(hour=21)
    sent_batch(user=users["staff"], sent_at=sent_at, quiet_hours_start=20, quiet_hours_end=8, timezone="Europe/Berlin")
    night = sent_at + 2 * DAY  # 22:00 in Berlin
    result = queue_due_reminders(db.session, now=night)
    assert (result.queued, result.waiting_quiet_hours) == (0, 1)
    assert tick(night.replace(hour=6, minute=59) + DAY) == 0  # 07:59 in Berlin
    assert tick(night.replace(hour=7, minute=0) + DAY) == 1  # 08:00 in Berlin


def test_the_reminder_is_its_own_text_with_the_same_link_through_the_mail_queue(app, users, smtp, run_jobs):
    batch = make_batch(user=users["staff"], now=NOW, recipients=1)
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")
    (invitation,) = smtp.of_kind("invitation")
    (req,) = requests_of(batch)
    rid, nonce, token_hash = req.id, req.token_nonce, req.token_hash
    assert send_due_reminders(now=req.sent_at + 2 * DAY).startswith("1 reminders queued")
    run_jobs("mail")
    (reminder,) = smtp.of_kind("reminder")
    assert reminder.subject != invitation.subject and "Reminder" in reminder.subject
    assert reminder.text() != invitation.text() and "reminder" in reminder.text()
    link = re.search(r"/sign/([A-Za-z0-9_-]+)", reminder.text()).group(1)
    assert link in invitation.text() and hash_token(link) == token_hash
    assert reminder.message_id == f"<reminder-{rid}-{nonce[:12]}-1@bulksign.local>"
    (row,) = mails("reminder")
    assert row.status == "sent" and row.sent_at is not None


def test_a_reminder_queued_before_the_recipient_signed_is_not_sent(app, users, smtp, run_jobs):
    _, (rid,) = sent_batch(user=users["staff"], sent_at=NOW)
    send_due_reminders(now=NOW + 2 * DAY)
    transition(db.session, rid, frm=Status.SENT, to=Status.OPENED, now=NOW + 2 * DAY)
    transition(db.session, rid, frm=Status.OPENED, to=Status.SIGNED, now=NOW + 2 * DAY)
    db.session.commit()
    run_jobs("mail")
    (reminder,) = mails("reminder")
    # Nothing went wrong: the reminder lost its purpose, and says so.
    assert smtp.of_kind("reminder") == [] and reminder.status == "cancelled" and "no longer waits" in reminder.error
    assert request(rid).status == "signed"


# Manual reminders


def test_a_manual_reminder_right_after_an_automatic_one_is_skipped_with_a_reason(app, users):
    batch_id, ids = sent_batch(user=users["staff"], sent_at=NOW, recipients=2)
    assert tick(NOW + 2 * DAY) == 2
    result = send_manual_reminders(
        db.session, batch_id=batch_id, user=users["staff"], now=NOW + 2 * DAY + timedelta(minutes=5), request_ids=ids
    )
    assert (result.queued, result.skipped) == (0, {"reminded_recently": 2})
    later = send_manual_reminders(
        db.session, batch_id=batch_id, user=users["staff"], now=NOW + 2 * DAY + timedelta(hours=2), request_ids=ids[:1]
    )
    db.session.commit()
    assert (later.queued, later.skipped) == (1, {})
    assert len(mails("reminder")) == 3


def test_manual_reminders_count_every_skip_by_reason(app, users):
    batch_id, ids = sent_batch(user=users["staff"], sent_at=NOW, recipients=6)
    signed, declined, bounced, cancelled, _, waiting = ids
    for rid, path in (
        (signed, ["opened", "signed"]),
        (declined, ["opened", "declined"]),
        (bounced, ["bounced"]),
        (cancelled, ["cancelled"]),
    ):
        frm = "sent"
        for to in path:
            transition(db.session, rid, frm=frm, to=to, now=NOW + DAY)
            frm = to
    db.session.commit()
    result = send_manual_reminders(
        db.session, batch_id=batch_id, user=users["staff"], now=NOW + DAY, request_ids=[*ids, 999999]
    )
    assert result.queued == 2
    assert result.skipped == {"signed": 1, "declined": 1, "bounced": 1, "cancelled": 1, "not_found": 1}
    assert request(waiting).reminder_count == 1
    events = db.session.scalars(db.select(Event).where(Event.type == "reminder.manual")).all()
    assert {e.actor for e in events} == {f"user:{users['staff'].id}"} and len(events) == 2


def test_manual_selectors_choose_not_signed_or_not_opened(app, users):
    batch_id, ids = sent_batch(user=users["staff"], sent_at=NOW, recipients=3)
    transition(db.session, ids[0], frm="sent", to="opened", now=NOW + DAY)
    transition(db.session, ids[1], frm="sent", to="opened", now=NOW + DAY)
    transition(db.session, ids[1], frm="opened", to="signed", now=NOW + DAY)
    db.session.commit()
    not_opened = send_manual_reminders(
        db.session, batch_id=batch_id, user=users["staff"], now=NOW + DAY, selector="not_opened"
    )
    assert (not_opened.queued, not_opened.skipped) == (1, {})
    not_signed = send_manual_reminders(
        db.session, batch_id=batch_id, user=users["staff"], now=NOW + DAY, selector="not_signed"
    )
    assert (not_signed.queued, not_signed.skipped) == (1, {"reminded_recently": 1})


def test_a_manual_reminder_counts_towards_the_schedule(app, users):
    batch_id, ids = sent_batch(user=users["staff"], sent_at=NOW)
    send_manual_reminders(db.session, batch_id=batch_id, user=users["staff"], now=NOW + DAY, request_ids=ids)
    db.session.commit()
    assert [tick(NOW + d * DAY) for d in (2, 4)] == [0, 1]
    assert len(mails("reminder")) == 2


def test_manual_reminders_need_a_choice_and_the_batch_owner(app, users):
    batch_id, ids = sent_batch(user=users["admin"], sent_at=NOW)
    with pytest.raises(BatchActionError):
        send_manual_reminders(db.session, batch_id=batch_id, user=users["admin"], now=NOW + DAY)
    with pytest.raises(BatchActionError):
        send_manual_reminders(db.session, batch_id=batch_id, user=users["admin"], now=NOW + DAY, selector="x")
    with pytest.raises(BatchActionError) as denied:
        send_manual_reminders(db.session, batch_id=batch_id, user=users["staff"], now=NOW + DAY, request_ids=ids)
    assert denied.value.status == 403


# The API and the staff forms


def _api_key(user):
    from bulksign.people.users import create_api_key

    secret = create_api_key(db.session, user=user, name="erp", now=NOW).secret
    db.session.commit()
    return {"Authorization": f"Bearer {secret}"}


def test_api_remind_by_ids_or_all_unsigned_answers_202_with_counts(app, users, client):
    batch_id, ids = sent_batch(user=users["staff"], sent_at=utcnow() - 2 * DAY, recipients=3)
    transition(db.session, ids[0], frm="sent", to="opened", now=utcnow())
    transition(db.session, ids[0], frm="opened", to="signed", now=utcnow())
    db.session.commit()
    headers = _api_key(users["staff"])
    by_ids = client.post(f"/api/v1/batches/{batch_id}/remind", json={"request_ids": ids[:2]}, headers=headers)
    assert by_ids.status_code == 202 and by_ids.get_json() == {
        "queued": 1,
        "skipped": {"signed": 1},
        "in_background": 0,
    }
    everyone = client.post(f"/api/v1/batches/{batch_id}/remind", json={"all_unsigned": True}, headers=headers)
    assert everyone.status_code == 202
    assert everyone.get_json() == {"queued": 1, "skipped": {"reminded_recently": 1}, "in_background": 0}
    assert len(mails("reminder")) == 2
    from bulksign.work.queues import get_queue

    assert len(get_queue("mail")) == 2  # enqueued after the commit


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        {},
        {"request_ids": []},
        {"request_ids": ["1"]},
        {"request_ids": [True]},
        {"request_ids": [1], "all_unsigned": True},
        {"all_unsigned": "yes"},
    ],
)
def test_api_remind_explains_a_bad_body(app, users, client, body):
    batch_id, _ = sent_batch(user=users["staff"], sent_at=NOW)
    response = client.post(f"/api/v1/batches/{batch_id}/remind", json=body, headers=_api_key(users["staff"]))
    assert response.status_code == 400 and "request_ids" in response.get_json()["error"]["message"]


def test_api_remind_refuses_unknown_batches_strangers_and_anonymous_callers(app, users, client):
    batch_id, _ = sent_batch(user=users["admin"], sent_at=NOW)
    headers = _api_key(users["staff"])
    assert client.post("/api/v1/batches/999/remind", json={"all_unsigned": True}, headers=headers).status_code == 404
    assert (
        client.post(f"/api/v1/batches/{batch_id}/remind", json={"all_unsigned": True}, headers=headers).status_code
        == 403
    )
    assert client.post(f"/api/v1/batches/{batch_id}/remind", json={"all_unsigned": True}).status_code == 401


def test_staff_remind_all_not_signed_from_the_batch_page_and_read_the_result(app, users, client, auth):
    batch_id, ids = sent_batch(user=users["staff"], sent_at=utcnow() - 2 * DAY, recipients=2)
    auth.login()
    page = client.get(f"/batches/{batch_id}")
    token = csrf_from(page)
    response = client.post(f"/batches/{batch_id}/remind", data={"selector": "not_signed", "csrf_token": token})
    assert response.status_code == 302 and response.headers["Location"].endswith(f"/batches/{batch_id}")
    assert "2 reminders queued." in client.get(f"/batches/{batch_id}").get_data(as_text=True)
    again = client.post(
        f"/batches/{batch_id}/remind",
        data={"request_ids": [str(i) for i in ids], "csrf_token": token},
        headers={"HX-Request": "true"},
    )
    text = again.get_data(as_text=True)
    assert again.status_code == 200 and "0 reminders queued." in text and "2 reminded within the last hour" in text
    assert "flash-warning" in text and "Send anyway" in text
    assert client.post(f"/batches/{batch_id}/remind", data={"selector": "not_signed"}).status_code == 400  # no CSRF
    assert client.post(f"/batches/{batch_id}/remind", data={"request_ids": "x", "csrf_token": token}).status_code == 400


def test_the_batch_page_partials_post_to_the_reminder_endpoints(app, users):
    from flask import render_template

    batch_id, (rid,) = sent_batch(user=users["staff"], sent_at=NOW)
    with app.test_request_context():
        actions = render_template("reminders/_actions.html", batch_id=batch_id)
        one = render_template("reminders/_request_actions.html", r=request(rid))
    assert actions.count(f'hx-post="/batches/{batch_id}/remind"') == 2 and 'value="not_opened"' in actions
    assert f'action="/requests/{rid}/email"' in one and f'action="/requests/{rid}/resend"' in one
    assert 'name="csrf_token"' in one and "/sign/" not in one


def test_an_automatic_and_a_manual_reminder_at_the_same_moment_send_one_mail(app, users):
    batch_id, ids = sent_batch(user=users["staff"], sent_at=NOW, recipients=100)
    staff_id = users["staff"].id

    def automatic() -> int:
        with Session(db.engine) as session:
            queued = queue_due_reminders(
                session, now=NOW + 2 * DAY, page_size=10, on_page=lambda _ids: session.commit()
            ).queued
            session.commit()
            return queued

    def manual() -> int:
        from bulksign.models import User

        with Session(db.engine) as session:
            queued = send_manual_reminders(
                session,
                batch_id=batch_id,
                user=session.get(User, staff_id),
                now=NOW + 2 * DAY,
                request_ids=ids,
                page_size=10,
            ).queued
            session.commit()
            return queued

    counts = race(app, lambda n: (automatic, manual)[n](), callers=2)
    assert counts[0] + counts[1] == 100 and len(mails("reminder")) == 100
    assert {r.reminder_count for r in requests_of(batch_id)} == {1}


def test_a_tick_out_of_time_stops_and_the_next_one_finishes(app, users):
    sent_batch(user=users["staff"], sent_at=NOW, recipients=3)
    stopped = queue_due_reminders(db.session, now=NOW + 2 * DAY, time_budget_seconds=-1)
    assert (stopped.queued, stopped.complete) == (0, False)
    assert tick(NOW + 2 * DAY) == 3


def test_right_after_sending_a_reminder_waits_an_hour_unless_staff_send_it_anyway(app, users):
    batch_id, ids = sent_batch(user=users["staff"], sent_at=NOW, recipients=2)
    soon = NOW + timedelta(minutes=10)
    held = send_manual_reminders(db.session, batch_id=batch_id, user=users["staff"], now=soon, request_ids=ids)
    assert (held.queued, held.skipped) == (0, {"invited_recently": 2})
    forced = send_manual_reminders(
        db.session, batch_id=batch_id, user=users["staff"], now=soon, request_ids=ids, force=True
    )
    db.session.commit()
    assert (forced.queued, forced.skipped) == (2, {})
    # A double click on "send anyway" still sends each reminder once.
    again = send_manual_reminders(
        db.session, batch_id=batch_id, user=users["staff"], now=soon, request_ids=ids, force=True
    )
    assert (again.queued, again.skipped) == (0, {"reminded_recently": 2})
    assert len(mails("reminder")) == 2


def test_staff_are_warned_that_recipients_were_just_invited_and_can_send_anyway(app, users, client, auth):
    batch_id, ids = sent_batch(user=users["staff"], sent_at=utcnow() - timedelta(minutes=5), recipients=2)
    auth.login()
    token = csrf_from(client.get(f"/batches/{batch_id}"))
    held = client.post(
        f"/batches/{batch_id}/remind",
        data={"selector": "not_signed", "csrf_token": token},
        headers={"HX-Request": "true"},
    )
    text = held.get_data(as_text=True)
    assert "0 reminders queued. Skipped 2: 2 invited less than an hour ago." in text
    assert "flash-warning" in text and 'name="force" value="1"' in text and 'name="selector" value="not_signed"' in text
    sent = client.post(
        f"/batches/{batch_id}/remind",
        data={"selector": "not_signed", "force": "1", "csrf_token": token},
        headers={"HX-Request": "true"},
    )
    assert "2 reminders queued." in sent.get_data(as_text=True) and len(mails("reminder")) == 2


def test_api_remind_can_send_anyway(app, users, client):
    batch_id, ids = sent_batch(user=users["staff"], sent_at=utcnow(), recipients=1)
    headers = _api_key(users["staff"])
    held = client.post(f"/api/v1/batches/{batch_id}/remind", json={"request_ids": ids}, headers=headers)
    assert held.get_json() == {"queued": 0, "skipped": {"invited_recently": 1}, "in_background": 0}
    forced = client.post(
        f"/api/v1/batches/{batch_id}/remind", json={"request_ids": ids, "force": True}, headers=headers
    )
    assert forced.status_code == 202 and forced.get_json() == {"queued": 1, "skipped": {}, "in_background": 0}
    assert (
        client.post(
            f"/api/v1/batches/{batch_id}/remind", json={"request_ids": ids, "force": "yes"}, headers=headers
        ).status_code
        == 400
    )

"""Expiry at the deadline, with the time passed in: unsigned requests expire, the owner gets one summary per wave."""

from __future__ import annotations

from datetime import timedelta

from flask import current_app
from sqlalchemy import update

from bulksign.batches.expiry import expire_due
from bulksign.batches.progress import mark_batch_started
from bulksign.batches.states import transition
from bulksign.core.extensions import db
from bulksign.jobs.periodic import expire_requests, rollup_batches
from bulksign.models import Batch, SigningRequest
from bulksign.models.status import Status
from bulksign.signing.links import current_token
from bulksign.work.pipeline import enqueue_sends
from tests.support.clock import NOW
from tests.support.waiting import mails, request, sent_batch

DAY = timedelta(days=1)


def _stagger(ids, *, minutes: int):
    """Deadlines ``minutes`` apart from day 7, as when the invitations went out at the throttle's pace."""
    for n, rid in enumerate(ids):
        db.session.execute(
            update(SigningRequest)
            .where(SigningRequest.id == rid)
            .values(expires_at=NOW + 7 * DAY + timedelta(minutes=minutes * n))
        )
    db.session.commit()


def tick(now):
    result = expire_due(db.session, now=now)
    db.session.commit()
    enqueue_sends(result.mail_ids)
    return result.expired, result.summaries


def _sign(request_id, now):
    transition(db.session, request_id, frm=Status.SENT, to=Status.OPENED, now=now)
    transition(db.session, request_id, frm=Status.OPENED, to=Status.SIGNED, now=now)
    db.session.commit()


def test_at_day_7_unsigned_requests_expire_and_the_owner_gets_exactly_one_summary(app, users, smtp, run_jobs, client):
    _, ids = sent_batch(user=users["staff"], sent_at=NOW, recipients=3)
    _sign(ids[0], NOW + DAY)
    token = current_token(request(ids[1]), secret=current_app.config["SECRET_KEY"])
    assert tick(NOW + 7 * DAY - timedelta(seconds=1)) == (0, 0)
    assert expire_requests(now=NOW + 7 * DAY) == "2 requests expired, 1 summaries queued"
    assert expire_requests(now=NOW + 7 * DAY) == "0 requests expired, 0 summaries queued"
    assert tick(NOW + 8 * DAY) == (0, 0)
    assert [request(i).status for i in ids] == ["signed", "expired", "expired"]
    run_jobs("mail")
    (summary,) = smtp.of_kind("expiry-summary")
    assert summary.message["To"] == "staff@example.com"
    assert "2 recipients did not sign" in summary.subject
    body = summary.text()
    assert "person1@example.com" in body and "person2@example.com" in body and "person0@example.com" not in body
    assert "Signed so far: 1 of 3." in body and "/batches/" in body
    assert mails("expiry_summary")[0].status == "sent"
    assert client.get(f"/sign/{token}").status_code == 410


def test_a_batch_expiring_over_several_ticks_gets_one_summary_for_the_wave(app, users):
    batch_id, ids = sent_batch(user=users["staff"], sent_at=NOW, recipients=3)
    _stagger(ids, minutes=20)
    deadline = NOW + 7 * DAY
    assert tick(deadline) == (1, 0)
    assert tick(deadline + timedelta(minutes=20)) == (1, 0)
    assert tick(deadline + timedelta(minutes=40)) == (1, 1)
    assert tick(deadline + timedelta(hours=3)) == (0, 0)
    (summary,) = mails("expiry_summary")
    assert summary.subject.startswith("3 recipients") and summary.batch_id == batch_id


def test_a_later_wave_gets_its_own_summary_listing_only_its_requests(app, users, smtp, run_jobs):
    _, ids = sent_batch(user=users["staff"], sent_at=NOW, recipients=2)
    db.session.execute(update(SigningRequest).where(SigningRequest.id == ids[1]).values(expires_at=NOW + 10 * DAY))
    db.session.commit()
    assert tick(NOW + 7 * DAY) == (1, 1)
    assert tick(NOW + 10 * DAY) == (1, 1)
    first, second = mails("expiry_summary")
    assert first.message_id != second.message_id and second.message_id.endswith("-2@bulksign.local>")
    run_jobs("mail")
    texts = [m.text() for m in smtp.of_kind("expiry-summary")]
    assert "person0@" in texts[0] and "person1@" not in texts[0]
    assert "person1@" in texts[1] and "person0@" not in texts[1]


def test_a_trickle_of_expiries_still_gets_a_summary_within_a_day(app, users):
    _, ids = sent_batch(user=users["staff"], sent_at=NOW, recipients=40)
    _stagger(ids, minutes=50)
    summaries = [tick(NOW + 7 * DAY + timedelta(minutes=50 * n))[1] for n in range(31)]
    assert sum(summaries) == 1 and summaries.index(1) == 29  # 24 h after the first expiry


def test_a_reminder_still_queued_at_the_deadline_is_cancelled(app, users):
    from bulksign.batches.reminders import queue_due_reminders

    sent_batch(user=users["staff"], sent_at=NOW)
    assert queue_due_reminders(db.session, now=NOW + 4 * DAY).queued == 1
    assert tick(NOW + 7 * DAY) == (1, 1)
    assert [m.status for m in mails("reminder")] == ["cancelled"]


def _started_batch(user, recipients: int) -> tuple[int, list[int]]:
    """A batch whose invitations all went out and that is still open (processing), as the pipeline leaves it."""
    batch_id, ids = sent_batch(user=user, sent_at=NOW, recipients=recipients)
    mark_batch_started(db.session, batch_id=batch_id, now=NOW)
    db.session.commit()
    return batch_id, ids


def _send_queued_completions():
    """What the reconciler would do with a completion notice left queued: send it."""
    enqueue_sends([m.id for m in mails("completion_notice") if m.status == "queued"])


def test_an_expiry_wave_that_closes_the_batch_sends_the_owner_one_mail_saying_both(app, users, smtp, run_jobs):
    """The summary (who did not sign, the resend link) is also the completion notice."""
    batch_id, ids = _started_batch(users["staff"], recipients=3)
    _sign(ids[0], NOW + DAY)
    assert expire_requests(now=NOW + 7 * DAY) == "2 requests expired, 1 summaries queued"
    rollup_batches(now=NOW + 7 * DAY + timedelta(seconds=15))  # the same minute: nothing left for it to close
    _send_queued_completions()
    run_jobs("mail")
    db.session.expire_all()
    assert db.session.get(Batch, batch_id).status == "closed"
    (mail,) = smtp.received
    assert mail.kind == "expiry-summary" and mail.message["To"] == "staff@example.com"
    assert "2 recipients did not sign" in mail.subject
    body = mail.text()
    assert "person1@example.com" in body and "person2@example.com" in body
    assert '"Employment contract" is closed: nobody can sign it any more.' in body
    assert "Signed: 1 of 3" in body and "Did not sign before the deadline: 2" in body and "/batches/" in body
    assert [m.status for m in mails("completion_notice")] == ["cancelled"]


def test_a_batch_whose_invitations_are_out_awaits_signatures_and_its_expiry_wave_tells_the_end_once(
    app, users, smtp, run_jobs
):
    """Sending ending is not the batch's end; nobody is told "done" with 0 of 2 signed."""
    batch_id, _ = _started_batch(users["staff"], recipients=2)
    assert rollup_batches(now=NOW + timedelta(minutes=1)) == 1
    run_jobs("mail")
    assert db.session.get(Batch, batch_id).status == "awaiting_signatures" and smtp.received == []
    # The wave that leaves nobody able to sign closes the batch; its summary tells that, in one mail.
    assert expire_requests(now=NOW + 7 * DAY) == "2 requests expired, 1 summaries queued"
    run_jobs("mail")
    (summary,) = smtp.received
    assert summary.kind == "expiry-summary" and "is closed: nobody can sign it any more" in summary.text()
    assert "Signed: 0 of 2" in summary.text()
    db.session.expire_all()
    assert db.session.get(Batch, batch_id).status == "closed"

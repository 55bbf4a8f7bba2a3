"""Reminders to the other parties of a document several sign: each on the batch's schedule counted from
its own invitation, quiet hours included, the deadline the request's, each mailed once with the party's own link;
on real workers and real mail, the time passed in."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import timedelta

from sqlalchemy import update

from bulksign.batches.reminders import queue_due_reminders
from bulksign.core.extensions import db
from bulksign.core.tokens import hash_token
from bulksign.jobs.periodic import send_due_reminders
from bulksign.models import Batch, OutgoingMail, SigningRequest
from tests.signing.test_routing import _mails_to, _parties, _sent, _sign, _token
from tests.support.batches import worker_env
from tests.support.processes import BASE_DIR

DAY = timedelta(days=1)


def tick(now) -> int:
    """The periodic job's tick at ``now`` (it commits and queues the mails); how many reminders it queued."""
    return int(send_due_reminders(now=now).split()[0])


def _employer_invited(users, client, smtp, run_jobs, **batch) -> int:
    """A two-party request whose employee signed and whose employer was invited (real render, sign and mail)."""
    request_id = _sent(users, run_jobs, **batch)
    assert _sign(client, _token(smtp.received[0]), "Eva Employee").status_code == 303
    run_jobs("pdf", "mail")
    assert _parties(request_id)["employer"].status == "invited"
    return request_id


def _party_reminders():
    db.session.expire_all()
    return db.session.query(OutgoingMail).filter_by(kind="party_reminder").order_by(OutgoingMail.id).all()


def test_the_employer_is_reminded_on_the_schedule_from_its_own_invitation_with_its_own_link(
    app, users, client, smtp, run_jobs
):
    request_id = _employer_invited(users, client, smtp, run_jobs)
    invited = _parties(request_id)["employer"].invited_at
    # The employee took three days: the request went out long before the employer's invitation.
    db.session.execute(update(SigningRequest).where(SigningRequest.id == request_id).values(sent_at=invited - 3 * DAY))
    db.session.commit()
    assert tick(invited + DAY) == 0  # the request's days 2 and 4 have passed, the employer's day 2 has not
    assert tick(invited + 2 * DAY) == 1
    assert tick(invited + 2 * DAY) == 0  # the same instant twice: one reminder
    assert tick(invited + 3 * DAY) == 0
    run_jobs("mail")
    (invitation,) = smtp.of_kind("party-invitation")
    (reminder,) = smtp.of_kind("party-reminder")
    assert reminder.rcpt_tos == ["hr@acme.example"]
    assert "Reminder" in reminder.subject and "Anna Boss" in reminder.text()
    link = _token(reminder)
    assert link == _token(invitation) and hash_token(link) == _parties(request_id)["employer"].token_hash
    assert client.get(f"/sign/{link}").status_code == 200
    assert tick(invited + 4 * DAY) == 1
    employer = _parties(request_id)["employer"]
    assert (employer.reminder_count, employer.last_reminder_at) == (2, invited + 4 * DAY)
    assert [m.message_id for m in _party_reminders()] == [
        f"<party-reminder-{employer.id}-{employer.token_nonce[:12]}-{n}@bulksign.local>" for n in (1, 2)
    ]
    # The employee, who signed, is never reminded meanwhile.
    assert db.session.get(SigningRequest, request_id).reminder_count == 0


def test_a_party_that_signed_gets_no_reminder_and_one_queued_before_is_not_sent(app, users, client, smtp, run_jobs):
    request_id = _employer_invited(users, client, smtp, run_jobs)
    invited = _parties(request_id)["employer"].invited_at
    tick(invited + 2 * DAY)  # queued, not sent yet
    _sign(client, _token(_mails_to(smtp, "hr@acme.example")[0]), "Anna Boss")
    run_jobs("pdf", "mail")
    assert smtp.of_kind("party-reminder") == []  # queued before she signed: not sent, and says why
    (cancelled,) = _party_reminders()
    assert cancelled.status == "cancelled" and "no longer waits" in cancelled.error
    assert tick(invited + 4 * DAY) == 0


def test_a_party_is_not_reminded_past_the_requests_deadline(app, users, client, smtp, run_jobs):
    request_id = _employer_invited(users, client, smtp, run_jobs)
    expires = db.session.get(SigningRequest, request_id).expires_at
    assert tick(expires + timedelta(minutes=1)) == 0  # the request's deadline is the party's


def test_quiet_hours_hold_a_partys_reminder_until_they_end(app, users, client, smtp, run_jobs):
    request_id = _employer_invited(users, client, smtp, run_jobs)
    invited = _parties(request_id)["employer"].invited_at
    due = invited + 2 * DAY
    request = db.session.get(SigningRequest, request_id)
    db.session.execute(
        update(Batch)
        .where(Batch.id == request.batch_id)
        .values(quiet_hours_start=due.hour, quiet_hours_end=(due.hour + 1) % 24, timezone="UTC")
    )
    db.session.commit()
    result = queue_due_reminders(db.session, now=due)
    db.session.commit()
    assert (result.queued, result.waiting_quiet_hours) == (0, 1)
    assert tick(due.replace(minute=0, second=0) + timedelta(hours=1)) == 1
    run_jobs("mail")
    assert [m.rcpt_tos for m in smtp.of_kind("party-reminder")] == [["hr@acme.example"]]
    assert re.search(r"/sign/", smtp.of_kind("party-reminder")[0].text())


def _tick_ahead(app, days: int, log) -> str:
    """``flask jobs tick`` as operators run it, in its own process whose clock libfaketime sets ``days`` ahead of
    the machine's; what it printed. (The monotonic clock stays real: limits' in-memory timer hangs on a fake one.)"""
    env = {**worker_env(app), "FLASK_APP": "wsgi", "DONT_FAKE_MONOTONIC": "1"}
    done = subprocess.run(
        ["faketime", "-f", f"+{days}d", sys.executable, "-m", "flask", "jobs", "tick"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log.write_text(done.stdout + done.stderr)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_under_faketime_the_real_tick_reminds_the_employer_two_days_after_its_own_invitation(
    app, users, client, smtp, run_jobs, tmp_path
):
    """The same schedule with nothing passed in: the periodic jobs' own process, days ahead on a faked clock, finds
    the employer due on its day 2 and 4 (counted from its invitation, not the request's), and the mail worker sends
    each reminder with the employer's own link."""
    request_id = _employer_invited(users, client, smtp, run_jobs)
    assert "reminders: 0 " in _tick_ahead(app, 1, tmp_path / "tick-1.log")
    assert "reminders: 1 " in _tick_ahead(app, 2, tmp_path / "tick-2.log")
    assert "reminders: 0 " in _tick_ahead(app, 2, tmp_path / "tick-2-again.log")  # the same day twice: one
    run_jobs("mail")
    (reminder,) = smtp.of_kind("party-reminder")
    assert reminder.rcpt_tos == ["hr@acme.example"]
    assert hash_token(_token(reminder)) == _parties(request_id)["employer"].token_hash
    assert "reminders: 1 " in _tick_ahead(app, 4, tmp_path / "tick-4.log")
    employer = _parties(request_id)["employer"]
    assert employer.reminder_count == 2
    # Stamped with the faked clock's time: about four days after the invitation.
    assert timedelta(days=3, hours=23) < employer.last_reminder_at - employer.invited_at < timedelta(days=4, hours=1)
    assert db.session.get(SigningRequest, request_id).reminder_count == 0  # the employee signed: never reminded

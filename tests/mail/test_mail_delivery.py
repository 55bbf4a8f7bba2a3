"""Invitations reach the recipient through SMTP trouble: retried when it may pass, bounced when refused."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.models import Batch, OutgoingMail
from bulksign.people.users import create_user
from bulksign.work.pipeline import enqueue_renders
from bulksign.work.queues import get_queue
from tests.support.batches import make_batch, request_ids, requests_of, run_worker
from tests.support.clock import NOW
from tests.support.services import free_port
from tests.support.workers import one_per_job


@pytest.fixture
def fast_retry_app(make_app):
    """Backoff 0: RQ re-queues a failed attempt at once, so a burst worker sees every attempt."""
    app = make_app(RETRY_BACKOFF_SECONDS=0, MAIL_MAX_ATTEMPTS=3)
    with app.app_context():
        yield app


@pytest.fixture
def staff(fast_retry_app):
    user = create_user(db.session, email="staff@example.com", password="password-123", role="staff", now=NOW)
    db.session.commit()
    return user


def _mails():
    """The invitations recorded (the owner's completion notice follows them once the batch is done)."""
    db.session.expire_all()
    return db.session.scalars(
        select(OutgoingMail).where(OutgoingMail.kind == "invitation").order_by(OutgoingMail.id)
    ).all()


def test_mail_waits_while_the_smtp_server_is_down_and_goes_out_when_it_is_back(fast_retry_app, staff, smtp):
    batch = make_batch(user=staff, now=NOW, recipients=1)
    fast_retry_app.config["MAIL_PORT"] = free_port()  # nothing listens: connection refused
    enqueue_renders(request_ids(batch))
    run_worker(fast_retry_app, "pdf")
    run_worker(fast_retry_app, "mail", max_jobs=1)
    (request,) = requests_of(batch)
    (mail,) = _mails()
    # The server never saw the mail: no attempt is used up.
    assert request.status == "generated" and mail.status == "queued" and mail.attempts == 0
    assert "could not be reached" in mail.error
    assert len(get_queue("mail")) == 1  # the retry is queued, not lost

    fast_retry_app.config["MAIL_PORT"] = smtp.port
    run_worker(fast_retry_app, "mail")
    (request,) = requests_of(batch)
    (mail,) = _mails()
    assert request.status == "sent" and mail.status == "sent" and mail.attempts == 1
    assert len(smtp.of_kind("invitation")) == 1


def test_a_temporary_refusal_is_retried_and_then_delivered(fast_retry_app, staff, smtp):
    batch = make_batch(user=staff, now=NOW, recipients=1)
    smtp.handler.scripted_replies.append("451 4.3.0 Mailbox busy, try later")
    enqueue_renders(request_ids(batch))
    run_worker(fast_retry_app, "pdf", "mail")
    (request,) = requests_of(batch)
    (mail,) = _mails()
    assert request.status == "sent" and mail.attempts == 2 and mail.error is None
    (invitation,) = smtp.of_kind("invitation")
    assert invitation.message_id == mail.message_id


def test_a_recipient_the_server_refuses_is_bounced_with_the_servers_reason(fast_retry_app, staff, smtp):
    batch = make_batch(user=staff, now=NOW, recipients=[("ok@example.com", "Ok"), ("gone@example.com", "Gone")])
    smtp.handler.reject_recipients["gone@example.com"] = "550 5.1.1 No such user here"
    enqueue_renders(request_ids(batch))
    run_worker(fast_retry_app, "pdf", "mail")
    ok, gone = requests_of(batch)
    assert ok.status == "sent"
    assert gone.status == "bounced" and "550 5.1.1 No such user here" in gone.error_message
    assert {m.to_email: m.status for m in _mails()} == {"ok@example.com": "sent", "gone@example.com": "bounced"}
    assert [m.rcpt_tos for m in smtp.of_kind("invitation")] == [["ok@example.com"]]
    assert db.session.get(Batch, batch).status == "partially_failed"


def test_an_outage_longer_than_every_retry_loses_no_invitation(fast_retry_app, staff, smtp):
    """Seen in the 10,000-recipient soak: a 60-s outage used up the attempts of the mail at the head of each retried
    chunk, and invitations that the server had answered 451 once before failed for good. Only what the server saw
    counts: here one 451, then more tries than MAIL_MAX_ATTEMPTS against a closed port, then the reconciler."""
    from datetime import timedelta

    from bulksign.batches.reconciler import reconcile
    from bulksign.core.extensions import get_redis
    from bulksign.mail.mail_server import current_outage
    from bulksign.models import utcnow

    batch = make_batch(user=staff, now=NOW, recipients=1)
    smtp.handler.scripted_replies.append("451 4.3.0 Mailbox busy, try later")
    enqueue_renders(request_ids(batch))
    run_worker(fast_retry_app, "pdf")
    run_worker(fast_retry_app, "mail", max_jobs=1)
    assert _mails()[0].attempts == 1 and "451" in _mails()[0].error
    fast_retry_app.config["MAIL_PORT"] = free_port()  # down: connection refused, RQ retries until it gives up
    tries = run_worker(fast_retry_app, "mail")
    (request,) = requests_of(batch)
    (mail,) = _mails()
    assert tries > fast_retry_app.config["MAIL_MAX_ATTEMPTS"]
    assert mail.status == "queued" and mail.attempts == 1 and "could not be reached" in mail.error
    assert request.status == "generated"
    assert len(get_queue("mail")) == 0  # RQ gave up: from here the reconciler keeps the mail going
    outage = current_outage(get_redis())  # what /readyz reports once it has lasted
    assert outage is not None and "Connection refused" in outage.reason

    fast_retry_app.config["MAIL_PORT"] = smtp.port
    reconcile(
        db.session,
        redis=get_redis(),
        app=fast_retry_app,
        now=utcnow() + timedelta(minutes=10),
        stale_after=timedelta(minutes=5),
    )
    run_worker(fast_retry_app, "mail")
    (request,) = requests_of(batch)
    (mail,) = _mails()
    assert request.status == "sent" and mail.status == "sent" and mail.attempts == 2
    assert len(smtp.of_kind("invitation")) == 1
    assert current_outage(get_redis()) is None


def test_a_server_that_greets_with_421_or_refuses_the_connection_is_down_not_a_failed_attempt(fast_retry_app):
    import socket
    import threading

    from flask_mail import Message

    from bulksign.mail.mail_headers import outgoing
    from bulksign.mail.smtp_link import SmtpLink

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def greet_busy():
        connection, _ = listener.accept()
        with connection:
            connection.sendall(b"421 4.3.2 Service not available, closing channel\r\n")

    greeter = threading.Thread(target=greet_busy, daemon=True)
    greeter.start()
    message = outgoing(message=Message("Hello", sender="a@example.com", recipients=["b@example.com"], body="x"))
    fast_retry_app.config.update(MAIL_PORT=port)
    busy = SmtpLink().send(message, app=fast_retry_app)
    greeter.join(5)
    listener.close()
    assert busy.kind == "down" and "421 4.3.2 Service not available" in busy.reason
    fast_retry_app.config.update(MAIL_PORT=free_port())
    refused = SmtpLink().send(message, app=fast_retry_app)
    assert refused.kind == "down" and "ConnectionRefusedError" in refused.reason


def test_a_server_that_keeps_answering_try_later_fails_the_request_with_a_clear_message(fast_retry_app, staff, smtp):
    batch = make_batch(user=staff, now=NOW, recipients=1)
    smtp.handler.scripted_replies.extend(["451 4.3.0 Mailbox busy, try later"] * 3)
    enqueue_renders(request_ids(batch))
    run_worker(fast_retry_app, "pdf", "mail")
    (request,) = requests_of(batch)
    (mail,) = _mails()
    assert mail.status == "failed" and mail.attempts == 3
    assert request.status == "failed"
    assert request.error_message.startswith("The mail could not be delivered after 3 attempts: 451 4.3.0")
    assert db.session.get(Batch, batch).status == "closed"  # nobody left who could sign


def test_one_smtp_connection_carries_many_mails(fast_retry_app, staff, smtp):
    from bulksign.jobs.mail import smtp_link

    one_per_job(fast_retry_app)
    batch = make_batch(user=staff, now=NOW, recipients=3)
    enqueue_renders(request_ids(batch))
    run_worker(fast_retry_app, "pdf")
    run_worker(fast_retry_app, "mail", max_jobs=1)
    connection = smtp_link.host
    run_worker(fast_retry_app, "mail")
    assert connection is not None and smtp_link.host is connection
    assert len(smtp.of_kind("invitation")) == 3


def test_building_a_mail_does_not_ask_the_resolver_for_this_hosts_name(app, monkeypatch):
    """Where reverse DNS is slow, socket.getfqdn() takes seconds: once per mail would be hours per batch."""
    import socket

    from flask_mail import Message

    from bulksign.mail.mailer import MESSAGE_ID_DOMAIN  # every builder imports the module

    asked = []
    monkeypatch.setattr(socket, "getfqdn", lambda *args: asked.append(args) or "slow.example")
    message = Message(subject="Please sign", recipients=["anna@example.com"], body="…", sender="bulksign@example.com")
    assert asked == [] and message.msgId.endswith(f"@{MESSAGE_ID_DOMAIN}>")

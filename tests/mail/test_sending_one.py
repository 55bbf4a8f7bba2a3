"""Mail sends one message and reports what happened, in the server's words; it moves nothing itself."""

from __future__ import annotations

import pytest
from flask_mail import Message

from bulksign.core.extensions import db
from bulksign.mail import mailer
from bulksign.mail.delivery import Sender
from bulksign.mail.mailer import MailNotNeeded, queue_mail
from bulksign.mail.outcomes import Delivery, Outcome
from bulksign.mail.smtp_link import SmtpLink
from bulksign.models import OutgoingMail
from bulksign.models.mail import MailKind, MailStatus
from tests.support.clock import NOW
from tests.support.services import free_port

KIND = MailKind.PASSWORD_RESET


@pytest.fixture
def mail(app, monkeypatch):
    """A queued mail whose builder is a plain message (no domain row behind it), committed."""

    def build(session, mail, app):
        if mail.to_email.startswith("moot"):
            raise MailNotNeeded("the reset was used meanwhile")
        message = Message("Hello", sender="bulksign@example.com", recipients=[mail.to_email], body="Hi")
        message.msgId = mail.message_id
        return message

    monkeypatch.setitem(mailer.BUILDERS, KIND, build)

    def queued(to_email: str) -> OutgoingMail:
        row = queue_mail(db.session, key=f"reset-{to_email}", kind=KIND, to_email=to_email, subject="Hi", now=NOW)
        db.session.commit()
        return row

    return queued


def _send(app, row: OutgoingMail) -> Delivery:
    link = SmtpLink()
    try:
        return Sender(app=app, link=link).send(db.session, row)
    finally:
        link.close()


def test_each_answer_of_a_real_server_comes_back_as_its_outcome_with_the_servers_words(app, smtp, mail):
    smtp.handler.reject_recipients["gone@example.com"] = "550 5.1.1 No such user here"
    assert _send(app, mail("anna@example.com")) == Delivery(Outcome.SENT)
    assert _send(app, mail("gone@example.com")) == Delivery(Outcome.BOUNCED, "550 5.1.1 No such user here")
    smtp.handler.scripted_replies.append("451 4.3.0 Mailbox busy, try later")
    assert _send(app, mail("busy@example.com")) == Delivery(Outcome.RETRY, "451 4.3.0 Mailbox busy, try later")
    smtp.handler.scripted_replies.append("554 5.6.0 Message refused")
    assert _send(app, mail("spam@example.com")) == Delivery(
        Outcome.FAILED, "The mail server refused the message: 554 5.6.0 Message refused"
    )
    assert _send(app, mail("moot@example.com")) == Delivery(
        Outcome.CANCELLED, "Not sent, no longer needed: the reset was used meanwhile."
    )
    app.config["MAIL_PORT"] = free_port()  # nothing listens: connection refused
    down = _send(app, mail("later@example.com"))
    assert down.kind is Outcome.DOWN and "ConnectionRefusedError" in down.reason
    assert [m.rcpt_tos for m in smtp.received] == [["anna@example.com"]]


def test_sending_records_nothing_on_the_mail_row(app, smtp, mail):
    """What an outcome means for the row, its request and its batch is the domain's (``batches.sending``)."""
    smtp.handler.reject_recipients["gone@example.com"] = "550 5.1.1 No such user here"
    sent, refused = mail("anna@example.com"), mail("gone@example.com")
    _send(app, sent)
    _send(app, refused)
    assert not db.session.dirty
    db.session.expire_all()
    assert [(m.status, m.attempts, m.error, m.sent_at) for m in db.session.query(OutgoingMail).order_by("id")] == [
        (MailStatus.QUEUED, 0, None, None)
    ] * 2

"""Queue ``mail``: send one outgoing mail through the global throttle and one reused SMTP connection.

Order of a send: (invitations: generated → sending, committed) → throttle → SMTP → mark the mail
row and the request, commit. A crash between the SMTP answer and the commit leaves the request in
``sending``; the reconciler sends it again with the same Message-ID: at most one duplicate.
"""
from __future__ import annotations

import importlib
import logging
import smtplib
from dataclasses import dataclass

from flask import Flask, current_app
from flask_mail import Message, sanitize_address, sanitize_addresses

from ..batches import close_if_done
from ..extensions import db, get_redis
from ..invitations import KIND as INVITATION
from ..invitations import deadline_for, load_request
from ..logs import log
from ..mailer import BUILDERS
from ..models import OutgoingMail, SigningRequest, utcnow
from ..states import Status, transition
from ..storage import StorageError, get_storage
from ..throttle import MailThrottle

logger = logging.getLogger(__name__)


class TransientFailure(RuntimeError):
    """The mail was not sent for a reason that may pass; RQ re-runs the job after a backoff."""


@dataclass(frozen=True)
class SmtpOutcome:
    #: ``sent``, ``retry`` (4xx, refused, timeout), ``bounced`` (recipient rejected) or ``failed`` (other 5xx).
    kind: str
    #: The server's answer or the network error, in words.
    reason: str = ""


class SmtpLink:
    """One SMTP connection per worker process, opened lazily, reopened after an error or a settings change."""

    def __init__(self):
        self.host: smtplib.SMTP | None = None
        self.settings: tuple | None = None

    def _open(self, settings: tuple) -> smtplib.SMTP:
        server, port, username, password, use_tls, use_ssl, timeout = settings
        cls = smtplib.SMTP_SSL if use_ssl else smtplib.SMTP
        host = cls(server, port, timeout=timeout)
        if use_tls:
            host.starttls()
        if username and password:
            host.login(username, password)
        return host

    def close(self) -> None:
        if self.host is not None:
            try:
                self.host.quit()
            except (smtplib.SMTPException, OSError):
                pass
        self.host = None

    def send(self, message: Message, *, app: Flask) -> SmtpOutcome:
        """Send through Flask-Mail's message; classify what the server said."""
        c = app.config
        settings = (c["MAIL_SERVER"], c["MAIL_PORT"], c.get("MAIL_USERNAME"), c.get("MAIL_PASSWORD"),
                    c.get("MAIL_USE_TLS"), c.get("MAIL_USE_SSL"), c["MAIL_TIMEOUT_SECONDS"])
        try:
            fresh = self.host is None or self.settings != settings
            if fresh:
                self.close()
                self.host, self.settings = self._open(settings), settings
            try:
                self._deliver(message)
            except smtplib.SMTPServerDisconnected:
                # An idle connection the server closed: one fresh connection, once.
                self.close()
                if fresh:
                    raise
                self.host = self._open(settings)
                self._deliver(message)
            return SmtpOutcome("sent")
        except smtplib.SMTPRecipientsRefused as exc:
            code, text = next(iter(exc.recipients.values()))
            return _by_code(code, text, permanent="bounced")
        except smtplib.SMTPResponseException as exc:
            self.close()
            return _by_code(exc.smtp_code, exc.smtp_error, permanent="failed")
        except (TimeoutError, smtplib.SMTPException, OSError) as exc:
            self.close()
            return SmtpOutcome("retry", f"The mail server could not be reached ({exc.__class__.__name__}: {exc}).")

    def _deliver(self, message: Message) -> None:
        self.host.sendmail(sanitize_address(message.sender), list(sanitize_addresses(message.send_to)),
                           message.as_bytes(), message.mail_options, message.rcpt_options)


def _by_code(code: int, text: bytes | str, *, permanent: str) -> SmtpOutcome:
    reason = f"{code} {text.decode('utf-8', 'replace') if isinstance(text, bytes) else text}".strip()
    return SmtpOutcome(permanent if 500 <= code < 600 else "retry", reason)


#: Per worker process: the connection outlives jobs (AppWorker does not fork).
smtp_link = SmtpLink()


def send(mail_id: int) -> str:
    """Send one queued mail. Returns what happened, for the job result; raises TransientFailure to retry."""
    app = current_app._get_current_object()
    session = db.session
    mail = session.get(OutgoingMail, mail_id)
    if mail is None or mail.status != "queued":
        return f"skipped: mail {'missing' if mail is None else mail.status}"
    request = session.get(SigningRequest, mail.request_id) if mail.request_id else None
    invitation = mail.kind == INVITATION
    if invitation and not transition(session, request.id, frm=Status.GENERATED, to=Status.SENDING, now=utcnow()):
        session.rollback()
        return "skipped: request not generated"
    if request is not None and request.status == Status.CANCELLED:
        mail.status = "cancelled"
        session.commit()
        return "skipped: request cancelled"
    limit = app.config["MAIL_MAX_ATTEMPTS"]
    if mail.attempts >= limit:
        # Claims are counted before the send, so even a worker that dies every time gives up.
        return _finish(mail, "failed", f"The mail could not be delivered after {mail.attempts} attempts: "
                                       f"{mail.error or 'the worker stopped while sending'}")
    mail.attempts += 1
    session.commit()
    if mail.request_id:
        load_request(session, mail.request_id)  # one query instead of a lazy load per relationship

    throttle = MailThrottle(get_redis(), rate=app.config["MAIL_RATE_PER_MINUTE"],
                            window_seconds=app.config["MAIL_RATE_WINDOW_SECONDS"])
    if not throttle.acquire(max_wait_seconds=app.config["THROTTLE_MAX_WAIT_SECONDS"]).allowed:
        mail.attempts -= 1  # waiting is not failing
        _back_to_generated(mail)
        raise TransientFailure("mail throttle busy")

    module, _, attr = BUILDERS[mail.kind].rpartition(".")
    try:
        message = getattr(importlib.import_module(module), attr)(session, mail, app)
        _attach(message, mail.attachments or [])
    except (LookupError, StorageError) as exc:
        return _finish(mail, "failed", f"The mail could not be built: {exc}")
    outcome = smtp_link.send(message, app=app)
    if outcome.kind == "retry":
        if mail.attempts >= limit:
            return _finish(mail, "failed", f"The mail could not be delivered after {mail.attempts} attempts: "
                                           f"{outcome.reason}")
        mail.error = outcome.reason
        _back_to_generated(mail)
        log(logger, logging.WARNING, "mail not sent, will retry", mail_id=mail_id, request_id=mail.request_id,
            attempt=mail.attempts, error=outcome.reason)
        raise TransientFailure(outcome.reason)
    if outcome.kind == "bounced":
        return _finish(mail, "bounced", f"The recipient's mail server refused the address: {outcome.reason}")
    if outcome.kind == "failed":
        return _finish(mail, "failed", f"The mail server refused the message: {outcome.reason}")
    return _finish(mail, "sent", None)


def _attach(message: Message, attachments: list[dict]) -> None:
    """Files listed on the mail row (e.g. the signed PDF of a confirmation), read from storage at send time."""
    for item in attachments:
        message.attach(filename=item["filename"], content_type=item["content_type"],
                       data=get_storage().get(item["key"]))


def _back_to_generated(mail: OutgoingMail) -> None:
    """Between attempts an invitation's request waits in ``generated``: the retry can claim it again."""
    if mail.kind == INVITATION:
        transition(db.session, mail.request_id, frm=Status.SENDING, to=Status.GENERATED, now=utcnow(),
                   details={"retry": mail.attempts})
    db.session.commit()


def _finish(mail: OutgoingMail, outcome: str, error: str | None) -> str:
    session = db.session
    now = utcnow()
    mail.status, mail.error = outcome, error
    if outcome == "sent":
        mail.sent_at = now
    if mail.kind == INVITATION:
        request = session.get(SigningRequest, mail.request_id)
        batch_id = request.batch_id
        if outcome == "sent":
            transition(session, request.id, frm=Status.SENDING, to=Status.SENT, now=now, sent_at=now,
                       expires_at=deadline_for(request.batch, sent_at=now, days=request.deadline_days),
                       error_message=None,
                       details={"message_id": mail.message_id})
        else:
            transition(session, request.id, frm=Status.SENDING, to=Status(outcome), now=now,
                       error_message=error[:2000], details={"error": error[:500]})
        close_if_done(session, batch_id=batch_id, now=now)
    elif outcome == "bounced" and mail.request_id:
        # A reminder refused for good: the address is dead, whatever the invitation did.
        transition(session, mail.request_id, frm=[Status.SENT, Status.OPENED], to=Status.BOUNCED, now=now,
                   error_message=error[:2000], details={"error": error[:500], "kind": mail.kind})
    session.commit()
    level = logging.INFO if outcome == "sent" else logging.ERROR
    log(logger, level, f"mail {outcome}", mail_id=mail.id, request_id=mail.request_id, kind=mail.kind,
        error=error)
    return outcome

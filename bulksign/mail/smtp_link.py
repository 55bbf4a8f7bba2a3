"""The SMTP link: one reused connection to the mail server, and what the server said to each mail, classified."""

from __future__ import annotations

import smtplib
from dataclasses import replace

from flask import Flask

from bulksign.core.error_tracking import Fault
from bulksign.core.extensions import get_redis
from bulksign.mail import mail_server
from bulksign.mail.dkim_signing import sign as dkim_sign
from bulksign.mail.mail_headers import Outgoing
from bulksign.mail.outcomes import Delivery, Outcome
from bulksign.models import utcnow


class _ServerDown(Exception):
    """No connection to the mail server could be opened."""


class SmtpLink:
    """One SMTP connection per worker process, opened lazily, reopened after an error or a settings change."""

    def __init__(self):
        self.host: smtplib.SMTP | None = None
        self.settings: tuple | None = None

    def _open(self, settings: tuple) -> smtplib.SMTP:
        server, port, username, password, use_tls, use_ssl, timeout = settings
        cls = smtplib.SMTP_SSL if use_ssl else smtplib.SMTP
        try:
            host = cls(server, port, timeout=timeout)
        except smtplib.SMTPResponseException as exc:
            if 400 <= exc.smtp_code < 500:  # "421 service not available" as the greeting
                raise _ServerDown(_by_code(exc.smtp_code, exc.smtp_error, permanent=Outcome.FAILED).reason) from exc
            raise
        except (TimeoutError, smtplib.SMTPServerDisconnected, OSError) as exc:
            raise _ServerDown(f"{exc.__class__.__name__}: {exc}") from exc
        mail_server.record_reached(get_redis())  # once per connection, not per mail
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

    def send(self, mail: Outgoing, *, app: Flask) -> Delivery:
        """Send one mail; what the server said, classified (never ``cancelled``)."""
        c = app.config
        settings = (
            c["MAIL_SERVER"],
            c["MAIL_PORT"],
            c.get("MAIL_USERNAME"),
            c.get("MAIL_PASSWORD"),
            c.get("MAIL_USE_TLS"),
            c.get("MAIL_USE_SSL"),
            c["MAIL_TIMEOUT_SECONDS"],
        )
        try:
            fresh = self.host is None or self.settings != settings
            if fresh:
                self.close()
                self.host, self.settings = self._open(settings), settings
            data = mail.data
            if c.get("DKIM_KEY"):
                data = dkim_sign(data, key=c["DKIM_KEY"])
            try:
                self._deliver(mail, data)
            except smtplib.SMTPServerDisconnected:
                # An idle connection the server closed: one fresh connection, once.
                self.close()
                if fresh:
                    raise
                self.host = self._open(settings)
                self._deliver(mail, data)
            return Delivery(Outcome.SENT)
        except _ServerDown as exc:
            self.close()
            reason = f"The mail server could not be reached ({exc})."
            mail_server.record_down(get_redis(), now=utcnow(), reason=reason)
            return Delivery(Outcome.DOWN, reason)
        except smtplib.SMTPAuthenticationError as exc:
            self.close()
            return replace(
                _by_code(exc.smtp_code, exc.smtp_error, permanent=Outcome.FAILED),
                fault=Fault(("smtp-auth", str(c["MAIL_SERVER"])), exc),
            )
        except smtplib.SMTPRecipientsRefused as exc:
            code, text = next(iter(exc.recipients.values()))
            return _by_code(code, text, permanent=Outcome.BOUNCED)
        except smtplib.SMTPResponseException as exc:
            self.close()
            return _by_code(exc.smtp_code, exc.smtp_error, permanent=Outcome.FAILED)
        except (TimeoutError, smtplib.SMTPException, OSError) as exc:
            self.close()
            return Delivery(
                Outcome.UNREACHABLE, f"The mail server could not be reached ({exc.__class__.__name__}: {exc})."
            )

    def _deliver(self, mail: Outgoing, data: bytes) -> None:
        if self.host is None:
            raise smtplib.SMTPServerDisconnected("not connected")
        self.host.sendmail(mail.envelope_from, list(mail.envelope_to), data)


def _by_code(code: int, text: bytes | str, *, permanent: Outcome) -> Delivery:
    reason = f"{code} {text.decode('utf-8', 'replace') if isinstance(text, bytes) else text}".strip()
    return Delivery(permanent if 500 <= code < 600 else Outcome.RETRY, reason)

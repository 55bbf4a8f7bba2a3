"""Sending one mail: wait for the global throttle, build it with its kind's builder, hand it to the SMTP link."""

from __future__ import annotations

import time
from dataclasses import replace
from threading import Event

from flask import Flask
from flask_mail import Message
from sqlalchemy.orm import Session

from bulksign.core.error_tracking import Fault
from bulksign.core.extensions import get_redis
from bulksign.documents.storage import StorageError, backend_of, get_storage
from bulksign.mail import sms
from bulksign.mail.mail_headers import HeaderError, outgoing
from bulksign.mail.mailer import BUILDERS, TEXT_BUILDERS, MailNotNeeded
from bulksign.mail.outcomes import Delivery, Outcome
from bulksign.mail.smtp_link import SmtpLink
from bulksign.mail.throttle import MailThrottle
from bulksign.models import OutgoingMail
from bulksign.models.mail import Channel
from bulksign.ops import telemetry

#: The text messages' own global throttle (``SMS_RATE_PER_MINUTE``), beside the mail's.
TEXT_THROTTLE_KEY = "bulksign:throttle:sms"


class Sender:
    """The app's mail settings, the global throttles (mail, texts) and this process's SMTP link, for one chunk."""

    def __init__(self, *, app: Flask, link: SmtpLink):
        self.app, self.link = app, link
        #: The chunk's figures, written to Redis once when it ends (``Figures.write``): two round trips a mail were
        #: a twentieth of a mail worker's CPU.
        self.figures = telemetry.record(get_redis())
        window = app.config["MAIL_RATE_WINDOW_SECONDS"]
        self.throttles = {
            Channel.MAIL: MailThrottle(get_redis(), rate=app.config["MAIL_RATE_PER_MINUTE"], window_seconds=window),
            Channel.TEXT: MailThrottle(
                get_redis(), rate=app.config["SMS_RATE_PER_MINUTE"], window_seconds=window, key=TEXT_THROTTLE_KEY
            ),
        }

    def wait_for_slot(self, *, stop: Event, channel: Channel = Channel.MAIL) -> bool:
        """Wait for a slot of the channel's throttle (until ``stop`` is set); how long it took and whether it won
        go to telemetry."""
        started = time.monotonic()
        allowed = (
            self.throttles[Channel(channel)]
            .acquire(max_wait_seconds=self.app.config["THROTTLE_MAX_WAIT_SECONDS"], stop=stop)
            .allowed
        )
        self.figures.count(telemetry.THROTTLE_WAIT, amount=time.monotonic() - started)
        self.figures.count(telemetry.THROTTLE_SLOTS, ("won" if allowed else "timed_out",))
        return allowed

    def send(self, session: Session, mail: OutgoingMail) -> Delivery:
        """Build ``mail`` (its row's Message-ID, its attachments read now) and hand it to the server, or a text
        message to its provider: what happened."""
        if mail.channel == Channel.TEXT:
            return self._text(session, mail)
        build = BUILDERS[mail.kind]
        try:
            message = build(session, mail, self.app)
            _attach(message, mail.attachments or [])
            # Every builder's fields pass through the one header builder here, whatever values they were given.
            prepared = outgoing(message=message)
        except MailNotNeeded as exc:
            return Delivery(Outcome.CANCELLED, f"Not sent, no longer needed: {exc}.")
        except StorageError as exc:
            # An attachment that cannot be read is storage's fault, not the mail's.
            storage = ("storage-read", backend_of(self.app.config["STORAGE_URL"]))
            return Delivery(Outcome.FAILED, f"The mail could not be built: {exc}", Fault(storage, exc))
        except (LookupError, HeaderError) as exc:
            return Delivery(Outcome.FAILED, f"The mail could not be built: {exc}")
        delivery = self.link.send(prepared, app=self.app)
        if delivery.kind is Outcome.FAILED:
            return replace(delivery, reason=f"The mail server refused the message: {delivery.reason}")
        return delivery

    def _text(self, session: Session, mail: OutgoingMail) -> Delivery:
        """Write the text of ``mail`` and hand it to the SMS provider (delivery reports to ``/webhooks/sms``)."""
        try:
            text = TEXT_BUILDERS[mail.kind](session, mail, self.app)
        except MailNotNeeded as exc:
            return Delivery(Outcome.CANCELLED, f"Not sent, no longer needed: {exc}.")
        except LookupError as exc:
            return Delivery(Outcome.FAILED, f"The text message could not be written: {exc}")
        try:
            reference = sms.provider(self.app.config).send(
                to=mail.to_phone or "", text=text, status_url=sms.status_url(self.app.config)
            )
        except sms.SmsError as exc:
            kind = Outcome.FAILED if exc.permanent else Outcome.UNREACHABLE if exc.unreachable else Outcome.RETRY
            return Delivery(kind, f"The text message was not sent: {exc}")
        return Delivery(Outcome.SENT, reference=reference)


def _attach(message: Message, attachments: list[dict]) -> None:
    """Files listed on the mail row (e.g. the signed PDF of a confirmation), read from storage at send time."""
    for item in attachments:
        message.attach(
            filename=item["filename"], content_type=item["content_type"], data=get_storage().get(item["key"])
        )

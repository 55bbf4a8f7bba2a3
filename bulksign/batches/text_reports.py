"""Acting on an SMS provider's reports: a text marked delivered or failed (a failed one's link goes by mail where
the row has a working address), and a STOP reply that bars the number from every batch's texts."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

import phonenumbers
from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.batches.texting import FELL_BACK_TO_MAIL, record_fallback
from bulksign.core.logs import log
from bulksign.mail.mailer import queue_mails
from bulksign.mail.sms_reports import TextReport, TextReportKind
from bulksign.models import OutgoingMail, SigningRequest
from bulksign.models.mail import Channel, MailKind, MailStatus
from bulksign.models.status import WAITING_FOR_RECIPIENT
from bulksign.recipients.phone_suppressions import OPT_OUT, suppress_phone
from bulksign.recipients.suppressions import in_force_among

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TextReportResult:
    #: Texts the report named that it changed (0 for an unknown id, or one reported already).
    matched: int
    #: Mails queued with the link of a failed text: to send.
    mails: tuple[int, ...] = ()
    #: The number barred by an opt-out.
    suppressed: str | None = None


def record_text_report(session: Session, *, report: TextReport, now: datetime) -> TextReportResult:
    """Act on one report; the caller commits and sends ``mails``."""
    if report.kind is TextReportKind.OPT_OUT:
        return _opt_out(session, phone=report.phone or "", reason=report.reason, now=now)
    sent = session.scalars(
        select(OutgoingMail).where(
            OutgoingMail.provider_ref == report.reference,
            OutgoingMail.channel == Channel.TEXT,
            OutgoingMail.status == MailStatus.SENT,
        )
    ).all()
    for text in sent:
        if report.kind is TextReportKind.DELIVERED:
            text.status, text.delivered_at = MailStatus.DELIVERED, now
        else:
            text.status, text.error = MailStatus.FAILED, f"The text was not delivered: {report.reason}"[:2000]
    mails = [m for text in sent if report.kind is TextReportKind.FAILED and (m := _mail_instead(session, text, now))]
    log(logger, logging.INFO, "text report", kind=report.kind, matched=len(sent), mailed=len(mails))
    return TextReportResult(matched=len(sent), mails=tuple(mails))


def _mail_instead(session: Session, text: OutgoingMail, now: datetime) -> int | None:
    """A failed text's link by mail, when its request still waits and its row has an address not suppressed."""
    if text.request_id is None:
        return None
    request = session.get_one(SigningRequest, text.request_id)
    if request.status not in {s.value for s in WAITING_FOR_RECIPIENT} or not request.email:
        return None
    if in_force_among(session, [request.email]):
        return None
    [mail_id] = queue_mails(
        session,
        [
            {
                "key": f"mail-again-{request.id}-{(request.token_nonce or '')[:12]}",
                "kind": MailKind.LINK_AGAIN,
                "to_email": request.email,
                "subject": _subject(session, text),
                "request_id": request.id,
                "batch_id": request.batch_id,
            }
        ],
        now=now,
    )
    record_fallback(session, request, kind=FELL_BACK_TO_MAIL, details={"reason": (text.error or "")[:500]}, now=now)
    return mail_id


def _subject(session: Session, text: OutgoingMail) -> str:
    """The subject the request's invitation went with, for the outgoing-mail log (the builder writes the mail)."""
    return (
        session.scalar(
            select(OutgoingMail.subject)
            .where(OutgoingMail.request_id == text.request_id, OutgoingMail.kind == MailKind.INVITATION)
            .order_by(OutgoingMail.id.desc())
            .limit(1)
        )
        or ""
    )


def _opt_out(session: Session, *, phone: str, reason: str, now: datetime) -> TextReportResult:
    """Bar the number (as E.164) from texts; texts queued to it are not sent (``sending``: their invitations fail
    with the reason)."""
    try:
        number = phonenumbers.format_number(phonenumbers.parse(phone, None), phonenumbers.PhoneNumberFormat.E164)
    except phonenumbers.NumberParseException:
        return TextReportResult(matched=0)
    suppress_phone(session, phone=number, source=OPT_OUT, reason=reason or "STOP", now=now)
    log(logger, logging.INFO, "number opted out of texts")
    return TextReportResult(matched=1, suppressed=number)

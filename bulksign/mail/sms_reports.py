"""What an SMS provider's webhook says: a text delivered or failed (by the provider's id of it), or a reply that
opts the number out (STOP). Read from the generic gateway's JSON or Twilio's form posts; the domain acts on them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from bulksign.core.errors import BulksignError


class TextReportKind(StrEnum):
    DELIVERED = "delivered"
    FAILED = "failed"
    #: The number's owner replied STOP (or the like): no more texts to it.
    OPT_OUT = "opt_out"


class SmsReportError(BulksignError):
    """The payload is not a report we understand; ``message`` says what is missing."""


@dataclass(frozen=True)
class TextReport:
    kind: TextReportKind
    #: The provider's id of the text (delivery reports), or None.
    reference: str | None = None
    #: The number that replied (opt-outs), or None.
    phone: str | None = None
    reason: str = ""


#: Replies that opt a number out (carriers' standard words, and Russian ones).
OPT_OUT_WORDS = frozenset({"stop", "stopall", "unsubscribe", "cancel", "end", "quit", "стоп", "отписаться"})
#: Provider states that are not final (the text is still on its way): nothing to record.
_ON_THE_WAY = frozenset({"accepted", "queued", "sending", "sent", "scheduled"})
_DELIVERED = frozenset({"delivered", "read"})
_FAILED = frozenset({"failed", "undelivered", "rejected", "expired"})


def parse_text_report(payload: object) -> TextReport | None:
    """The report in a JSON body (``{"id", "status", "reason"}`` or ``{"from", "text"}``) or Twilio's form fields
    (``MessageSid``/``MessageStatus``/``ErrorCode``, or ``From``/``Body``/``OptOutType``); None for a state on the
    way (queued, sent) or a reply that is no opt-out. SmsReportError for anything else."""
    if not isinstance(payload, Mapping):
        raise SmsReportError("The body must be a JSON object or form fields.")
    fields = {str(k).lower(): v for k, v in payload.items()}
    reply = _text(fields.get("body") if "body" in fields else fields.get("text"))
    sender = _text(fields.get("from"))
    if sender and (reply or fields.get("optouttype")):
        opted = str(fields.get("optouttype") or "").upper() == "STOP" or reply.strip().lower() in OPT_OUT_WORDS
        return TextReport(TextReportKind.OPT_OUT, phone=sender[:20], reason=reply[:100]) if opted else None
    reference = _text(fields.get("messagesid") or fields.get("id") or fields.get("message_id"))
    status = _text(fields.get("messagestatus") or fields.get("status")).lower()
    if not reference or not status:
        raise SmsReportError('Give "id" and "status" (a delivery report), or "from" and "text" (a reply).')
    if len(reference) > 100:
        raise SmsReportError('"id" is longer than 100 characters.')
    if status in _ON_THE_WAY:
        return None
    if status in _DELIVERED:
        return TextReport(TextReportKind.DELIVERED, reference=reference)
    if status in _FAILED:
        code = _text(fields.get("errorcode"))
        said = _text(fields.get("reason") or fields.get("errormessage")) or status
        return TextReport(TextReportKind.FAILED, reference=reference, reason=f"{said} ({code})" if code else said)
    raise SmsReportError(f'Unknown "status" {status[:30]!r}: use delivered or failed.')


def _text(value: object) -> str:
    return value.strip()[:500] if isinstance(value, str) else ""

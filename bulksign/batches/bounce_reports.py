"""What a provider's bounce webhook says: reports read from a generic payload, Postmark's, or Amazon SES's (over SNS),
checked before anything is recorded (``bounces`` records them)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bulksign.core.errors import BulksignError


class BounceKind(StrEnum):
    """What a report says of an address: its mail came back, or its reader marked it as spam."""

    BOUNCE = "bounce"
    COMPLAINT = "complaint"


class BounceFormatError(BulksignError):
    """The payload is not a bounce we understand; ``message`` says what is missing."""


@dataclass(frozen=True)
class BounceReport:
    email: str | None
    message_id: str | None
    reason: str
    kind: BounceKind = BounceKind.BOUNCE
    #: A hard bounce (the address does not exist): the address is suppressed. A soft one is not.
    permanent: bool = True


def parse_bounce(payload: object) -> list[BounceReport]:
    """Reports from a generic ``{"email"|"message_id", "reason", "type", "permanent"}``, a Postmark bounce or
    spam complaint, or an Amazon SES/SNS bounce or complaint notification.

    Any other notification (SES delivery, SNS subscription) gives an empty list.
    """
    if not isinstance(payload, dict):
        raise BounceFormatError("The body must be a JSON object.")
    if payload.get("Type") in ("Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation"):
        if payload["Type"] != "Notification":
            return []
        try:
            payload = json.loads(payload.get("Message") or "")
        except (ValueError, RecursionError):
            raise BounceFormatError("The SNS Message is not JSON.") from None
        if not isinstance(payload, dict):
            raise BounceFormatError("The SNS Message must be a JSON object.")
    if "notificationType" in payload or "eventType" in payload:
        return _ses(payload)
    if "RecordType" in payload or "Email" in payload:
        return _postmark(payload)
    if payload.get("email") or payload.get("message_id"):
        kind = payload.get("type", BounceKind.BOUNCE)
        if kind not in tuple(BounceKind):
            raise BounceFormatError('"type" must be "bounce" or "complaint".')
        permanent = payload.get("permanent", True)
        if not isinstance(permanent, bool):
            raise BounceFormatError('"permanent" must be true or false.')
        return [
            _report(
                payload.get("email"),
                payload.get("message_id"),
                payload.get("reason") or ("marked as spam" if kind == BounceKind.COMPLAINT else "bounced"),
                kind=BounceKind(kind),
                permanent=permanent,
            )
        ]
    raise BounceFormatError('Give "email" or "message_id", and "reason".')


#: Postmark bounce types that say the address itself is dead (the others pass: a full mailbox, a DNS hiccup).
POSTMARK_HARD = frozenset({"HardBounce", "BadEmailAddress", "ManuallyDeactivated"})


def _postmark(payload: dict[str, Any]) -> list[BounceReport]:
    record = payload.get("RecordType", "Bounce")
    if record == "SpamComplaint":
        return [_report(payload.get("Email"), None, "SpamComplaint: marked as spam", kind=BounceKind.COMPLAINT)]
    if record != "Bounce":
        return []
    kind = payload.get("Type", "Bounce")
    reason = payload.get("Details") or payload.get("Description") or kind or "bounced"
    return [
        _report(payload.get("Email"), None, f"{kind}: {reason}", permanent=kind in POSTMARK_HARD or kind == "Bounce")
    ]


def _ses(message: dict[str, Any]) -> list[BounceReport]:
    event = message.get("notificationType") or message.get("eventType")
    mail = message.get("mail") or {}
    message_id = next(
        (
            h.get("value")
            for h in mail.get("headers") or []
            if isinstance(h, dict) and str(h.get("name")).lower() == "message-id"
        ),
        None,
    )
    if event == "Complaint":
        complaint = message.get("complaint") or {}
        reason = f"Complaint: {complaint.get('complaintFeedbackType') or 'marked as spam'}"
        return [
            _report(r.get("emailAddress"), message_id, reason, kind=BounceKind.COMPLAINT)
            for r in complaint.get("complainedRecipients") or []
            if isinstance(r, dict)
        ]
    if event != "Bounce":
        return []
    bounce = message.get("bounce") or {}
    kind = f"{bounce.get('bounceType', 'Bounce')}/{bounce.get('bounceSubType', '')}".rstrip("/")
    # SES says Permanent for a dead address, Transient (mailbox full, …) and Undetermined otherwise.
    permanent = bounce.get("bounceType", "Permanent") == "Permanent"
    return [
        _report(
            r.get("emailAddress"),
            message_id,
            f"{kind}: {r.get('diagnosticCode') or r.get('status') or ''}",
            permanent=permanent,
        )
        for r in bounce.get("bouncedRecipients") or []
        if isinstance(r, dict)
    ]


def _report(
    email: object, message_id: object, reason: object, *, kind: BounceKind = BounceKind.BOUNCE, permanent: bool = True
) -> BounceReport:
    email = email.strip().lower()[:254] if isinstance(email, str) and email.strip() else None
    message_id = message_id.strip()[:255] if isinstance(message_id, str) and message_id.strip() else None
    if not email and not message_id:
        raise BounceFormatError("The bounce names no recipient address or Message-ID.")
    return BounceReport(
        email=email,
        message_id=message_id,
        reason=str(reason).strip()[:1000] or "bounced",
        kind=kind,
        permanent=permanent,
    )

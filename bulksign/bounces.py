"""Bounces reported after delivery (provider webhooks): the request becomes ``bounced`` with the reason."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from .batches import COMPLETED, PARTIALLY_FAILED, refresh_batch_statuses
from .logs import log
from .models import Batch, OutgoingMail, SigningRequest
from .states import Status, transition

logger = logging.getLogger(__name__)

#: A bounce can arrive while the send is being recorded, or after the recipient opened the link.
BOUNCEABLE = (Status.SENDING, Status.SENT, Status.OPENED)


class BounceFormatError(ValueError):
    """The payload is not a bounce we understand; ``message`` says what is missing."""


@dataclass(frozen=True)
class BounceReport:
    email: str | None
    message_id: str | None
    reason: str


@dataclass(frozen=True)
class BounceResult:
    #: Requests moved to ``bounced`` by this report.
    bounced: tuple[int, ...]


def parse_bounce(payload: object) -> list[BounceReport]:
    """Reports from a generic ``{"email"|"message_id", "reason"}``, a Postmark bounce or an Amazon SES/SNS notification.

    A non-bounce notification (SES delivery, SNS subscription) gives an empty list.
    """
    payload = _unwrapped(payload)
    if payload is None:
        return []
    if "notificationType" in payload or "eventType" in payload:
        return _ses(payload)
    if "RecordType" in payload or "Email" in payload:
        if payload.get("RecordType", "Bounce") != "Bounce":
            return []
        reason = payload.get("Details") or payload.get("Description") or payload.get("Type") or "bounced"
        return [_report(payload.get("Email"), None, f"{payload.get('Type', 'Bounce')}: {reason}")]
    if payload.get("email") or payload.get("message_id"):
        return [_report(payload.get("email"), payload.get("message_id"), payload.get("reason") or "bounced")]
    raise BounceFormatError("Give \"email\" or \"message_id\", and \"reason\".")


def count_complaints(payload: object) -> int:
    """Recipients who marked the mail as spam, in an Amazon SES/SNS complaint or a Postmark spam complaint."""
    try:
        payload = _unwrapped(payload)
    except BounceFormatError:
        return 0
    if payload is None:
        return 0
    if (payload.get("notificationType") or payload.get("eventType")) == "Complaint":
        return len((payload.get("complaint") or {}).get("complainedRecipients") or []) or 1
    return 1 if payload.get("RecordType") == "SpamComplaint" else 0


def _unwrapped(payload: object) -> dict | None:
    """The notification itself: an SNS envelope's Message parsed; None for SNS subscription messages."""
    if not isinstance(payload, dict):
        raise BounceFormatError("The body must be a JSON object.")
    if payload.get("Type") in ("Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation"):
        if payload["Type"] != "Notification":
            return None
        try:
            payload = json.loads(payload.get("Message") or "")
        except ValueError:
            raise BounceFormatError("The SNS Message is not JSON.") from None
        if not isinstance(payload, dict):
            raise BounceFormatError("The SNS Message must be a JSON object.")
    return payload


def _ses(message: dict) -> list[BounceReport]:
    if (message.get("notificationType") or message.get("eventType")) != "Bounce":
        return []
    bounce = message.get("bounce") or {}
    mail = message.get("mail") or {}
    message_id = next((h.get("value") for h in mail.get("headers") or [] if str(h.get("name")).lower() == "message-id"),
                      None)
    kind = f"{bounce.get('bounceType', 'Bounce')}/{bounce.get('bounceSubType', '')}".rstrip("/")
    return [_report(r.get("emailAddress"), message_id, f"{kind}: {r.get('diagnosticCode') or r.get('status') or ''}")
            for r in bounce.get("bouncedRecipients") or [] if isinstance(r, dict)]


def _report(email, message_id, reason) -> BounceReport:
    email = email.strip().lower()[:254] if isinstance(email, str) and email.strip() else None
    message_id = message_id.strip()[:255] if isinstance(message_id, str) and message_id.strip() else None
    if not email and not message_id:
        raise BounceFormatError("The bounce names no recipient address or Message-ID.")
    return BounceReport(email=email, message_id=message_id, reason=str(reason).strip()[:1000] or "bounced")


def record_bounce(session: Session, *, report: BounceReport, now: datetime) -> BounceResult:
    """Mark the request the bounced mail was for (by Message-ID, else every waiting request of the address). The caller commits."""
    query = select(OutgoingMail.request_id).where(OutgoingMail.request_id.is_not(None))
    if report.message_id:
        mid = report.message_id if report.message_id.startswith("<") else f"<{report.message_id}>"
        ids = session.scalars(query.where(OutgoingMail.message_id == mid)).all()
    else:
        ids = session.scalars(select(SigningRequest.id).where(
            SigningRequest.email == report.email, SigningRequest.status.in_([s.value for s in BOUNCEABLE]))).all()
    reason = f"The recipient's mail server returned the invitation: {report.reason}"
    won = transition(session, list(ids), frm=BOUNCEABLE, to=Status.BOUNCED, now=now, error_message=reason,
                     details={"reason": report.reason[:500], "source": "webhook"}).won
    if won:
        session.execute(update(OutgoingMail).where(OutgoingMail.request_id.in_(won), OutgoingMail.status == "sent")
                        .values(status="bounced", error=reason))
        batch_ids = set(session.scalars(select(SigningRequest.batch_id).where(SigningRequest.id.in_(won))).all())
        refresh_batch_statuses(session, now=now, batch_ids=batch_ids)
        # A finished batch with a late bounce did not fully succeed after all.
        session.execute(update(Batch).where(Batch.id.in_(batch_ids), Batch.status == COMPLETED)
                        .values(status=PARTIALLY_FAILED))
    log(logger, logging.INFO, "bounce reported", request_ids=list(won), matched=len(ids))
    return BounceResult(bounced=won)

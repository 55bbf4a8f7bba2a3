"""Bounces and complaints reported after delivery (provider webhooks).

A bounce makes the request ``bounced`` with the reason; a hard one also puts the address on the
suppression list. A complaint (the recipient marked the mail as spam) flags the request, stops its
reminders and suppresses the address; the request keeps its status: the recipient may still sign.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import JSON, String, func, insert, literal, select, update
from sqlalchemy.orm import Session

from bulksign.batches.progress import refresh_batch_statuses
from bulksign.batches.states import transition
from bulksign.core.logs import log
from bulksign.core.slicing import slices
from bulksign.mail.mailer import cancel_queued
from bulksign.models import Event, OutgoingMail, SigningRequest, UTCDateTime
from bulksign.models.status import DISPATCHED, Status
from bulksign.recipients.suppressions import suppress

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
    #: ``bounce`` or ``complaint`` (marked as spam).
    kind: str = "bounce"
    #: A hard bounce (the address does not exist): the address is suppressed. A soft one is not.
    permanent: bool = True


@dataclass(frozen=True)
class BounceResult:
    #: Requests moved to ``bounced`` by this report.
    bounced: tuple[int, ...]
    #: Requests flagged as complained by this report.
    complained: tuple[int, ...] = ()


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
        kind = payload.get("type", "bounce")
        if kind not in ("bounce", "complaint"):
            raise BounceFormatError('"type" must be "bounce" or "complaint".')
        permanent = payload.get("permanent", True)
        if not isinstance(permanent, bool):
            raise BounceFormatError('"permanent" must be true or false.')
        return [
            _report(
                payload.get("email"),
                payload.get("message_id"),
                payload.get("reason") or ("marked as spam" if kind == "complaint" else "bounced"),
                kind=kind,
                permanent=permanent,
            )
        ]
    raise BounceFormatError('Give "email" or "message_id", and "reason".')


#: Postmark bounce types that say the address itself is dead (the others pass: a full mailbox, a DNS hiccup).
POSTMARK_HARD = frozenset({"HardBounce", "BadEmailAddress", "ManuallyDeactivated"})


def _postmark(payload: dict) -> list[BounceReport]:
    record = payload.get("RecordType", "Bounce")
    if record == "SpamComplaint":
        return [_report(payload.get("Email"), None, "SpamComplaint: marked as spam", kind="complaint")]
    if record != "Bounce":
        return []
    kind = payload.get("Type", "Bounce")
    reason = payload.get("Details") or payload.get("Description") or kind or "bounced"
    return [
        _report(payload.get("Email"), None, f"{kind}: {reason}", permanent=kind in POSTMARK_HARD or kind == "Bounce")
    ]


def _ses(message: dict) -> list[BounceReport]:
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
            _report(r.get("emailAddress"), message_id, reason, kind="complaint")
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


def _report(email, message_id, reason, *, kind: str = "bounce", permanent: bool = True) -> BounceReport:
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


def _reported_requests(session: Session, report: BounceReport, *, statuses) -> list[int]:
    """The requests a report is about: the one its Message-ID names, else those of the address in ``statuses``."""
    if report.message_id:
        mid = report.message_id if report.message_id.startswith("<") else f"<{report.message_id}>"
        return list(
            session.scalars(
                select(OutgoingMail.request_id).where(
                    OutgoingMail.request_id.is_not(None), OutgoingMail.message_id == mid
                )
            )
        )
    # Providers report the address in their own case (often lowered); the stored one is as the file spelt it.
    return list(
        session.scalars(
            select(SigningRequest.id).where(
                func.lower(SigningRequest.email) == report.email, SigningRequest.status.in_([s.value for s in statuses])
            )
        )
    )


def _suppress_reported(
    session: Session, report: BounceReport, request_ids: list[int], *, source: str, now: datetime
) -> None:
    """Put the report's address (or, given only a Message-ID, its requests' addresses) on the suppression list."""
    # The requests first: their entries name the batch and request the news came from.
    targets = (
        list(
            session.execute(
                select(SigningRequest.email, SigningRequest.batch_id, SigningRequest.id).where(
                    SigningRequest.id.in_(request_ids)
                )
            )
        )
        if request_ids
        else []
    )
    if report.email:
        targets.append((report.email, None, None))
    seen = set()
    for email, batch_id, request_id in targets:
        if email.lower() not in seen:
            seen.add(email.lower())
            suppress(
                session,
                email=email,
                source=source,
                reason=report.reason,
                now=now,
                batch_id=batch_id,
                request_id=request_id,
            )


def record_report(session: Session, *, report: BounceReport, now: datetime) -> BounceResult:
    """Act on one bounce or complaint report. The caller commits."""
    if report.kind == "complaint":
        return record_complaint(session, report=report, now=now)
    return record_bounce(session, report=report, now=now)


def record_complaint(session: Session, *, report: BounceReport, now: datetime) -> BounceResult:
    """Flag the requests a spam complaint is about, stop their reminders and suppress the address. The caller commits."""
    ids = _reported_requests(session, report, statuses=DISPATCHED)
    flagged = list(
        session.scalars(
            update(SigningRequest)
            .where(SigningRequest.id.in_(ids), SigningRequest.complained_at.is_(None))
            .values(complained_at=now)
            .returning(SigningRequest.id)
        )
    )
    if flagged:
        session.execute(
            insert(Event).from_select(
                ["request_id", "batch_id", "type", "created_at", "actor", "details"],
                select(
                    SigningRequest.id,
                    SigningRequest.batch_id,
                    literal("email.complained", String),
                    literal(now, UTCDateTime),
                    literal("system", String),
                    literal({"reason": report.reason[:500], "source": "webhook"}, JSON),
                ).where(SigningRequest.id.in_(flagged)),
            )
        )
        cancel_queued(session, request_ids=flagged, kinds=["reminder"])
    _suppress_reported(session, report, ids, source="complaint", now=now)
    log(logger, logging.INFO, "complaint reported", request_ids=flagged, matched=len(ids))
    return BounceResult(bounced=(), complained=tuple(flagged))


def record_bounce(session: Session, *, report: BounceReport, now: datetime) -> BounceResult:
    """Mark the request the bounced mail was for (by Message-ID, else every waiting request of the address). The caller commits."""
    ids = _reported_requests(session, report, statuses=BOUNCEABLE)
    if report.permanent:
        _suppress_reported(session, report, ids, source="bounce", now=now)
    reason = f"The recipient's mail server returned the invitation: {report.reason}"
    won = transition(
        session,
        list(ids),
        frm=BOUNCEABLE,
        to=Status.BOUNCED,
        now=now,
        error_message=reason,
        details={"reason": report.reason[:500], "source": "webhook"},
    ).won
    batch_ids: set[int] = set()
    for part in slices(won):
        session.execute(
            update(OutgoingMail)
            .where(OutgoingMail.request_id.in_(part), OutgoingMail.status == "sent")
            .values(status="bounced", error=reason)
        )
        batch_ids.update(session.scalars(select(SigningRequest.batch_id).where(SigningRequest.id.in_(part))))
    if won:
        # A batch awaiting signatures with a late bounce did not fully succeed after all (or has nobody left).
        refresh_batch_statuses(session, now=now, batch_ids=batch_ids)
    log(logger, logging.INFO, "bounce reported", request_ids=list(won), matched=len(ids))
    return BounceResult(bounced=won)

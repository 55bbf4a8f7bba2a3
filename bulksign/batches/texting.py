"""Texts in a batch's life: which channel a request is reached by, what its texts' states are called, the batch's
cap on texts, and the fallback from a bounced mail to a text (and from a failed text to a mail).
docs/architecture/batches.md, "Text messages"."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from flask_babel import lazy_gettext as _l
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from bulksign.core.logs import log
from bulksign.core.slicing import slices
from bulksign.mail.mailer import queue_mails
from bulksign.models import Batch, Event, OutgoingMail, SigningRequest
from bulksign.models.batches import Reach
from bulksign.models.mail import Channel, MailKind, MailStatus, TextReason
from bulksign.models.status import WAITING_FOR_RECIPIENT
from bulksign.recipients.phone_suppressions import barred_among

logger = logging.getLogger(__name__)

#: The batch's channel in words (the new-batch page, the batch page).
REACH_LABELS = {
    Reach.MAIL: _l("Email only"),
    Reach.TEXT_WITHOUT_ADDRESS: _l("Email, or a text message when a row has a phone and no address"),
    Reach.TEXT_ON_BOUNCE: _l("Email, and a text message when the email bounces"),
    Reach.TEXT_BOTH: _l("Email; text messages for rows without an address and when an email bounces"),
}


#: A text's state in words (its ``MailStatus``).
TEXT_STATE_LABELS = {
    MailStatus.QUEUED: _l("waiting to be sent"),
    MailStatus.SENT: _l("sent"),
    MailStatus.DELIVERED: _l("delivered"),
    MailStatus.FAILED: _l("failed"),
    MailStatus.CANCELLED: _l("not sent"),
    MailStatus.BOUNCED: _l("failed"),
}
#: Why the request's link went by text, in words.
TEXT_REASON_LABELS = {
    TextReason.NO_ADDRESS: _l("By text"),
    TextReason.MAIL_BOUNCED: _l("Mail bounced → sent by text"),
}


@dataclass(frozen=True)
class TextState:
    """The newest text of a request: why it went by text, where it stands, and what went wrong."""

    reason: TextReason
    status: MailStatus
    error: str | None
    #: The failed text's link went again by mail (``MailKind.LINK_AGAIN``).
    mailed_instead: bool = False

    @property
    def label(self) -> str:
        """ "Mail bounced → sent by text · delivered", in the reader's language."""
        if self.mailed_instead:
            return str(_l("Text failed → sent by mail"))
        return f"{TEXT_REASON_LABELS[self.reason]} · {TEXT_STATE_LABELS[self.status]}"


def channel_cells(state: TextState | None) -> tuple[str, str | None, str | None]:
    """A request's ``channel`` (``mail`` or ``text``), its newest text's state and why it went by text, as the API
    and the CSV export give them (a failed text's link mailed instead: ``mail``)."""
    if state is None:
        return "mail", None, None
    return ("mail" if state.mailed_instead else "text"), state.status.value, state.reason.value


def text_states(session: Session, *, request_ids: Sequence[int]) -> dict[int, TextState]:
    """Each request among ``request_ids`` that was texted → the state of its newest text (a few queries)."""
    found: dict[int, TextState] = {}
    mailed: set[int] = set()
    for part in slices(sorted(set(request_ids))):
        for request_id, reason, status, error, channel in session.execute(
            select(
                OutgoingMail.request_id,
                OutgoingMail.text_reason,
                OutgoingMail.status,
                OutgoingMail.error,
                OutgoingMail.channel,
            )
            .where(
                OutgoingMail.request_id.in_(part),
                (OutgoingMail.channel == Channel.TEXT) | (OutgoingMail.kind == MailKind.LINK_AGAIN),
            )
            .order_by(OutgoingMail.id)
        ):
            if channel == Channel.MAIL:
                mailed.add(request_id)
            else:
                found[request_id] = TextState(TextReason(reason), MailStatus(status), error)
    return {i: replace(state, mailed_instead=i in mailed) for i, state in found.items()}


def reserve_text(session: Session, *, mail: OutgoingMail, now: datetime) -> str | None:
    """Count the text ``mail`` against its batch's cap before it goes (compare-and-set, so workers never pass it
    together); None when it may go, else why not (the batch then says the cap stopped texts). Committed."""
    if mail.batch_id is None:
        return None
    won = session.execute(
        update(Batch)
        .where(Batch.id == mail.batch_id, Batch.texts_sent < func.coalesce(Batch.text_cap, 0))
        .values(texts_sent=Batch.texts_sent + 1)
        .returning(Batch.id)
    ).first()
    if won is None:
        cap = session.scalar(select(Batch.text_cap).where(Batch.id == mail.batch_id)) or 0
        session.execute(
            update(Batch)
            .where(Batch.id == mail.batch_id, Batch.text_cap_reached_at.is_(None))
            .values(text_cap_reached_at=now)
        )
        session.commit()
        log(logger, logging.WARNING, "text not sent: the batch's cap is reached", batch_id=mail.batch_id, cap=cap)
        return f"Not sent: the batch's limit of {cap} text messages is reached; raise it to send more."
    session.commit()
    return None


def release_text(session: Session, *, mail: OutgoingMail) -> None:
    """A text counted by ``reserve_text`` did not go (the provider refused it or was out of reach): uncounted.
    The caller commits."""
    if mail.batch_id is not None:
        session.execute(
            update(Batch).where(Batch.id == mail.batch_id, Batch.texts_sent > 0).values(texts_sent=Batch.texts_sent - 1)
        )


def texts_not_sent_for_cap(session: Session, *, batch_id: int) -> int:
    """How many of the batch's texts the cap stopped (the batch page says it)."""
    return (
        session.scalar(
            select(func.count())
            .select_from(OutgoingMail)
            .where(
                OutgoingMail.batch_id == batch_id,
                OutgoingMail.channel == Channel.TEXT,
                OutgoingMail.status == MailStatus.FAILED,
                OutgoingMail.error.like("Not sent: the batch's limit of %"),
            )
        )
        or 0
    )


#: The event of a bounced mail whose link went again by text, and of a failed text whose link went again by mail.
FELL_BACK_TO_TEXT = "text.fallback"
FELL_BACK_TO_MAIL = "mail.fallback"
#: Mails whose bounce sends their link by text: the recipient's invitation and reminders.
LINK_MAILS = frozenset({MailKind.INVITATION, MailKind.REMINDER})


def _fallback_phone(session: Session, request: SigningRequest) -> str | None:
    """The phone a bounced mail of ``request`` falls back to: its row's, when the batch texts on a bounce and the
    number has not opted out; else None."""
    if not Reach(request.batch.channel).on_bounce or not request.phone:
        return None
    return None if barred_among(session, [request.phone]) else request.phone


def text_after_refusal(session: Session, *, mail: OutgoingMail, reason: str, now: datetime) -> OutgoingMail | None:
    """A recipient's invitation or reminder refused at sending: when its batch texts on a bounce and its row has a
    phone, the same link as a text of the same kind (an invitation's request then goes out by it), recorded as an
    event; None when it does not fall back (the request bounces as before). The caller commits and sends it."""
    if mail.kind not in LINK_MAILS or mail.party_id is not None or mail.request_id is None:
        return None
    request = session.get_one(SigningRequest, mail.request_id)
    phone = _fallback_phone(session, request)
    if phone is None:
        return None
    key = f"text-{mail.message_id.strip('<>').split('@', 1)[0]}"
    text_id = _queue_text(session, request, key=key, kind=MailKind(mail.kind), phone=phone, now=now)
    record_fallback(
        session, request, kind=FELL_BACK_TO_TEXT, details=_bounced(mail.kind, mail.to_email, reason), now=now
    )
    return session.get_one(OutgoingMail, text_id)


def texts_after_reports(
    session: Session, *, request_ids: Sequence[int], email: str, reason: str, now: datetime
) -> dict[int, int]:
    """Requests still waiting whose recipient's mail (to ``email``) a provider reported bounced: the link again by
    text to each row's phone where the batch texts on a bounce (``LINK_AGAIN``), recorded as events. The ids of
    the requests that fell back (they do not bounce) → the texts to send."""
    fell: dict[int, int] = {}
    for request in session.scalars(
        select(SigningRequest).where(
            SigningRequest.id.in_(list(request_ids)),
            SigningRequest.status.in_([s.value for s in WAITING_FOR_RECIPIENT]),
            func.lower(SigningRequest.email) == email,
        )
    ):
        phone = _fallback_phone(session, request)
        if phone is None:
            continue
        key = f"text-again-{request.id}-{(request.token_nonce or '')[:12]}"
        text_id = _queue_text(session, request, key=key, kind=MailKind.LINK_AGAIN, phone=phone, now=now)
        details = _bounced(MailKind.INVITATION, email, reason)
        record_fallback(session, request, kind=FELL_BACK_TO_TEXT, details=details, now=now)
        fell[request.id] = text_id
    return fell


def _queue_text(
    session: Session, request: SigningRequest, *, key: str, kind: MailKind, phone: str, now: datetime
) -> int:
    """The id of the text of ``kind`` queued (once per ``key``) with the request's link, in place of a bounced mail."""
    [text_id] = queue_mails(
        session,
        [
            {
                "key": key,
                "kind": kind,
                "to_email": "",
                "subject": "",
                "request_id": request.id,
                "batch_id": request.batch_id,
                "channel": Channel.TEXT,
                "to_phone": phone,
                "text_reason": TextReason.MAIL_BOUNCED,
            }
        ],
        now=now,
    )
    return text_id


def _bounced(kind: str, email: str, reason: str) -> dict[str, str]:
    return {"kind": str(kind), "email": email.lower(), "reason": reason[:500]}


def record_fallback(
    session: Session, request: SigningRequest, *, kind: str, details: dict[str, Any], now: datetime
) -> None:
    """The event of a link gone by the other channel (``FELL_BACK_TO_TEXT`` or ``FELL_BACK_TO_MAIL``)."""
    session.add(
        Event(
            request_id=request.id,
            batch_id=request.batch_id,
            type=kind,
            created_at=now,
            actor="system",
            details=details,
        )
    )
    log(logger, logging.INFO, "link sent by the other channel", request_id=request.id, event=kind)

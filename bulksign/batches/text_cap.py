"""Staff change a batch's cap on text messages after it was made: never below what was sent already, audited as
an event; texts the old cap held back go out when it is raised (docs/architecture/batches.md, "Text messages")."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from bulksign.batches.batch_settings import MAX_TEXT_CAP
from bulksign.batches.progress import REOPENABLE
from bulksign.batches.states import move_batches, transition
from bulksign.batches.texting import HELD_BY_CAP
from bulksign.core.errors import BulksignError
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.models import Batch, Event, OutgoingMail, SigningRequest, User
from bulksign.models.batches import Reach
from bulksign.models.mail import Channel, MailKind, MailStatus
from bulksign.models.status import BatchStatus, Status
from bulksign.people.access import batch_for_action

logger = logging.getLogger(__name__)

#: The event of a changed cap (details: ``from``, ``to``).
CAP_CHANGED = "batch.text_cap"


class TextCapError(BulksignError):
    """The cap cannot be set so; ``message`` says why."""

    status = 422


@dataclass(frozen=True)
class CapChange:
    cap: int
    #: Texts the old cap held back, queued again now: to send.
    released: tuple[int, ...]


def read_cap(value: object) -> int:
    """The cap as given (form text or a JSON number); TextCapError unless a whole number within range."""
    text = str(value).strip() if isinstance(value, str | int) and not isinstance(value, bool) else ""
    if not (text.isascii() and text.isdigit()) or len(text) > 7 or int(text) > MAX_TEXT_CAP:
        raise TextCapError(
            N_("The limit of text messages must be a whole number from 0 to %(max)s.", max=f"{MAX_TEXT_CAP:,}")
        )
    return int(text)


def change_text_cap(session: Session, *, batch_id: int, cap: int, user: User, now: datetime) -> CapChange:
    """Set the batch's cap by compare-and-set (refused below the texts already sent), record who did it, and queue
    again the texts the old cap held back, as many as the new one has room for. The caller commits and sends."""
    batch = batch_for_action(session, batch_id=batch_id, user=user)
    if Reach(batch.channel) is Reach.MAIL:
        raise TextCapError(N_("This batch only mails: it sends no text messages."))
    if batch.status == BatchStatus.CANCELLED:
        raise TextCapError(N_("The batch is cancelled: it sends no more text messages."))
    before = batch.text_cap or 0
    sent = session.execute(
        update(Batch)
        .where(Batch.id == batch_id, Batch.texts_sent <= cap)
        .values(text_cap=cap, text_cap_reached_at=None)
        .returning(Batch.texts_sent)
    ).scalar()
    if sent is None:
        session.refresh(batch)
        raise TextCapError(
            N_(
                "%(sent)s text messages were sent already: the limit cannot be lower than that.",
                sent=f"{batch.texts_sent:,}",
            )
        )
    session.add(
        Event(
            batch_id=batch_id,
            type=CAP_CHANGED,
            created_at=now,
            actor=f"user:{user.id}",
            details={"from": before, "to": cap},
        )
    )
    released = _release_held(session, batch_id=batch_id, room=cap - sent, now=now, actor=f"user:{user.id}")
    log(logger, logging.INFO, "text cap changed", batch_id=batch_id, user_id=user.id, cap=cap, released=len(released))
    return CapChange(cap=cap, released=tuple(released))


def _release_held(session: Session, *, batch_id: int, room: int, now: datetime, actor: str) -> list[int]:
    """Up to ``room`` of the batch's texts the cap held back, oldest first, queued again; an invitation's request,
    failed for it, goes back to ``generated`` (one staff retried meanwhile has its own new invitation: left)."""
    if room <= 0:
        return []
    held = session.scalars(
        select(OutgoingMail)
        .outerjoin(SigningRequest, SigningRequest.id == OutgoingMail.request_id)
        .where(
            OutgoingMail.batch_id == batch_id,
            OutgoingMail.channel == Channel.TEXT,
            OutgoingMail.status == MailStatus.FAILED,
            OutgoingMail.error.like(HELD_BY_CAP),
            (OutgoingMail.kind != MailKind.INVITATION) | (SigningRequest.status == Status.FAILED),
        )
        .order_by(OutgoingMail.id)
        .limit(room)
    ).all()
    invitations = [m.request_id for m in held if m.kind == MailKind.INVITATION and m.request_id is not None]
    moved = set(
        transition(
            session, invitations, frm=Status.FAILED, to=Status.GENERATED, now=now, actor=actor, error_message=None
        ).won
    )
    released = [m for m in held if m.kind != MailKind.INVITATION or m.request_id in moved]
    for mail in released:
        mail.status, mail.error, mail.attempts = MailStatus.QUEUED, None, 0
    if moved:
        move_batches(session, batch_id, frm=REOPENABLE, to=BatchStatus.PROCESSING, finished_at=None, settled_at=None)
    return [m.id for m in released]

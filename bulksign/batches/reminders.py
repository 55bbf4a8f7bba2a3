"""Automatic reminders on each batch's schedule, for recipients and other parties, each mailed exactly once (the
``reminder_count`` compare-and-set is the guard). docs/architecture/batches.md."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from flask import current_app
from sqlalchemy import ColumnElement, Exists, and_, exists, func, or_, select, update
from sqlalchemy.orm import Session

from bulksign.batches.reminder_mails import PARTY_WAITING, ReminderMails
from bulksign.core.localtime import zone_of
from bulksign.core.logs import log
from bulksign.models import RECIPIENT_ROLE, Batch, Party, SigningRequest
from bulksign.models.parties import PartyStatus
from bulksign.models.status import WAITING_FOR_RECIPIENT
from bulksign.signing import digests

logger = logging.getLogger(__name__)

#: Used when a batch has no schedule of its own.
DEFAULT_REMINDER_DAYS = (2, 4)
#: Upper bound of ``batch.max_reminders``, whatever was stored.
MAX_REMINDERS_LIMIT = 5


@dataclass(frozen=True)
class ReminderTickResult:
    #: Reminder mails written by this tick.
    queued: int
    #: Due reminders held back because their batch is in its quiet hours.
    waiting_quiet_hours: int = 0
    #: False when the time budget ran out; the next tick continues.
    complete: bool = True
    mail_ids: tuple[int, ...] = field(default=(), repr=False)

    def __str__(self) -> str:
        return f"{self.queued} reminders queued, {self.waiting_quiet_hours} waiting for the end of quiet hours"


def reminder_schedule(batch: Batch) -> tuple[float, ...]:
    """The days after the invitation on which automatic reminders are due, capped by the batch's maximum."""
    raw = DEFAULT_REMINDER_DAYS if batch.reminder_days is None else batch.reminder_days
    days = sorted({float(d) for d in raw if isinstance(d, (int, float)) and not isinstance(d, bool) and d > 0})
    cap = max(0, min(MAX_REMINDERS_LIMIT, 3 if batch.max_reminders is None else batch.max_reminders))
    return tuple(days[:cap])


def in_quiet_hours(batch: Batch, *, now: datetime) -> bool:
    """Whether ``now`` falls in the batch's quiet hours (local to its time zone; 20→8 spans midnight)."""
    start, end = batch.quiet_hours_start, batch.quiet_hours_end
    if start is None or end is None or start == end:
        return False
    hour = now.astimezone(zone_of(batch)).hour
    return start <= hour < end if start < end else (hour >= start or hour < end)


def queue_due_reminders(
    session: Session,
    *,
    now: datetime,
    page_size: int = 2000,
    on_page: Callable[[list[int]], None] | None = None,
    time_budget_seconds: float = 300.0,
) -> ReminderTickResult:
    """Advance and queue every automatic reminder due at ``now``, a page of requests at a time.

    ``on_page`` runs after each page with its mail ids (the periodic job commits and enqueues
    there, so locks are short and a crash loses nothing it has not committed); without it the
    caller commits once at the end.
    """
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    digest_every = timedelta(hours=app.config["COUNTERSIGN_DIGEST_HOURS"])
    started = time.monotonic()
    has_waiting = exists().where(SigningRequest.batch_id == Batch.id, SigningRequest.status.in_(WAITING_FOR_RECIPIENT))
    batch_ids = session.scalars(select(Batch.id).where(has_waiting).order_by(Batch.id)).all()
    queued, waiting = 0, 0
    all_ids: list[int] = []
    for batch_id in batch_ids:
        batch = session.get_one(Batch, batch_id)
        schedule = reminder_schedule(batch)
        if not schedule:
            continue
        if in_quiet_hours(batch, now=now):
            waiting += _count_due(session, batch=batch, schedule=schedule, now=now)
            continue
        mails = ReminderMails(session, batch, app)
        # Highest number first: a request that missed a reminder (scheduler down) gets only the latest one.
        for number in range(len(schedule), 0, -1):
            before = now - timedelta(days=schedule[number - 1])
            rounds = (
                (
                    SigningRequest,
                    _due(batch_id, number=number, invited_before=before, now=now),
                    mails.returning,
                    mails.queue,
                ),
                (
                    Party,
                    _party_due(batch_id, number=number, invited_before=before, now=now),
                    (Party.id,),
                    mails.queue_parties,
                ),
            )
            for model, due, returning, queue in rounds:
                after = 0
                while True:
                    if time.monotonic() - started > time_budget_seconds:
                        log(logger, logging.WARNING, "reminder tick stopped at its time budget", queued=queued)
                        return ReminderTickResult(queued, waiting, False, tuple(all_ids))
                    page = (
                        select(model.id)
                        .where(*due, model.id > after)
                        .order_by(model.id)
                        .limit(page_size)
                        .scalar_subquery()
                    )
                    # Repeating ``due`` outside the page is the compare-and-set: PostgreSQL re-checks it on rows
                    # another scheduler changed meanwhile, and skips them.
                    advance = (
                        update(model)
                        .where(model.id.in_(page), *due)
                        .values(reminder_count=number, last_reminder_at=now)
                        .execution_options(synchronize_session=False)
                    )
                    won = session.execute(advance.returning(*returning)).all()
                    if not won:
                        break  # nothing left, or the rest was taken by another scheduler
                    mail_ids = queue(won, now=now, user=None)
                    after = max(row.id for row in won)
                    queued += len(mail_ids)
                    all_ids.extend(mail_ids)
                    if on_page:
                        on_page(mail_ids)
        # The parties the digest serves, left out of the rounds above, hear again through their digest.
        mail_ids = digests.due_reminders(session, batch_id=batch_id, schedule=schedule, now=now, every=digest_every)
        queued += len(mail_ids)
        all_ids.extend(mail_ids)
        if on_page:
            on_page(mail_ids)
    if queued or waiting:
        log(logger, logging.INFO, "reminders queued", queued=queued, waiting_quiet_hours=waiting)
    return ReminderTickResult(queued, waiting, True, tuple(all_ids))


def _due(batch_id: int, *, number: int, invited_before: datetime, now: datetime) -> tuple[ColumnElement[bool], ...]:
    """Conditions under which reminder ``number`` is due; also the compare-and-set guard of the UPDATE."""
    return (
        SigningRequest.batch_id == batch_id,
        SigningRequest.status.in_(WAITING_FOR_RECIPIENT),
        SigningRequest.sent_at <= invited_before,
        SigningRequest.reminder_count < number,
        # A recipient who marked our mail as spam is not reminded (the send would be refused anyway).
        SigningRequest.complained_at.is_(None),
        or_(SigningRequest.expires_at.is_(None), SigningRequest.expires_at > now),
        ~recipient_has_signed(),
        ~recipient_not_invited(),
    )


def parties_reminded_per_document(batch_id: int, *, now: datetime) -> tuple[ColumnElement[bool], ...]:
    """The conditions on parties (not the recipient) a reminder per document may go to: invited or opened, with a
    live link, on a request still waiting before its deadline, not served by a countersigner's digest. The one
    place that says it, for the automatic and the manual reminders."""
    request_open = exists().where(
        SigningRequest.id == Party.request_id,
        SigningRequest.status.in_(WAITING_FOR_RECIPIENT),
        or_(SigningRequest.expires_at.is_(None), SigningRequest.expires_at > now),
    )
    return (
        Party.batch_id == batch_id,
        Party.role != RECIPIENT_ROLE,
        Party.status.in_(PARTY_WAITING),
        Party.token_hash.is_not(None),
        ~digests.served_by_digest(),
        request_open,
    )


def _party_due(
    batch_id: int, *, number: int, invited_before: datetime, now: datetime
) -> tuple[ColumnElement[bool], ...]:
    """Conditions under which a party's reminder ``number`` is due, counted from its own invitation; also the
    compare-and-set guard of its UPDATE."""
    return (
        *parties_reminded_per_document(batch_id, now=now),
        Party.invited_at <= invited_before,
        Party.reminder_count < number,
    )


def recipient_has_signed() -> Exists:
    """Of a document several sign, the recipient signed already and waits for the others: nothing to remind of."""
    return _recipient_is(PartyStatus.SIGNED)


def recipient_not_invited() -> Exists:
    """Of a document several sign, the recipient signs after others and its step has not started: it has no link
    to be reminded of yet."""
    return _recipient_is(PartyStatus.WAITING)


def _recipient_is(status: PartyStatus) -> Exists:
    return exists().where(Party.request_id == SigningRequest.id, Party.role == RECIPIENT_ROLE, Party.status == status)


def _count_due(session: Session, *, batch: Batch, schedule: tuple[float, ...], now: datetime) -> int:
    """How many requests and parties of the batch have some reminder due at ``now``."""
    count = 0
    for model, due in ((SigningRequest, _due), (Party, _party_due)):
        any_due = or_(
            *(
                and_(*due(batch.id, number=n, invited_before=now - timedelta(days=days), now=now))
                for n, days in enumerate(schedule, start=1)
            )
        )
        count += session.scalar(select(func.count()).select_from(model).where(any_due)) or 0
    return count

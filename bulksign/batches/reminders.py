"""Reminders: automatic ones on the batch's schedule, manual ones from staff; each one mailed exactly once.

The only guard is the request's ``reminder_count``, advanced by a compare-and-set UPDATE before
the mail row is written (in the same transaction). Two schedulers, a retried job and a staff
click all race on that UPDATE; the loser sees the row already advanced and queues nothing.
Reminder mails are keyed by request, link nonce and number: a resend (new link) starts a fresh
series, and a crash after the commit re-finds the same mail row.

The other parties of a document several sign (issue 29) are reminded the same way, each on its own row: the
party's ``reminder_count`` is the guard, its schedule counts from its own ``invited_at``, and its mail (its own
link, the template's reminder text with its name) is keyed by party, link nonce and number. The recipient's
reminders are the request's, as before. A party the countersigner's digest serves gets none per document: the
same tick sends its digest again when one of its documents comes due (``digests.due_reminders``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from flask import Flask, current_app
from flask_mail import Message
from sqlalchemy import JSON, String, and_, cast, exists, func, insert, literal, or_, select, update
from sqlalchemy.orm import Session, selectinload

from bulksign.core.localtime import zone_of
from bulksign.core.logs import log
from bulksign.core.tokens import signing_token
from bulksign.doc_templates.jinja_sandbox import render_text, text_sandbox
from bulksign.doc_templates.mail_texts import DEFAULT_REMINDER_BODY, DEFAULT_REMINDER_SUBJECT, mail_text
from bulksign.doc_templates.variables import extract_variables
from bulksign.mail.mail_headers import one_line
from bulksign.mail.mailer import MailNotNeeded, builder, message_id_sql, queue_mails, queue_mails_from
from bulksign.models import RECIPIENT_ROLE, Batch, Event, OutgoingMail, Party, SigningRequest, User, UTCDateTime
from bulksign.models.parties import PartyStatus
from bulksign.models.status import WAITING_FOR_RECIPIENT
from bulksign.signing import digests
from bulksign.signing.invitations import html_body, mail_context, tracking_url
from bulksign.signing.links import current_token
from bulksign.signing.parties import party_token
from bulksign.signing.routing import party_context

logger = logging.getLogger(__name__)

KIND = "reminder"
#: A reminder to a party other than the recipient, with its own link.
PARTY_KIND = "party_reminder"
#: The parties that can still act on their link: their step has started and they have not signed or declined.
PARTY_WAITING = (PartyStatus.INVITED.value, PartyStatus.OPENED.value)
#: Used when a batch has no schedule of its own.
DEFAULT_REMINDER_DAYS = (2, 4)
#: Upper bound of ``batch.max_reminders``, whatever was stored.
MAX_REMINDERS_LIMIT = 5
#: Mail variables that are the same for every request of a batch.
_BATCH_VARIABLES = {"document_name", "sender"}


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


class ReminderMails:
    """Writes reminder mail rows for requests whose counter this transaction advanced (and events for manual ones)."""

    def __init__(self, session: Session, batch: Batch, app: Flask):
        self.session, self.batch, self.app = session, batch, app
        source = mail_text(batch.template_version.reminder_subject or DEFAULT_REMINDER_SUBJECT, language=batch.language)
        self.subject = text_sandbox.from_string(source)
        #: The subject when it is the same for every recipient (the default one is): then no row is read.
        self.batch_subject = None
        if set(extract_variables(source)) <= _BATCH_VARIABLES:
            # No per-recipient variable is used, so an empty recipient renders the same subject.
            nobody = _RowView(SimpleNamespace(data={}, name="", email=""), batch)
            context = mail_context(nobody, token="", app=app, deadline=datetime.now(UTC))
            self.batch_subject = one_line(text=self.subject.render(context))

    @property
    def returning(self) -> tuple:
        """What the advancing UPDATE must return for ``queue``: only ids when the subject is the batch's."""
        return (SigningRequest.id,) if self.batch_subject is not None else _RETURNED

    def queue(self, rows: Sequence, *, now: datetime, user: User | None) -> list[int]:
        """Mail rows for requests just advanced (``rows`` as ``returning`` says); a manual reminder also gets
        an event naming the user; for automatic ones the outgoing-mail log is the record."""
        if not rows:
            return []
        chosen = SigningRequest.id.in_([row.id for row in rows])
        if self.batch_subject is not None:
            # Set-based: the database writes the keys from the counters the UPDATE just set.
            ids = queue_mails_from(
                self.session,
                select(
                    message_id_sql(_REMINDER_KEY_SQL),
                    SigningRequest.email,
                    literal(self.batch_subject, String),
                    SigningRequest.id,
                    SigningRequest.batch_id,
                    literal(now, UTCDateTime),
                ).where(chosen),
                kind=KIND,
            )
        else:
            ids = queue_mails(self.session, [self._personal(row, now=now) for row in rows], now=now)
        if user is not None:
            self.session.execute(
                insert(Event).from_select(
                    ["request_id", "batch_id", "type", "created_at", "actor", "details"],
                    select(
                        SigningRequest.id,
                        SigningRequest.batch_id,
                        literal("reminder.manual", String),
                        literal(now, UTCDateTime),
                        literal(f"user:{user.id}", String),
                        literal({}, JSON),
                    ).where(chosen),
                )
            )
        return ids

    def queue_parties(self, rows: Sequence, *, now: datetime, user: User | None) -> list[int]:
        """Mail rows for parties (not the recipient) whose counter this transaction advanced (``rows`` hold their
        ``id``): each to the party's address with its own link; a manual one also gets an event naming the user
        and the role."""
        if not rows:
            return []
        parties = self.session.scalars(
            select(Party)
            .where(Party.id.in_([row.id for row in rows]))
            .options(selectinload(Party.request))
            .order_by(Party.id)
            .execution_options(populate_existing=True)
        ).all()
        secret = self.app.config["SECRET_KEY"]
        mails = []
        for party in parties:
            context = party_context(
                party.request, party, token=party_token(party, secret=secret), app=self.app, now=now
            )
            mails.append(
                {
                    "key": party_reminder_key(party.id, party.token_nonce, party.reminder_count),
                    "kind": PARTY_KIND,
                    "to_email": party.email,
                    "subject": one_line(text=self.subject.render(context)),
                    "request_id": party.request_id,
                    "batch_id": self.batch.id,
                }
            )
            if user is not None:
                self.session.add(
                    Event(
                        request_id=party.request_id,
                        batch_id=party.batch_id,
                        type="reminder.manual",
                        created_at=now,
                        actor=f"user:{user.id}",
                        details={"role": party.role},
                    )
                )
        return queue_mails(self.session, mails, now=now)

    def _personal(self, row, *, now: datetime) -> dict:
        """``queue_mails`` keywords of one reminder whose subject names the recipient."""
        token = signing_token(secret=self.app.config["SECRET_KEY"], request_id=row.id, nonce=row.token_nonce or "")
        context = mail_context(_RowView(row, self.batch), token=token, app=self.app, deadline=row.expires_at or now)
        return {
            "key": reminder_key(row.id, row.token_nonce, row.reminder_count),
            "kind": KIND,
            "to_email": row.email,
            "subject": one_line(text=self.subject.render(context)),
            "request_id": row.id,
            "batch_id": self.batch.id,
        }


@dataclass(frozen=True)
class _RowView:
    """A RETURNING row seen as the request ``invitations.mail_context`` expects, without loading the ORM object."""

    row: object
    batch: Batch

    def __getattr__(self, name):
        return getattr(self.row, name)


def reminder_key(request_id: int, nonce: str | None, number: int) -> str:
    return f"reminder-{request_id}-{(nonce or '')[:12]}-{number}"


def party_reminder_key(party_id: int, nonce: str | None, number: int) -> str:
    return f"party-reminder-{party_id}-{(nonce or '')[:12]}-{number}"


#: ``reminder_key`` computed by the database from a request row (after its counter was advanced).
_REMINDER_KEY_SQL = (
    literal("reminder-", String)
    + cast(SigningRequest.id, String)
    + literal("-", String)
    + func.substr(func.coalesce(SigningRequest.token_nonce, ""), 1, 12)
    + literal("-", String)
    + cast(SigningRequest.reminder_count, String)
)


_RETURNED = (
    SigningRequest.id,
    SigningRequest.email,
    SigningRequest.name,
    SigningRequest.data,
    SigningRequest.token_nonce,
    SigningRequest.expires_at,
    SigningRequest.reminder_count,
)


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
    app = current_app._get_current_object()
    digest_every = timedelta(hours=app.config["COUNTERSIGN_DIGEST_HOURS"])
    started = time.monotonic()
    has_waiting = exists().where(SigningRequest.batch_id == Batch.id, SigningRequest.status.in_(WAITING_FOR_RECIPIENT))
    batch_ids = session.scalars(select(Batch.id).where(has_waiting).order_by(Batch.id)).all()
    queued, waiting, all_ids = 0, 0, []
    for batch_id in batch_ids:
        batch = session.get(Batch, batch_id)
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


def _due(batch_id: int, *, number: int, invited_before: datetime, now: datetime) -> tuple:
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


def parties_reminded_per_document(batch_id: int, *, now: datetime) -> tuple:
    """The parties of the batch (not the recipient, whose reminders are the request's) that a reminder per document
    may go to: invited or opened, with a live link, on a request still waiting whose deadline has not passed, and
    not served by the countersigner's digest (``digests.served_by_digest``: its digest reminds it, even of a
    document it opened on its own page). The one place that says who is reminded per document; the automatic and
    the manual reminders follow."""
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


def _party_due(batch_id: int, *, number: int, invited_before: datetime, now: datetime) -> tuple:
    """Conditions under which a party's reminder ``number`` is due, counted from its own invitation; also the
    compare-and-set guard of its UPDATE."""
    return (
        *parties_reminded_per_document(batch_id, now=now),
        Party.invited_at <= invited_before,
        Party.reminder_count < number,
    )


def recipient_has_signed():
    """Of a document several sign, the recipient signed already and waits for the others: nothing to remind of."""
    return _recipient_is(PartyStatus.SIGNED)


def recipient_not_invited():
    """Of a document several sign, the recipient signs after others and its step has not started: it has no link
    to be reminded of yet."""
    return _recipient_is(PartyStatus.WAITING)


def _recipient_is(status: PartyStatus):
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
        count += session.scalar(select(func.count()).select_from(model).where(any_due))
    return count


def _reminder_message(mail: OutgoingMail, *, batch: Batch, context: dict, pixel: str, app: Flask) -> Message:
    """The reminder text of the batch's template rendered with ``context`` (whose ``signing_link`` it carries)."""
    body = render_text(
        mail_text(batch.template_version.reminder_body or DEFAULT_REMINDER_BODY, language=batch.language), context
    )
    message = Message(
        subject=mail.subject,
        recipients=[mail.to_email],
        body=body,
        html=html_body(body, link=context["signing_link"], pixel=pixel, language=batch.language),
        sender=app.config["MAIL_DEFAULT_SENDER"],
        reply_to=batch.reply_to or (batch.created_by.email if batch.created_by else None),
    )
    message.msgId = mail.message_id
    return message


@builder(KIND)
def build_reminder(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """The reminder as it goes out: its own text, the request's current link, the pixel, the row's Message-ID."""
    request = session.get(SigningRequest, mail.request_id)
    if request is None or request.status not in WAITING_FOR_RECIPIENT:
        raise MailNotNeeded(f"request {mail.request_id} no longer waits for a signature")
    secret = app.config["SECRET_KEY"]
    token = current_token(request, secret=secret)
    if token is None or not request.token_hash or f"-{request.token_nonce[:12]}-" not in mail.message_id:
        raise MailNotNeeded(f"request {request.id} has a newer link than this reminder")
    context = mail_context(request, token=token, app=app, deadline=request.expires_at or mail.created_at)
    pixel = tracking_url(app_url=app.config["APP_URL"], request_id=request.id, secret=secret)
    return _reminder_message(mail, batch=request.batch, context=context, pixel=pixel, app=app)


@builder(PARTY_KIND)
def build_party_reminder(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """A party's reminder as it goes out: the template's reminder text with the party's name and current link;
    none when the party no longer waits or has a newer link than the one it was queued for."""
    party_id = int(mail.message_id.strip("<>").removeprefix("party-reminder-").split("-")[0])
    party = session.get(Party, party_id)
    request = party.request if party is not None else None
    if request is None or party.status not in PARTY_WAITING or request.status not in WAITING_FOR_RECIPIENT:
        raise MailNotNeeded(f"party {party_id} no longer waits for its signature")
    if not party.token_hash or f"-{party.token_nonce[:12]}-" not in mail.message_id:
        raise MailNotNeeded(f"party {party_id} has a newer link than this reminder")
    token = party_token(party, secret=app.config["SECRET_KEY"])
    context = party_context(request, party, token=token, app=app, now=mail.created_at)
    return _reminder_message(mail, batch=request.batch, context=context, pixel="", app=app)

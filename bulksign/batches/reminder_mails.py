"""Reminder mails: their rows for the requests or parties whose counter this transaction advanced, their keys (by
request or party, link nonce and number), and how each is built when it goes out."""

from __future__ import annotations

import typing
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from flask import Flask
from flask_mail import Message
from sqlalchemy import JSON, Row, String, cast, func, insert, literal, select
from sqlalchemy.orm import InstrumentedAttribute, Session, selectinload

from bulksign.core.tokens import signing_token
from bulksign.doc_templates.jinja_sandbox import render_text, text_sandbox
from bulksign.doc_templates.mail_texts import DEFAULT_REMINDER_BODY, DEFAULT_REMINDER_SUBJECT, mail_text
from bulksign.doc_templates.variables import extract_variables
from bulksign.mail.mail_headers import one_line
from bulksign.mail.mailer import MailNotNeeded, builder, message_id_sql, queue_mails, queue_mails_from
from bulksign.models import Batch, Event, OutgoingMail, Party, SigningRequest, User, UTCDateTime
from bulksign.models.mail import MailKind, TextReason
from bulksign.models.parties import PartyStatus
from bulksign.models.status import WAITING_FOR_RECIPIENT
from bulksign.signing.invitations import link_message, mail_context, tracking_url
from bulksign.signing.links import current_token
from bulksign.signing.parties import party_token
from bulksign.signing.party_mails import mailed_party
from bulksign.signing.routing import party_context

KIND = MailKind.REMINDER
#: A reminder to a party other than the recipient, with its own link.
PARTY_KIND = MailKind.PARTY_REMINDER
#: The parties that can still act on their link: their step has started and they have not signed or declined.
PARTY_WAITING = (PartyStatus.INVITED.value, PartyStatus.OPENED.value)
#: Mail variables that are the same for every request of a batch.
_BATCH_VARIABLES = {"document_name", "sender"}


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
            nobody = _RowView.of(SimpleNamespace(data={}, name="", email=""), batch)
            context = mail_context(nobody, token="", app=app, deadline=datetime.now(UTC))
            self.batch_subject = one_line(text=self.subject.render(context))

    @property
    def returning(self) -> tuple[InstrumentedAttribute[Any], ...]:
        """What the advancing UPDATE must return for ``queue``: only ids when the subject is the batch's."""
        return (SigningRequest.id,) if self.batch_subject is not None else _RETURNED

    def queue(self, rows: Sequence[Row[Any]], *, now: datetime, user: User | None) -> list[int]:
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
                ).where(chosen, SigningRequest.email != ""),
                kind=KIND,
            )
        else:
            ids = queue_mails(self.session, [self._personal(row, now=now) for row in rows if row.email], now=now)
        # Rows reached by text alone get their reminder by text (keyed apart from any mail of theirs).
        ids += queue_mails_from(
            self.session,
            select(
                message_id_sql(literal("text-", String) + _REMINDER_KEY_SQL),
                SigningRequest.phone,
                literal("", String),
                SigningRequest.id,
                SigningRequest.batch_id,
                literal(now, UTCDateTime),
            ).where(chosen, SigningRequest.email == "", SigningRequest.phone.is_not(None)),
            kind=KIND,
            text_reason=TextReason.NO_ADDRESS,
        )
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

    def queue_parties(self, rows: Sequence[Row[Any]], *, now: datetime, user: User | None) -> list[int]:
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
                    "party_id": party.id,
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

    def _personal(self, row: Row[Any], *, now: datetime) -> dict[str, Any]:
        """``queue_mails`` keywords of one reminder whose subject names the recipient."""
        token = signing_token(secret=self.app.config["SECRET_KEY"], request_id=row.id, nonce=row.token_nonce or "")
        context = mail_context(_RowView.of(row, self.batch), token=token, app=self.app, deadline=row.expires_at or now)
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

    def __getattr__(self, name: str) -> Any:
        return getattr(self.row, name)

    @classmethod
    def of(cls, row: object, batch: Batch) -> SigningRequest:
        """The row as the request it stands for (it answers what ``mail_context`` reads of one)."""
        return typing.cast(SigningRequest, cls(row, batch))


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


def _reminder_message(mail: OutgoingMail, *, batch: Batch, context: dict[str, Any], pixel: str, app: Flask) -> Message:
    """The reminder text of the batch's template rendered with ``context`` (whose ``signing_link`` it carries)."""
    body = render_text(
        mail_text(batch.template_version.reminder_body or DEFAULT_REMINDER_BODY, language=batch.language), context
    )
    return link_message(
        mail, batch=batch, subject=mail.subject, body=body, link=context["signing_link"], pixel=pixel, app=app
    )


@builder(KIND)
def build_reminder(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """The reminder as it goes out: its own text, the request's current link, the pixel, the row's Message-ID."""
    request = session.get(SigningRequest, mail.request_id)
    if request is None or request.status not in WAITING_FOR_RECIPIENT:
        raise MailNotNeeded(f"request {mail.request_id} no longer waits for a signature")
    secret = app.config["SECRET_KEY"]
    token = current_token(request, secret=secret)
    if (
        token is None
        or not request.token_hash
        or not request.token_nonce
        or f"-{request.token_nonce[:12]}-" not in mail.message_id
    ):
        raise MailNotNeeded(f"request {request.id} has a newer link than this reminder")
    context = mail_context(request, token=token, app=app, deadline=request.expires_at or mail.created_at)
    pixel = tracking_url(app_url=app.config["APP_URL"], request_id=request.id, secret=secret)
    return _reminder_message(mail, batch=request.batch, context=context, pixel=pixel, app=app)


@builder(PARTY_KIND)
def build_party_reminder(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """A party's reminder as it goes out: the template's reminder text with the party's name and current link;
    none when the party no longer waits or has a newer link than the one it was queued for."""
    party = mailed_party(session, mail)
    request = party.request if party is not None else None
    if (
        party is None
        or request is None
        or party.status not in PARTY_WAITING
        or request.status not in WAITING_FOR_RECIPIENT
    ):
        raise MailNotNeeded(f"party {mail.party_id} no longer waits for its signature")
    if not party.token_hash or not party.token_nonce or f"-{party.token_nonce[:12]}-" not in mail.message_id:
        raise MailNotNeeded(f"party {mail.party_id} has a newer link than this reminder")
    token = party_token(party, secret=app.config["SECRET_KEY"])
    context = party_context(request, party, token=token, app=app, now=mail.created_at)
    return _reminder_message(mail, batch=request.batch, context=context, pixel="", app=app)

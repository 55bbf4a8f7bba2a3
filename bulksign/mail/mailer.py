"""Outgoing mail: a row is written (with a deterministic Message-ID) before anything is sent."""

from __future__ import annotations

import email.utils
import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import flask_mail
from sqlalchemy import JSON, ColumnElement, Select, String, literal, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from bulksign.core.slicing import slices
from bulksign.models import OutgoingMail
from bulksign.models.mail import Channel, MailKind, MailStatus, TextReason

#: kind → ``build(session, mail: OutgoingMail, app) -> flask_mail.Message``, filled by ``@builder`` as the
#: domain modules that own the kinds are imported (the sender imports them all: ``batches/sending.BUILDER_MODULES``).
#: A builder, kept with its own signature by the decorators that register it.
Build = TypeVar("Build", bound=Callable[..., Any])

BUILDERS: dict[str, Callable] = {}
#: kind → ``build(session, mail, app) -> str``: the words of a kind that may go as a text message (``@text_builder``).
TEXT_BUILDERS: dict[str, Callable] = {}

MESSAGE_ID_DOMAIN = "bulksign.local"

# Flask-Mail's Message() makes a Message-ID of its own with email.utils.make_msgid(), which asks the resolver
# for this host's name (socket.getfqdn) on every call: seconds per message where reverse DNS is slow (reported by
# Flask-Mail users; Django caches the name for the same reason), so hours for a batch. Every mail here carries
# its own deterministic id (``message_id_for``) in place of that one, so it is made without the lookup.
flask_mail.make_msgid = functools.partial(email.utils.make_msgid, domain=MESSAGE_ID_DOMAIN)


class MailNotNeeded(LookupError):
    """Raised by a builder when the mail has lost its purpose (the recipient signed, a newer link went out).

    The mail is marked ``cancelled`` with the reason, not ``failed``: nothing went wrong.
    """


#: Kinds whose mails are about their request's cancel: sent for a cancelled request, which stops every other mail.
FOR_CANCELLED: set[MailKind] = set()


def builder(kind: MailKind | str, *, for_cancelled: bool = False) -> Callable[[Build], Build]:
    """Register the function that builds mails of ``kind`` (a ``MailKind``) when they are sent; a kind has one
    builder. ``for_cancelled``: the kind tells of its request's cancel (``FOR_CANCELLED``)."""
    kind = MailKind(kind)

    def register(build: Build) -> Build:
        known = BUILDERS.get(kind)
        if known is not None and (known.__module__, known.__qualname__) != (build.__module__, build.__qualname__):
            raise ValueError(f"mail kind {kind!r} has two builders: {known.__qualname__} and {build.__qualname__}")
        BUILDERS[kind] = build
        if for_cancelled:
            FOR_CANCELLED.add(kind)
        return build

    return register


def text_builder(kind: MailKind | str) -> Callable[[Build], Build]:
    """Register the function that writes the text message of ``kind`` when it is sent; a kind has one."""
    kind = MailKind(kind)

    def register(build: Build) -> Build:
        known = TEXT_BUILDERS.setdefault(kind, build)
        if (known.__module__, known.__qualname__) != (build.__module__, build.__qualname__):
            raise ValueError(f"mail kind {kind!r} has two text builders: {known.__qualname__} and {build.__qualname__}")
        return build

    return register


def message_id_for(key: str) -> str:
    """The Message-ID of the mail known by ``key`` (e.g. ``invitation-42-1``): the same key, the same id."""
    return f"<{key}@{MESSAGE_ID_DOMAIN}>"


def message_id_sql(key: ColumnElement[str]) -> ColumnElement[str]:
    """``message_id_for`` as a SQL expression over a SQL ``key`` expression, for set-based inserts."""
    return literal("<", String) + key + literal(f"@{MESSAGE_ID_DOMAIN}>", String)


def queue_mail(
    session: Session,
    *,
    key: str,
    kind: MailKind,
    to_email: str,
    subject: str,
    now: datetime,
    request_id: int | None = None,
    batch_id: int | None = None,
    party_id: int | None = None,
    attachments: list[dict] | None = None,
) -> OutgoingMail:
    """Record a mail to send, once per ``key`` (a second call returns the first row). The caller commits."""
    if kind not in BUILDERS:
        raise ValueError(f"no message builder for mail kind {kind!r}")
    values = dict(
        message_id=message_id_for(key),
        kind=kind,
        to_email=to_email,
        subject=subject[:1000],
        request_id=request_id,
        batch_id=batch_id,
        party_id=party_id,
        attachments=attachments or [],
        status=MailStatus.QUEUED,
        created_at=now,
    )
    dialect = session.get_bind().dialect.name
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    session.execute(insert(OutgoingMail).values(**values).on_conflict_do_nothing(index_elements=["message_id"]))
    return session.scalars(select(OutgoingMail).where(OutgoingMail.message_id == values["message_id"])).one()


def _upsert_for(session: Session):
    """The INSERT construct with ``on_conflict_do_nothing`` for the session's database."""
    return pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert


def queue_mails(session: Session, mails: list[dict], *, now: datetime) -> list[int]:
    """``queue_mail`` for many mails in batched INSERTs (each dict holds its keywords but ``now``); ids in order.

    For set-based producers (a reminder tick of 50,000 mails): one statement per page instead of two per mail.
    """
    if not mails:
        return []
    rows = []
    for mail in mails:
        texted = mail.get("channel") == Channel.TEXT
        if mail["kind"] not in (TEXT_BUILDERS if texted else BUILDERS):
            raise ValueError(f"no message builder for mail kind {mail['kind']!r}")
        rows.append(
            dict(
                message_id=message_id_for(mail["key"]),
                kind=mail["kind"],
                to_email=mail["to_email"],
                subject=mail["subject"][:1000],
                request_id=mail.get("request_id"),
                batch_id=mail.get("batch_id"),
                party_id=mail.get("party_id"),
                attachments=mail.get("attachments") or [],
                status=MailStatus.QUEUED,
                created_at=now,
                channel=mail.get("channel") or Channel.MAIL,
                to_phone=mail.get("to_phone"),
                text_reason=mail.get("text_reason"),
            )
        )
    insert = _upsert_for(session)
    # A parameter list (not .values(list)): SQLAlchemy batches it into multi-row INSERTs with one cached compile.
    stmt = (
        insert(OutgoingMail)
        .on_conflict_do_nothing(index_elements=["message_id"])
        .returning(OutgoingMail.message_id, OutgoingMail.id)
    )
    found: dict[str, int] = dict(session.execute(stmt, rows).tuples().all())
    missing = [row["message_id"] for row in rows if row["message_id"] not in found]
    for part in slices(missing):  # written before (a retried tick): the same rows
        found.update(
            session.execute(select(OutgoingMail.message_id, OutgoingMail.id).where(OutgoingMail.message_id.in_(part)))
            .tuples()
            .all()
        )
    return [found[row["message_id"]] for row in rows]


def queue_mails_from(
    session: Session, rows: Select, *, kind: MailKind, text_reason: TextReason | None = None
) -> list[int]:
    """Set-based ``queue_mail``: ``rows`` selects (message_id, to_email, subject, request_id, batch_id, created_at)
    per mail, or with a ``text_reason`` (message_id, to_phone, …) per text message; rows whose Message-ID exists
    already are left alone. Returns the ids of the new rows."""
    if kind not in (BUILDERS if text_reason is None else TEXT_BUILDERS):
        raise ValueError(f"no message builder for mail kind {kind!r}")
    insert = _upsert_for(session)
    address = ["to_email"] if text_reason is None else ["to_phone"]
    extra = [] if text_reason is None else ["to_email", "channel", "text_reason"]
    extra_values = (
        []
        if text_reason is None
        else [literal("", String), literal(Channel.TEXT.value, String), literal(text_reason.value, String)]
    )
    stmt = (
        insert(OutgoingMail)
        .from_select(
            [
                "message_id",
                *address,
                "subject",
                "request_id",
                "batch_id",
                "created_at",
                "kind",
                "status",
                "attachments",
                "attempts",
                *extra,
            ],
            rows.add_columns(
                literal(kind, String),
                literal(MailStatus.QUEUED, String),
                literal([], JSON),
                literal(0),
                *extra_values,
            ),
        )
        .on_conflict_do_nothing(index_elements=["message_id"])
        .returning(OutgoingMail.id)
    )
    return list(session.scalars(stmt))


def cancel_queued(session: Session, *, request_ids: list[int], kinds: list[MailKind]) -> None:
    """Queued mails of these kinds for these requests will not go out (the send job skips what is not queued)."""
    for part in slices(request_ids):
        session.execute(
            update(OutgoingMail)
            .where(
                OutgoingMail.request_id.in_(part),
                OutgoingMail.status == MailStatus.QUEUED,
                OutgoingMail.kind.in_(kinds),
            )
            .values(status=MailStatus.CANCELLED)
        )

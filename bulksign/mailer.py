"""Outgoing mail: a row is written (with a deterministic Message-ID) before anything is sent.

``queue_mail`` records what to send; the caller commits, then ``pipeline.enqueue_sends``.
The mail job builds the message at send time with the builder registered for its ``kind``,
so a retry after a crash re-sends the same Message-ID with the same content.
"""
from __future__ import annotations

from datetime import datetime
from email.utils import make_msgid  # noqa: F401  (re-exported for builders)

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from .models import OutgoingMail

#: kind → dotted path of ``build(session, mail: OutgoingMail, app) -> flask_mail.Message``.
BUILDERS: dict[str, str] = {
    "invitation": "bulksign.invitations.build_invitation",
    "confirmation": "bulksign.sealing.build_confirmation",
    "decline_notice": "bulksign.signing.build_decline_notice",
}

MESSAGE_ID_DOMAIN = "bulksign.local"


def message_id_for(key: str) -> str:
    """The Message-ID of the mail known by ``key`` (e.g. ``invitation-42-1``): the same key, the same id."""
    return f"<{key}@{MESSAGE_ID_DOMAIN}>"


def queue_mail(session: Session, *, key: str, kind: str, to_email: str, subject: str, now: datetime,
               request_id: int | None = None, batch_id: int | None = None,
               attachments: list[dict] | None = None) -> OutgoingMail:
    """Record a mail to send, once per ``key`` (a second call returns the first row). The caller commits."""
    if kind not in BUILDERS:
        raise ValueError(f"no message builder for mail kind {kind!r}")
    values = dict(message_id=message_id_for(key), kind=kind, to_email=to_email, subject=subject[:1000],
                  request_id=request_id, batch_id=batch_id, attachments=attachments or [], status="queued",
                  created_at=now)
    dialect = session.get_bind().dialect.name
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    session.execute(insert(OutgoingMail).values(**values).on_conflict_do_nothing(index_elements=["message_id"]))
    return session.scalar(select(OutgoingMail).where(OutgoingMail.message_id == values["message_id"]))

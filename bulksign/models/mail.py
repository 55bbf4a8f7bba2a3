"""Mail tables: every outgoing mail, written before it is sent, and the suppressed addresses no mail goes to."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Index
from sqlalchemy.orm import Mapped, mapped_column, relationship

from bulksign.core.extensions import db
from bulksign.models.base import BigId, UTCDateTime, utcnow
from bulksign.models.people import User


class OutgoingMail(db.Model):
    """Every mail, written before it is sent: the Message-ID is fixed so a retry re-sends the same one."""

    __tablename__ = "outgoing_mails"
    __table_args__ = (Index("ix_outgoing_mails_status_created", "status", "created_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    request_id: Mapped[int | None] = mapped_column(
        BigId, db.ForeignKey("signing_requests.id", ondelete="CASCADE"), index=True
    )
    batch_id: Mapped[int | None] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"), index=True)
    #: ``invitation``, ``reminder``, ``confirmation``, ``expiry_summary``, ``decline_notice``, ``completion_notice``,
    #: ``one_time_code`` (its code is derived at send time, never written here).
    kind: Mapped[str] = mapped_column(db.String(30))
    message_id: Mapped[str] = mapped_column(db.String(255), unique=True)
    to_email: Mapped[str] = mapped_column(db.String(254))
    subject: Mapped[str] = mapped_column(db.Text, default="")
    #: ``queued`` → ``sent`` | ``failed`` | ``bounced`` | ``cancelled`` (its request was cancelled or resent).
    status: Mapped[str] = mapped_column(db.String(20), default="queued")
    attempts: Mapped[int] = mapped_column(default=0)
    error: Mapped[str | None] = mapped_column(db.Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: Files to attach, read from storage at send time: [{"key", "filename", "content_type"}].
    attachments: Mapped[list] = mapped_column(JSON, default=list)


class Suppression(db.Model):
    """An address no mail goes to (it hard-bounced or complained), across all batches, until an admin lifts it."""

    __tablename__ = "suppressions"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    #: Lower-cased: providers report addresses in any case.
    email: Mapped[str] = mapped_column(db.String(254), unique=True)
    #: ``bounce`` (hard bounce reported by the provider), ``smtp`` (refused when sending), ``complaint``
    #: (marked as spam) or ``manual``.
    source: Mapped[str] = mapped_column(db.String(20))
    #: What the provider or the mail server said, in words.
    reason: Mapped[str] = mapped_column(db.Text, default="")
    #: The batch and request whose mail caused the entry, if any.
    batch_id: Mapped[int | None] = mapped_column(db.ForeignKey("batches.id", ondelete="SET NULL"))
    request_id: Mapped[int | None] = mapped_column(BigId, db.ForeignKey("signing_requests.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    #: When an admin lifted the entry (mail goes to the address again); None: in force.
    lifted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    lifted_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="SET NULL"))

    lifted_by: Mapped[User | None] = relationship()

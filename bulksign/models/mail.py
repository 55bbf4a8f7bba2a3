"""Mail tables: every outgoing mail, written before it is sent, and the suppressed addresses no mail goes to."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import JSON, Index
from sqlalchemy.orm import Mapped, mapped_column, relationship

from bulksign.core.extensions import db
from bulksign.models.base import BigId, Model, UTCDateTime, utcnow
from bulksign.models.people import User


class MailStatus(StrEnum):
    """Where an outgoing mail stands: ``queued`` until the send job settles it."""

    QUEUED = "queued"
    SENT = "sent"
    FAILED = "failed"
    #: Refused for good by the recipient's mail server, or reported back by the provider.
    BOUNCED = "bounced"
    #: No longer needed (its request was cancelled, signed or resent) or barred (a suppressed address).
    CANCELLED = "cancelled"
    #: A text message its provider reported handed to the phone (a mail is never told so).
    DELIVERED = "delivered"


class Channel(StrEnum):
    """How an outgoing message goes: by mail (to ``to_email``) or as a text message (to ``to_phone``)."""

    MAIL = "mail"
    TEXT = "text"


class TextReason(StrEnum):
    """Why a message went by text rather than mail, shown to staff on the row."""

    #: The row has a phone and no address.
    NO_ADDRESS = "no_address"
    #: The mail with the same link bounced (refused at sending or reported back).
    MAIL_BOUNCED = "mail_bounced"


class MailKind(StrEnum):
    """What a mail is; each kind has one builder (``mailer.builder``), in the module that owns it."""

    INVITATION = "invitation"
    REMINDER = "reminder"
    CONFIRMATION = "confirmation"
    DECLINE_NOTICE = "decline_notice"
    COMPLETION_NOTICE = "completion_notice"
    ALL_SIGNED_NOTICE = "all_signed_notice"
    EXPIRY_SUMMARY = "expiry_summary"
    CANCELLED = "cancelled"
    CANCELLED_COUNTERSIGN = "cancelled_countersign"
    APPROVAL_REJECTED = "approval_rejected"
    APPROVAL_REQUESTED = "approval_requested"
    #: Its code is derived at send time, never written on the row.
    ONE_TIME_CODE = "one_time_code"
    PASSWORD_RESET = "password_reset"
    PARTY_INVITATION = "party_invitation"
    PARTY_DECLINED = "party_declined"
    PARTY_COMPLETED = "party_completed"
    PARTY_REMINDER = "party_reminder"
    COUNTERSIGN_DIGEST = "countersign_digest"
    #: The request's current signing link again by the other channel: a text after its mail bounced, or a mail
    #: after its text failed (the request does not move: it is out already).
    LINK_AGAIN = "link_again"
    #: To a party who saw the document: staff corrected it, what changed and why; a new link follows.
    CORRECTION_NOTICE = "correction_notice"


class OutgoingMail(Model):
    """Every mail, written before it is sent: the Message-ID is fixed so a retry re-sends the same one."""

    __tablename__ = "outgoing_mails"
    __table_args__ = (Index("ix_outgoing_mails_status_created", "status", "created_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    request_id: Mapped[int | None] = mapped_column(
        BigId, db.ForeignKey("signing_requests.id", ondelete="CASCADE"), index=True
    )
    batch_id: Mapped[int | None] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"), index=True)
    #: The party a mail to one party of a request is for (its invitation, reminder, decline or completion mail).
    party_id: Mapped[int | None] = mapped_column(BigId, db.ForeignKey("parties.id", ondelete="SET NULL"), index=True)
    #: A ``MailKind``.
    kind: Mapped[str] = mapped_column(db.String(30))
    message_id: Mapped[str] = mapped_column(db.String(255), unique=True)
    to_email: Mapped[str] = mapped_column(db.String(254))
    subject: Mapped[str] = mapped_column(db.Text, default="")
    #: A ``MailStatus``: ``queued`` → ``sent`` | ``failed`` | ``bounced`` | ``cancelled``.
    status: Mapped[str] = mapped_column(db.String(20), default=MailStatus.QUEUED.value)
    attempts: Mapped[int] = mapped_column(default=0)
    error: Mapped[str | None] = mapped_column(db.Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: Files to attach, read from storage at send time: [{"key", "filename", "content_type"}].
    attachments: Mapped[list] = mapped_column(JSON, default=list)
    #: A ``Channel``: a text message has ``to_phone`` (E.164) and an empty ``to_email``.
    channel: Mapped[str] = mapped_column(db.String(10), default=Channel.MAIL.value, server_default=Channel.MAIL.value)
    to_phone: Mapped[str | None] = mapped_column(db.String(20))
    #: A ``TextReason`` for a text message; None for a mail.
    text_reason: Mapped[str | None] = mapped_column(db.String(20))
    #: The text provider's id of the message, which its delivery reports name.
    provider_ref: Mapped[str | None] = mapped_column(db.String(100), index=True)
    #: When the provider reported the text handed to the phone.
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Suppression(Model):
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


class PhoneSuppression(Model):
    """A phone number no text goes to (its owner replied STOP), across all batches, like a suppressed address."""

    __tablename__ = "phone_suppressions"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    #: E.164.
    phone: Mapped[str] = mapped_column(db.String(20), unique=True)
    #: ``opt_out`` (the owner replied STOP) or ``manual``.
    source: Mapped[str] = mapped_column(db.String(20))
    reason: Mapped[str] = mapped_column(db.Text, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

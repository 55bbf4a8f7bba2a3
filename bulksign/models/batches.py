"""Batch tables: the batch and its settings, shares with users outside its team, its per-status counters, the
exports built from it, and how long its documents and personal data are kept (per team, per batch, legal holds)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import JSON, UniqueConstraint, false
from sqlalchemy.orm import Mapped, mapped_column, relationship

from bulksign.core.extensions import db
from bulksign.models.base import Model, UTCDateTime, utcnow
from bulksign.models.people import User
from bulksign.models.templates import TemplateVersion


class Reach(StrEnum):
    """How a batch reaches its recipients: by mail only, or also by text message (to a row's phone)."""

    MAIL = "mail"
    #: A row with a phone and no address is invited, reminded and told by text.
    TEXT_WITHOUT_ADDRESS = "text_without_address"
    #: Every row has an address; when a mail with the link bounces and the row has a phone, the link goes by text.
    TEXT_ON_BOUNCE = "text_on_bounce"
    #: Both of those.
    TEXT_BOTH = "text_both"

    @property
    def without_address(self) -> bool:
        """A row may have a phone and no address."""
        return self in (Reach.TEXT_WITHOUT_ADDRESS, Reach.TEXT_BOTH)

    @property
    def on_bounce(self) -> bool:
        """A bounced mail's link goes by text to the row's phone."""
        return self in (Reach.TEXT_ON_BOUNCE, Reach.TEXT_BOTH)


class Batch(Model):
    __tablename__ = "batches"
    __table_args__ = (UniqueConstraint("created_by_id", "idempotency_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(db.String(200))
    #: The exact template version every request of this batch renders.
    template_version_id: Mapped[int] = mapped_column(db.ForeignKey("template_versions.id"))
    created_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="SET NULL"), index=True)
    #: The team whose members see the batch; None: only its creator, users it is shared with and admins.
    team_id: Mapped[int | None] = mapped_column(db.ForeignKey("teams.id", ondelete="SET NULL"), index=True)
    #: Who gets the expiry summary, decline notices and the completion notice; None: the owner.
    notify_email: Mapped[str | None] = mapped_column(db.String(254))
    #: A ``status.BatchStatus``: pending → processing → awaiting_signatures | partially_failed → all_signed |
    #: closed, or cancelled; written by ``states.move_batches`` only.
    status: Mapped[str] = mapped_column(db.String(20), default="pending")
    #: Language of the recipients' pages and mails.
    language: Mapped[str] = mapped_column(db.String(8), default="en")
    #: Days after the invitation on which reminders are due, e.g. [2, 4].
    reminder_days: Mapped[list] = mapped_column(JSON, default=lambda: [2, 4])
    #: At most this many reminders per request (0–5).
    max_reminders: Mapped[int] = mapped_column(default=3)
    #: Days after sending until a request expires.
    deadline_days: Mapped[int] = mapped_column(default=7)
    #: Fixed deadline for the whole batch, when staff set one.
    deadline_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: When the last of its links expires (the latest deadline of its requests), set each time sending ends; what
    #: the page and the API show as the deadline of a batch without a fixed one.
    last_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    reply_to: Mapped[str | None] = mapped_column(db.String(254))
    #: Quiet hours for reminders, local to ``timezone`` (hours 0–23); None: no quiet hours.
    quiet_hours_start: Mapped[int | None] = mapped_column()
    quiet_hours_end: Mapped[int | None] = mapped_column()
    timezone: Mapped[str] = mapped_column(db.String(64), default="UTC")
    #: Recipients confirm a one-time code (by SMS when the row has a phone, else by mail) before they can see,
    #: sign or decline the document (``one_time_codes``).
    one_time_code: Mapped[bool] = mapped_column(default=False, server_default=false())
    #: How recipients are reached (``batches.reach.Reach``): ``mail`` only, ``text_without_address`` (a row with a
    #: phone and no address gets texts), ``text_on_bounce`` (a bounced mail's link goes by text), or ``text_both``.
    channel: Mapped[str] = mapped_column(db.String(24), default="mail", server_default="mail")
    #: At most this many text messages for the batch (staff set it); None: the batch sends none.
    text_cap: Mapped[int | None] = mapped_column()
    #: Texts handed to the provider so far, counted against ``text_cap`` by compare-and-set (``batches.texting``).
    texts_sent: Mapped[int] = mapped_column(default=0, server_default="0")
    #: When the cap first stopped a text; None: it never did.
    text_cap_reached_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: Number of requests created; counts per status are kept in ``batch_status_counts``.
    total_count: Mapped[int] = mapped_column(default=0)
    #: Rows of the recipients file left out at creation for their errors (kept in ``batch_skipped_rows``).
    skipped_count: Mapped[int] = mapped_column(default=0, server_default="0")
    #: The recipients file it was made from on the new-batch page (``recipient_uploads``), deleted with the batch's
    #: first purge; None: made over the API (the file is not kept).
    upload_id: Mapped[str | None] = mapped_column(db.String(32), index=True)
    #: Client-supplied key: the same key from the same user creates one batch.
    idempotency_key: Mapped[str | None] = mapped_column(db.String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: When its last invitation was dispatched (sending ended); None while sending.
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: When it became all_signed or closed (nobody can sign any more); None while recipients can.
    settled_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    cancelled_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: Why staff cancelled the whole batch (optional): the requests a job stops later are told it too.
    cancel_reason: Mapped[str | None] = mapped_column(db.Text)
    #: When the owner got the expiry summary, so it is sent once.
    expiry_summary_sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: When the oldest expiry not yet in an owner summary happened; None: nothing to report.
    expiry_pending_since: Mapped[datetime | None] = mapped_column(UTCDateTime)

    #: Approval before sending (``batches.approval``): None when its team required none at creation, else
    #: ``waiting`` → ``approved`` | ``rejected``.
    approval: Mapped[str | None] = mapped_column(db.String(10))
    #: Who approved or rejected it, when, and why a rejection (told to the creator).
    approval_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="SET NULL"))
    approval_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    rejection_reason: Mapped[str | None] = mapped_column(db.Text)

    template_version: Mapped[TemplateVersion] = relationship()
    created_by: Mapped[User | None] = relationship(foreign_keys=[created_by_id])
    approval_by: Mapped[User | None] = relationship(foreign_keys=[approval_by_id])


class BatchShare(Model):
    """A batch shown to a named user outside its team (read only)."""

    __tablename__ = "batch_shares"

    batch_id: Mapped[int] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(db.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, index=True)
    created_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class BatchSkippedRow(Model):
    """A row of the recipients file left out of the batch at creation, with its values and why it was refused."""

    __tablename__ = "batch_skipped_rows"

    batch_id: Mapped[int] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True)
    #: The row as Excel shows it (the header is row 1).
    row_number: Mapped[int] = mapped_column(primary_key=True)
    #: The row's cells as read, header as written → value.
    cells: Mapped[dict] = mapped_column(JSON, default=dict)
    #: Its errors: [{"column", "msgid", "values"}], a message id translated when shown (``core.messages.N_``);
    #: a count's message also has "plural" and "count", and a value that is a message is stored the same way.
    reasons: Mapped[list] = mapped_column(JSON, default=list)


class RecipientUpload(Model):
    """A recipients file kept in storage (``uploads/<id>/file``) between its check and the batch made of it.

    Deleted with the first purge of a batch made of it (``Batch.upload_id``), or ``UPLOAD_KEEP_HOURS`` after its
    upload when none was; an erasure deletes those that hold the person.
    """

    __tablename__ = "recipient_uploads"

    #: Unguessable (32 hex digits): the new-batch page carries it between check and create.
    id: Mapped[str] = mapped_column(db.String(32), primary_key=True)
    #: Only who uploaded it may use it.
    user_id: Mapped[int] = mapped_column(db.ForeignKey("users.id", ondelete="CASCADE"), index=True)
    template_id: Mapped[int | None] = mapped_column()
    filename: Mapped[str] = mapped_column(db.String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    #: The columns staff matched for this file (``column_mapping.ColumnMapping.to_json()``: template column → the
    #: file's headers), read again on create; None: the file's headers are the template's columns.
    columns: Mapped[dict | None] = mapped_column(JSON)


class BatchStatusCount(Model):
    """How many requests of a batch are in one status: what the dashboard reads instead of a GROUP BY.

    Kept by ``batch_counts``: seeded with the batch, moved in the transaction of every status change.
    """

    __tablename__ = "batch_status_counts"

    batch_id: Mapped[int] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True)
    #: A request status; a batch has a row for every status, zeros included, so moves only UPDATE.
    status: Mapped[str] = mapped_column(db.String(20), primary_key=True)
    #: Requests of the batch in ``status``.
    count: Mapped[int] = mapped_column(default=0)


class BatchVersion(Model):
    """A number that grows with every committed change to a batch's requests, parties or status: what live pages
    poll (their ETag), answered 304 while it stands. Bumped by ``batch_versions`` at commit."""

    __tablename__ = "batch_versions"

    batch_id: Mapped[int] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True)
    version: Mapped[int] = mapped_column(db.BigInteger().with_variant(db.Integer(), "sqlite"), default=0)


class Export(Model):
    """A file built by a job (e.g. a ZIP of signed PDFs), with progress for the page."""

    __tablename__ = "exports"

    id: Mapped[int] = mapped_column(primary_key=True)
    batch_id: Mapped[int] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(db.String(30), default="signed_zip")
    #: ``pending`` → ``running`` → ``ready`` | ``failed``.
    status: Mapped[str] = mapped_column(db.String(20), default="pending")
    done: Mapped[int] = mapped_column(default=0)
    total: Mapped[int] = mapped_column(default=0)
    storage_key: Mapped[str | None] = mapped_column(db.String(500))
    error: Mapped[str | None] = mapped_column(db.Text)
    created_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class TeamRetention(Model):
    """How long a team's batches keep their documents and personal data (``batches.retention``).

    A team without a row keeps signed documents for ever and unsigned ones ``DEFAULT_KEEP_UNSIGNED_DAYS``.
    """

    __tablename__ = "team_retention"

    team_id: Mapped[int] = mapped_column(db.ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True)
    #: Days after signing that a signed request keeps its documents and personal data; None: for ever.
    keep_signed_days: Mapped[int | None] = mapped_column()
    #: Days after it ended (declined, expired, cancelled, failed, bounced) that an unsigned request keeps them.
    keep_unsigned_days: Mapped[int] = mapped_column(default=90)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class BatchRetention(Model):
    """A batch's own retention over its team's, and its legal hold; no row: the team's, no hold."""

    __tablename__ = "batch_retention"

    batch_id: Mapped[int] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True)
    #: As ``TeamRetention``'s; None: the team's.
    keep_signed_days: Mapped[int | None] = mapped_column()
    keep_unsigned_days: Mapped[int | None] = mapped_column()
    #: When an admin put the batch on legal hold: nothing of it is purged or erased until the hold is lifted.
    held_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: Why (a case number, a dispute): shown to admins and kept in the batch's events.
    hold_reason: Mapped[str | None] = mapped_column(db.Text)
    held_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="SET NULL"))

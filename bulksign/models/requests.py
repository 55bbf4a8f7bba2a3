"""Signing request tables: one request per recipient (with the partial indexes derived from ``status``), its
documents, the certificates that sealed them, its audit trail of events and its one-time codes."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, BigInteger, CheckConstraint, Index, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from bulksign.core.extensions import db
from bulksign.models.base import BigId, Model, UTCDateTime, utcnow
from bulksign.models.batches import Batch
from bulksign.models.status import WAITING_FOR_RECIPIENT, WORKING, sql_in


class SigningRequest(Model):
    __tablename__ = "signing_requests"
    __table_args__ = (
        # Keyset pages of the recipients table: one index per sortable column, id breaks ties.
        # (batch_id, status, id) also serves the dashboard's GROUP BY (batch_id, status).
        Index("ix_signing_requests_batch_id_id", "batch_id", "id"),
        Index("ix_signing_requests_batch_name_id", "batch_id", "name", "id"),
        Index("ix_signing_requests_batch_changed_id", "batch_id", "status_changed_at", "id"),
        Index("ix_signing_requests_batch_status_id", "batch_id", "status", "id"),
        Index("ix_signing_requests_batch_email_id", "batch_id", "email", "id"),
        # Bounce reports name an address in the provider's case: they match on lower(email).
        Index("ix_signing_requests_email_lower", text("lower(email)")),
        # The reconciler scans only requests in a working state: a small slice of a big table.
        Index(
            "ix_signing_requests_working",
            "status",
            "status_changed_at",
            postgresql_where=text(sql_in(WORKING)),
            sqlite_where=text(sql_in(WORKING)),
        ),
        # Reminders and expiry scan only requests still waiting for the recipient.
        Index(
            "ix_signing_requests_waiting",
            "batch_id",
            "sent_at",
            postgresql_where=text(sql_in(WAITING_FOR_RECIPIENT)),
            sqlite_where=text(sql_in(WAITING_FOR_RECIPIENT)),
        ),
        # Expiry finds waiting requests past their deadline without visiting the others.
        Index(
            "ix_signing_requests_waiting_expiry",
            "expires_at",
            postgresql_where=text(sql_in(WAITING_FOR_RECIPIENT)),
            sqlite_where=text(sql_in(WAITING_FOR_RECIPIENT)),
        ),
        # The seal safety net looks only at recent signatures (a lost or failed seal job).
        Index(
            "ix_signing_requests_signed",
            "signed_at",
            postgresql_where=text("status = 'signed'"),
            sqlite_where=text("status = 'signed'"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    batch_id: Mapped[int] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"))
    #: Row number in the uploaded file, as the user sees it in Excel (header is row 1).
    row_number: Mapped[int | None] = mapped_column()
    email: Mapped[str] = mapped_column(db.String(254))
    name: Mapped[str] = mapped_column(db.String(300), default="")
    phone: Mapped[str | None] = mapped_column(db.String(50))
    #: The row's values by template variable name.
    data: Mapped[dict] = mapped_column(JSON, default=dict)
    #: Current state; changed only by ``states.transition`` (compare-and-set).
    status: Mapped[str] = mapped_column(db.String(20), default="pending")
    status_changed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    #: sha256 hex of the signing token; the token exists only in the recipient's mail.
    token_hash: Mapped[str | None] = mapped_column(db.String(64), unique=True)
    #: Random input of the token derivation (``tokens.signing_token``); a new nonce kills the old link.
    token_nonce: Mapped[str | None] = mapped_column(db.String(64))
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    email_opened_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    opened_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    signed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    declined_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    decline_reason: Mapped[str | None] = mapped_column(db.Text)
    #: Why staff cancelled it (optional): its page and the notice to its invited parties say it.
    cancel_reason: Mapped[str | None] = mapped_column(db.Text)
    #: The name the recipient typed when signing, and where from.
    signer_name: Mapped[str | None] = mapped_column(db.String(300))
    signer_ip: Mapped[str | None] = mapped_column(db.String(64))
    #: PNG bytes of the drawn signature, if any (small: a few KB).
    signature_image: Mapped[bytes | None] = mapped_column(db.LargeBinary)
    reminder_count: Mapped[int] = mapped_column(default=0)
    last_reminder_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: Extra days of the last resend that extended the deadline (then ``expires_at`` holds the extended
    #: deadline, kept by the send); None: the batch's deadline applies.
    deadline_days: Mapped[int | None] = mapped_column()
    #: Tries of the current step (render or send), for backoff and the retry bound.
    attempts: Mapped[int] = mapped_column(default=0)
    #: What went wrong, in words a person understands.
    error_message: Mapped[str | None] = mapped_column(db.Text)
    #: When the recipient's mail provider reported our mail as spam: no more reminders go to them.
    complained_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    #: When its documents and personal data were purged (retention or erasure, ``batches.retention``): the row
    #: keeps only its ids, times, status and events as the proof; None: not purged.
    purged_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: The version of its document: 1 as first rendered, one more for each correction (``batches.corrections``).
    document_version: Mapped[int] = mapped_column(default=1, server_default="1")

    batch: Mapped[Batch] = relationship()


def version_suffix(version: int) -> str:
    """What names a corrected version's files and mails apart from the first's: nothing for version 1, ``-v2`` …"""
    return "" if version == 1 else f"-v{version}"


class Document(Model):
    """File metadata; the bytes live in the storage backend under ``storage_key``."""

    __tablename__ = "documents"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    request_id: Mapped[int] = mapped_column(BigId, db.ForeignKey("signing_requests.id", ondelete="CASCADE"), index=True)
    #: ``original``, ``signed`` or ``certificate``.
    kind: Mapped[str] = mapped_column(db.String(20))
    storage_key: Mapped[str] = mapped_column(db.String(500))
    sha256: Mapped[str] = mapped_column(db.String(64), index=True)
    size: Mapped[int] = mapped_column(BigInteger)
    content_type: Mapped[str] = mapped_column(db.String(100), default="application/pdf")
    #: sha256 of the certificate that sealed a signed document (``seal_certificates``); None otherwise.
    seal_fingerprint: Mapped[str | None] = mapped_column(db.String(64))
    #: Where an original's signature goes, ``SignatureBox.to_json()`` (page, x, y, w, h in points); None: the
    #: document marks no place, sealing appends a signature page.
    signature_box: Mapped[dict | None] = mapped_column(JSON)
    #: Where an original shows each field its signer fills: field name → ``SignatureBox.to_json()``;
    #: None for a document whose version marks no field (a field under a condition the row skipped has no entry).
    field_boxes: Mapped[dict | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class SealCertificate(Model):
    """Every certificate that has sealed documents here: /verify trusts them after the seal is replaced."""

    __tablename__ = "seal_certificates"

    #: sha256 hex of the certificate (DER).
    fingerprint: Mapped[str] = mapped_column(db.String(64), primary_key=True)
    subject: Mapped[str] = mapped_column(db.String(500))
    #: The certificate, DER.
    der: Mapped[bytes] = mapped_column(db.LargeBinary)
    not_after: Mapped[datetime] = mapped_column(UTCDateTime)
    #: The first seal made with it.
    first_used_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Event(Model):
    """Append-only history of a request: the audit trail."""

    __tablename__ = "events"
    __table_args__ = (Index("ix_events_request_time", "request_id", "created_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    request_id: Mapped[int | None] = mapped_column(BigId, db.ForeignKey("signing_requests.id", ondelete="CASCADE"))
    batch_id: Mapped[int | None] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"), index=True)
    #: e.g. ``status.sent``, ``email.opened``, ``page.opened``, ``email.changed``.
    type: Mapped[str] = mapped_column(db.String(50))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    #: ``system``, ``recipient`` or ``user:<id>``.
    actor: Mapped[str] = mapped_column(db.String(50), default="system")
    ip: Mapped[str | None] = mapped_column(db.String(64))
    user_agent: Mapped[str | None] = mapped_column(db.String(500))
    details: Mapped[dict] = mapped_column(JSON, default=dict)


class OneTimeCode(Model):
    """A code sent to a party to prove they hold the mailbox or phone, for a request or a countersigner's link (exactly
    one of the two); the newest counts. Only its hash is stored."""

    __tablename__ = "one_time_codes"
    __table_args__ = (
        Index("ix_one_time_codes_request_created", "request_id", "created_at"),
        Index("ix_one_time_codes_link_created", "countersign_link_id", "created_at"),
        CheckConstraint("(request_id IS NULL) <> (countersign_link_id IS NULL)", name="one_owner"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    request_id: Mapped[int | None] = mapped_column(BigId, db.ForeignKey("signing_requests.id", ondelete="CASCADE"))
    #: The countersigner's link whose code this is (``countersign``); None: a request's.
    countersign_link_id: Mapped[int | None] = mapped_column(db.ForeignKey("countersign_links.id", ondelete="CASCADE"))
    #: The party (not the recipient) of a document several sign whose code this is; None: the recipient's.
    party_id: Mapped[int | None] = mapped_column(BigId, db.ForeignKey("parties.id", ondelete="CASCADE"))
    #: ``email`` or ``sms``.
    channel: Mapped[str] = mapped_column(db.String(10))
    #: The address or phone number the code went to, as it was then.
    destination: Mapped[str] = mapped_column(db.String(254))
    #: Random input of the code's derivation (128 bits, hex).
    nonce: Mapped[str] = mapped_column(db.String(32))
    #: HMAC-SHA256 (secret key) of the code bound to this row and its request; compared in constant time.
    code_hash: Mapped[str] = mapped_column(db.String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    #: Tries made with this code, right or wrong; counted before comparing, so parallel guesses cannot exceed the bound.
    attempts: Mapped[int] = mapped_column(default=0)
    #: When the right code was entered; a verified code is spent (it cannot be entered again).
    verified_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: When the last try was used up on a wrong code: the recipient must ask for a new one.
    locked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

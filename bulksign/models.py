"""Tables only. Rules live in the domain modules; statuses change only through ``states.transition``."""
from __future__ import annotations

import hashlib
from datetime import datetime, timezone

from flask_login import UserMixin
from sqlalchemy import JSON, BigInteger, Index, UniqueConstraint, false, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from bulksign.core.extensions import db
from bulksign.batches.status import WAITING_FOR_RECIPIENT, WORKING, sql_in

# SQLite only auto-increments INTEGER PRIMARY KEY; PostgreSQL gets BIGINT for the big tables.
BigId = BigInteger().with_variant(db.Integer(), "sqlite")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class UTCDateTime(db.TypeDecorator):
    """Timestamps stored as UTC and always read back timezone-aware, on PostgreSQL and SQLite."""

    impl = db.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is not None:
            if value.tzinfo is None:
                raise ValueError("naive datetime given; pass an aware UTC time")
            value = value.astimezone(timezone.utc)
        return value

    def process_result_value(self, value, dialect):
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value


class User(UserMixin, db.Model):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    #: Login name, stored lower-case.
    email: Mapped[str] = mapped_column(db.String(254), unique=True)
    #: werkzeug scrypt/pbkdf2 hash; never the password.
    password_hash: Mapped[str] = mapped_column(db.String(256))
    #: ``admin`` (everything), ``manager`` (everything in their teams), ``staff`` (own batches, sees the
    #: team's) or ``viewer`` (reads the team's); see ``access``.
    role: Mapped[str] = mapped_column(db.String(16), default="staff")
    #: A disabled account cannot log in or use its API keys.
    disabled: Mapped[bool] = mapped_column(default=False)
    #: UI language chosen by the user (``en`` or ``ru``); None follows the browser.
    locale: Mapped[str | None] = mapped_column(db.String(8))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_login_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: Raised by every logout: sessions and "remember me" cookies issued before it stop working.
    logouts: Mapped[int] = mapped_column(default=0, server_default="0")

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def is_active(self) -> bool:  # Flask-Login refuses inactive users
        return not self.disabled

    def get_id(self) -> str:
        # What the session and "remember me" cookies hold: a new password, or a logout, ends every login made
        # before it. (No suffix before the first logout: logins made before this column existed stay valid.)
        stamp = self.password_hash + (f":{self.logouts}" if self.logouts else "")
        return f"{self.id}:{hashlib.sha256(stamp.encode()).hexdigest()[:16]}"


class Team(db.Model):
    """A department: its members see its batches and templates (``access``)."""

    __tablename__ = "teams"

    id: Mapped[int] = mapped_column(primary_key=True)
    #: Unique name, as people call the department.
    name: Mapped[str] = mapped_column(db.String(100), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class TeamMember(db.Model):
    """A user in a team; a user may be in several."""

    __tablename__ = "team_members"

    team_id: Mapped[int] = mapped_column(db.ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(db.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, index=True)
    added_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class MembershipChange(db.Model):
    """Audit of who may see what: who added or removed whom from a team, or gave whom a role, when.
    Kept when the team or user is gone."""

    __tablename__ = "membership_changes"

    id: Mapped[int] = mapped_column(primary_key=True)
    #: Team and user named, not referenced: the record outlives both. No team for a role change.
    team_name: Mapped[str | None] = mapped_column(db.String(100))
    user_email: Mapped[str] = mapped_column(db.String(254))
    #: ``added`` or ``removed`` (team membership), ``role`` (a role given, at creation or later).
    action: Mapped[str] = mapped_column(db.String(10))
    #: For ``role``: the role before (None when the account was created with ``new_role``) and after.
    old_role: Mapped[str | None] = mapped_column(db.String(16))
    new_role: Mapped[str | None] = mapped_column(db.String(16))
    #: Who made the change: ``user:<id> <email>`` or ``cli``.
    actor: Mapped[str] = mapped_column(db.String(300))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class ApiKey(db.Model):
    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(db.ForeignKey("users.id", ondelete="CASCADE"), index=True)
    #: sha256 of the key; the key itself is shown once and never stored.
    key_hash: Mapped[str] = mapped_column(db.String(64), unique=True)
    #: First characters of the key, so a user can tell keys apart.
    prefix: Mapped[str] = mapped_column(db.String(16))
    name: Mapped[str] = mapped_column(db.String(100), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    user: Mapped[User] = relationship()


class DocumentTemplate(db.Model):
    """A named template; its content lives in immutable ``TemplateVersion`` rows."""

    __tablename__ = "document_templates"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(db.String(200))
    created_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="SET NULL"))
    #: The team that shares it; None: only its creator (and admins) see it.
    team_id: Mapped[int | None] = mapped_column(db.ForeignKey("teams.id", ondelete="SET NULL"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    #: The newest version, denormalised for the list page.
    latest_version: Mapped[int] = mapped_column(default=0)
    archived: Mapped[bool] = mapped_column(default=False)

    versions: Mapped[list["TemplateVersion"]] = relationship(
        back_populates="template", order_by="TemplateVersion.version"
    )


class TemplateVersion(db.Model):
    """One saved state of a template. Never updated: editing inserts a new version."""

    __tablename__ = "template_versions"
    __table_args__ = (UniqueConstraint("template_id", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    template_id: Mapped[int] = mapped_column(db.ForeignKey("document_templates.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column()
    #: ``html`` (the ``html`` column is the document), ``docx`` or ``pdf`` (an uploaded file, ``source_key``);
    #: ``bulksign.doc_templates.kinds`` renders each kind.
    kind: Mapped[str] = mapped_column(db.String(16), default="html", server_default="html")
    #: The document as HTML with ``{{ variable }}`` placeholders (Jinja, rendered in a sandbox); empty for files.
    html: Mapped[str] = mapped_column(db.Text)
    #: Storage key of the uploaded file (Word, PDF) as it was uploaded; None for HTML. Named by its sha256,
    #: so versions that keep the same file share it.
    source_key: Mapped[str | None] = mapped_column(db.String(500))
    #: Variable names the document uses, extracted at save time.
    variables: Mapped[list] = mapped_column(JSON, default=list)
    #: PDF templates: boxes staff placed on the pages (``pdf_forms.FieldBox.to_json()`` each: column, page, place in
    #: points, font size), filled like form fields; None for other kinds and for PDFs filled by their own fields.
    pdf_boxes: Mapped[list | None] = mapped_column(JSON)
    #: Invitation and reminder mail, as templates too.
    email_subject: Mapped[str] = mapped_column(db.Text, default="")
    email_body: Mapped[str] = mapped_column(db.Text, default="")
    reminder_subject: Mapped[str] = mapped_column(db.Text, default="")
    reminder_body: Mapped[str] = mapped_column(db.Text, default="")
    created_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    template: Mapped[DocumentTemplate] = relationship(back_populates="versions")


class Batch(db.Model):
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
    #: A ``status.BatchStatus``: pending → processing → completed | partially_failed | cancelled; written by
    #: ``states.move_batches`` only.
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
    reply_to: Mapped[str | None] = mapped_column(db.String(254))
    #: Quiet hours for reminders, local to ``timezone`` (hours 0–23); None: no quiet hours.
    quiet_hours_start: Mapped[int | None] = mapped_column()
    quiet_hours_end: Mapped[int | None] = mapped_column()
    timezone: Mapped[str] = mapped_column(db.String(64), default="UTC")
    #: Recipients confirm a one-time code (by SMS when the row has a phone, else by mail) before they can see,
    #: sign or decline the document (``one_time_codes``).
    one_time_code: Mapped[bool] = mapped_column(default=False, server_default=false())
    #: Number of requests created; counts per status are kept in ``batch_status_counts``.
    total_count: Mapped[int] = mapped_column(default=0)
    #: Client-supplied key: the same key from the same user creates one batch.
    idempotency_key: Mapped[str | None] = mapped_column(db.String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    cancelled_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: When the owner got the expiry summary, so it is sent once.
    expiry_summary_sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: When the oldest expiry not yet in an owner summary happened; None: nothing to report.
    expiry_pending_since: Mapped[datetime | None] = mapped_column(UTCDateTime)

    template_version: Mapped[TemplateVersion] = relationship()
    created_by: Mapped[User | None] = relationship()


class BatchShare(db.Model):
    """A batch shown to a named user outside its team (read only)."""

    __tablename__ = "batch_shares"

    batch_id: Mapped[int] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(db.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, index=True)
    created_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class SigningRequest(db.Model):
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
            "ix_signing_requests_working", "status", "status_changed_at",
            postgresql_where=text(sql_in(WORKING)),
            sqlite_where=text(sql_in(WORKING)),
        ),
        # Reminders and expiry scan only requests still waiting for the recipient.
        Index(
            "ix_signing_requests_waiting", "batch_id", "sent_at",
            postgresql_where=text(sql_in(WAITING_FOR_RECIPIENT)),
            sqlite_where=text(sql_in(WAITING_FOR_RECIPIENT)),
        ),
        # Expiry finds waiting requests past their deadline without visiting the others.
        Index(
            "ix_signing_requests_waiting_expiry", "expires_at",
            postgresql_where=text(sql_in(WAITING_FOR_RECIPIENT)),
            sqlite_where=text(sql_in(WAITING_FOR_RECIPIENT)),
        ),
        # The seal safety net looks only at recent signatures (a lost or failed seal job).
        Index(
            "ix_signing_requests_signed", "signed_at",
            postgresql_where=text("status = 'signed'"), sqlite_where=text("status = 'signed'"),
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

    batch: Mapped[Batch] = relationship()


class BatchStatusCount(db.Model):
    """How many requests of a batch are in one status: what the dashboard reads instead of a GROUP BY.

    Kept by ``batch_counts``: seeded with the batch, moved in the transaction of every status change.
    """

    __tablename__ = "batch_status_counts"

    batch_id: Mapped[int] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True)
    #: A request status; a batch has a row for every status, zeros included, so moves only UPDATE.
    status: Mapped[str] = mapped_column(db.String(20), primary_key=True)
    #: Requests of the batch in ``status``.
    count: Mapped[int] = mapped_column(default=0)


class Document(db.Model):
    """File metadata; the bytes live in the storage backend under ``storage_key``."""

    __tablename__ = "documents"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    request_id: Mapped[int] = mapped_column(
        BigId, db.ForeignKey("signing_requests.id", ondelete="CASCADE"), index=True
    )
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
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class SealCertificate(db.Model):
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


class Event(db.Model):
    """Append-only history of a request: the audit trail."""

    __tablename__ = "events"
    __table_args__ = (Index("ix_events_request_time", "request_id", "created_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    request_id: Mapped[int | None] = mapped_column(
        BigId, db.ForeignKey("signing_requests.id", ondelete="CASCADE")
    )
    batch_id: Mapped[int | None] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"), index=True)
    #: e.g. ``status.sent``, ``email.opened``, ``page.opened``, ``email.changed``.
    type: Mapped[str] = mapped_column(db.String(50))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    #: ``system``, ``recipient`` or ``user:<id>``.
    actor: Mapped[str] = mapped_column(db.String(50), default="system")
    ip: Mapped[str | None] = mapped_column(db.String(64))
    user_agent: Mapped[str | None] = mapped_column(db.String(500))
    details: Mapped[dict] = mapped_column(JSON, default=dict)


class OneTimeCode(db.Model):
    """A code sent to a recipient to prove they hold the mailbox or phone; the newest one of a request counts.

    The code itself is never stored: it is derived from the secret key and ``nonce`` when sent
    (``one_time_codes.derive_code``), and checked against ``code_hash``.
    """

    __tablename__ = "one_time_codes"
    __table_args__ = (Index("ix_one_time_codes_request_created", "request_id", "created_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    request_id: Mapped[int] = mapped_column(BigId, db.ForeignKey("signing_requests.id", ondelete="CASCADE"))
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


class WebhookEndpoint(db.Model):
    __tablename__ = "webhook_endpoints"

    id: Mapped[int] = mapped_column(primary_key=True)
    url: Mapped[str] = mapped_column(db.String(1000))
    #: HMAC-SHA256 key for the signature header.
    secret: Mapped[str] = mapped_column(db.String(100))
    #: Event names this endpoint wants, e.g. ["request.signed", "batch.completed"].
    events: Mapped[list] = mapped_column(JSON, default=list)
    active: Mapped[bool] = mapped_column(default=True)
    #: The team whose events it hears; None: every team's (an organisation-wide endpoint).
    team_id: Mapped[int | None] = mapped_column(db.ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    created_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WebhookDelivery(db.Model):
    __tablename__ = "webhook_deliveries"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    endpoint_id: Mapped[int] = mapped_column(db.ForeignKey("webhook_endpoints.id", ondelete="CASCADE"), index=True)
    event: Mapped[str] = mapped_column(db.String(50))
    payload: Mapped[dict] = mapped_column(JSON, default=dict)
    #: ``pending`` → ``delivered`` | ``failed``.
    status: Mapped[str] = mapped_column(db.String(20), default="pending")
    attempts: Mapped[int] = mapped_column(default=0)
    response_code: Mapped[int | None] = mapped_column()
    error: Mapped[str | None] = mapped_column(db.Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: When a pending delivery is next tried (exponential backoff after a failure).
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime, index=True)


class Export(db.Model):
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


class IdempotencyKey(db.Model):
    """An API call made with ``Idempotency-Key``: a repeat gets the stored answer instead of doing it again."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("api_key_id", "key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    #: Keys are per API key: two integrations may pick the same key without meeting.
    api_key_id: Mapped[int] = mapped_column(db.ForeignKey("api_keys.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(db.String(200))
    #: sha256 of method, path and body: the same key with another request is refused, not replayed.
    fingerprint: Mapped[str] = mapped_column(db.String(64))
    #: None while the first call is still running (a repeat then gets 409).
    status_code: Mapped[int | None] = mapped_column()
    response_body: Mapped[dict | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    #: After this the row is deleted (periodic job) and the key may be used afresh.
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)

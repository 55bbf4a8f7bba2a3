"""Staff tables: users, teams and their members, the audit of membership and role changes, API keys."""

from __future__ import annotations

import hashlib
from datetime import datetime

from flask_login import UserMixin
from sqlalchemy import Index, false
from sqlalchemy.orm import Mapped, declared_attr, mapped_column, relationship

from bulksign.core.extensions import db
from bulksign.models.base import Model, UTCDateTime, utcnow


class User(UserMixin, Model):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    #: Login name, stored lower-case.
    email: Mapped[str] = mapped_column(db.String(254), unique=True)
    #: How the person is called in mails to recipients ("Anna Schmidt asks you to sign") and on staff pages;
    #: None: the email stands in (``shown_name``).
    display_name: Mapped[str | None] = mapped_column(db.String(100))
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
    def shown_name(self) -> str:
        """The display name, else the email."""
        return self.display_name or self.email

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


class HeldForApproval:
    """A change a team that requires approval holds until a manager of the team or an admin who did not ask decides:
    who asked and when, who decided and when, and why it was rejected (the asker reads it)."""

    requested_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="SET NULL"))
    requested_at: Mapped[datetime] = mapped_column(UTCDateTime)
    decided_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="SET NULL"))
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    reason: Mapped[str | None] = mapped_column(db.Text)

    @declared_attr
    def requested_by(cls: type[HeldForApproval]) -> Mapped[User | None]:
        return relationship(User, foreign_keys=lambda: [cls.requested_by_id])

    @declared_attr
    def decided_by(cls: type[HeldForApproval]) -> Mapped[User | None]:
        return relationship(User, foreign_keys=lambda: [cls.decided_by_id])


class PasswordReset(Model):
    """A "forgot password" link mailed to a user; only the user's newest one counts, once, until it expires.

    The link's token is never stored: it is derived from the secret key, ``nonce`` and the user's password hash
    when the mail is built (``password_resets.reset_token``), so a changed password ends the link too; only its
    sha256 is kept, to find the row.
    """

    __tablename__ = "password_resets"
    __table_args__ = (Index("ix_password_resets_user_created", "user_id", "created_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(db.ForeignKey("users.id", ondelete="CASCADE"))
    #: Random input of the token's derivation (128 bits, hex).
    nonce: Mapped[str] = mapped_column(db.String(32))
    #: sha256 of the token (``tokens.hash_token``), to look the link up.
    token_hash: Mapped[str] = mapped_column(db.String(64), unique=True)
    #: The language the link was asked for in: the mail is written in it.
    locale: Mapped[str] = mapped_column(db.String(8))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    #: When the link set a new password: it is spent.
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Team(Model):
    """A department: its members see its batches and templates (``access``)."""

    __tablename__ = "teams"

    id: Mapped[int] = mapped_column(primary_key=True)
    #: Unique name, as people call the department.
    name: Mapped[str] = mapped_column(db.String(100), unique=True)
    #: The name folded by Python (``teams.name_key``): every lookup by name compares this, never the database's
    #: ``lower()``, which folds only ASCII on SQLite (and depends on the locale on PostgreSQL).
    name_key: Mapped[str] = mapped_column(db.String(300), unique=True)
    #: Its staff's new batches wait for another member's approval (a manager of the team or an admin) before
    #: anything is rendered or mailed (``batches.approval``); set by admins.
    require_approval: Mapped[bool] = mapped_column(default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class TeamMember(Model):
    """A user in a team; a user may be in several."""

    __tablename__ = "team_members"

    team_id: Mapped[int] = mapped_column(db.ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(db.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, index=True)
    added_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class MembershipChange(Model):
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


class ApiKey(Model):
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

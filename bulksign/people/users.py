"""Staff accounts and API keys: creation, authentication, roles."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from bulksign.core.errors import BulksignError
from bulksign.core.logs import log
from bulksign.core.messages import N_, N_plural
from bulksign.core.tokens import IssuedToken, hash_token, new_token
from bulksign.mail.mail_headers import CONTROL_CHARACTERS
from bulksign.models import ApiKey, User
from bulksign.people import access
from bulksign.people.access_audit import record_role

logger = logging.getLogger(__name__)

ROLES = access.ROLES
MIN_PASSWORD_LENGTH = 8
MAX_DISPLAY_NAME = 100
#: werkzeug hash method for new passwords; scrypt (werkzeug's default) unless configured
#: (PASSWORD_HASH_METHOD). The test suite uses a cheap one: 0.24 s per scrypt hash here.
hash_method = "scrypt"
#: Checked against when the email is unknown, so both failures take the same time.
_dummy_hashes: dict[str, str] = {}


def configure(*, method: str) -> None:
    """Set the hash method for new passwords (existing hashes keep verifying whatever it is)."""
    global hash_method
    generate_password_hash("probe", method=method)  # an unknown method fails at start, not at login
    hash_method = method


def _hash(password: str) -> str:
    return generate_password_hash(password, method=hash_method)


def _dummy_hash() -> str:
    if hash_method not in _dummy_hashes:
        _dummy_hashes[hash_method] = _hash("not-a-real-password")
    return _dummy_hashes[hash_method]


class UserError(BulksignError):
    """Input a person can correct; the message says how."""


def normalise_email(email: str) -> str:
    return email.strip().lower()


def display_name(name: str | None) -> str | None:
    """A display name as stored: spaces folded, at most ``MAX_DISPLAY_NAME`` characters; None when empty."""
    name = name or ""
    # Refused, not folded: it goes into mails' text and a line break there is a mistake or aimed at the reader.
    if CONTROL_CHARACTERS.search(name.strip()):
        raise UserError(N_("The name may not contain line breaks or other control characters."))
    name = " ".join(name.split())
    if len(name) > MAX_DISPLAY_NAME:
        raise UserError(
            N_plural(
                "The name may have at most %(num)s character.",
                "The name may have at most %(num)s characters.",
                MAX_DISPLAY_NAME,
            )
        )
    return name or None


def _check_password(password: str, repeat: str | None) -> None:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise UserError(
            N_plural(
                "The password must have at least %(num)s character.",
                "The password must have at least %(num)s characters.",
                MIN_PASSWORD_LENGTH,
            )
        )
    if repeat is not None and repeat != password:
        raise UserError(N_("The two passwords differ. Type the new password twice the same."))


def create_user(
    session: Session,
    *,
    email: str,
    password: str,
    role: str,
    now: datetime,
    by: User | None = None,
    name: str | None = None,
) -> User:
    """Create an account with one of ``access.ROLES``, its role recorded as given by ``by`` (None: the command
    line or a script), called ``name`` in mails and pages; teams are joined with ``teams.add_member``."""
    email = normalise_email(email)
    if "@" not in email or len(email) > 254:
        raise UserError(N_("Enter a valid email address."))
    if role not in ROLES:
        raise UserError(N_("Role must be one of: %(known)s.", known=", ".join(ROLES)))
    _check_password(password, None)
    shown = display_name(name)
    # Stored as ``normalise_email`` gives it, unique: compared as stored, the same in every database.
    exists_already = UserError(N_("A user with the email %(email)s already exists.", email=email))
    if session.scalar(select(User.id).where(User.email == email)):
        raise exists_already
    user = User(email=email, password_hash=_hash(password), role=role, created_at=now, display_name=shown)
    try:
        with session.begin_nested():  # made meanwhile by another admin: theirs stands
            session.add(user)
    except IntegrityError:
        raise exists_already from None
    log(logger, logging.INFO, "user created", user_id=user.id, role=role)
    record_role(session, user=user, old_role=None, by=by, now=now)
    return user


def set_password(session: Session, *, user: User, password: str, repeat: str | None = None) -> None:
    """Replace a user's password (``repeat``: the same typed again, where a person types it). Every session and
    reset link made before it ends (``User.get_id``, ``password_resets``)."""
    _check_password(password, repeat)
    user.password_hash = _hash(password)
    log(logger, logging.INFO, "password set", user_id=user.id)


def change_password(session: Session, *, user: User, current: str, password: str, repeat: str) -> None:
    """The user's own change: their current password first (a session left open is not enough)."""
    if not check_password_hash(user.password_hash, current):
        raise UserError(N_("Your current password is not this one. Type it again."))
    set_password(session, user=user, password=password, repeat=repeat)


def set_display_name(session: Session, *, user: User, name: str | None) -> bool:
    """Give the user the display name ``name`` (empty: none, the email stands in); False when unchanged."""
    shown = display_name(name)
    if shown == user.display_name:
        return False
    user.display_name = shown
    log(logger, logging.INFO, "display name set", user_id=user.id)
    return True


def authenticate(session: Session, *, email: str, password: str, now: datetime) -> User | None:
    """The active user with these credentials, or None (the caller must not say which part was wrong)."""
    user = session.scalar(select(User).where(User.email == normalise_email(email)))
    if user is None:
        check_password_hash(_dummy_hash(), password)
        return None
    if not check_password_hash(user.password_hash, password) or user.disabled:
        return None
    user.last_login_at = now
    return user


@dataclass(frozen=True)
class CreatedApiKey:
    """``secret`` is shown to the user once; only ``key.key_hash`` is stored."""

    key: ApiKey
    secret: str


def create_api_key(session: Session, *, user: User, name: str, now: datetime) -> CreatedApiKey:
    """Issue an API key for ``user``."""
    token: IssuedToken = new_token(prefix="bsk_")
    key = ApiKey(user_id=user.id, key_hash=token.digest, prefix=token.value[:10], name=name, created_at=now)
    session.add(key)
    session.flush()
    log(logger, logging.INFO, "api key created", user_id=user.id, api_key_id=key.id)
    return CreatedApiKey(key=key, secret=token.value)


def api_key_for_secret(session: Session, *, secret: str, now: datetime) -> ApiKey | None:
    """This unrevoked key of an active user (``.user`` is who calls), or None."""
    key = session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_token(secret), ApiKey.revoked_at.is_(None)))
    if key is None or key.user.disabled:
        return None
    key.last_used_at = now
    return key


def active_api_key_count(session: Session, *, user_id: int) -> int:
    """How many of the user's API keys are not revoked (what disabling the account stops)."""
    return (
        session.scalar(
            select(func.count()).select_from(ApiKey).where(ApiKey.user_id == user_id, ApiKey.revoked_at.is_(None))
        )
        or 0
    )


def set_disabled(session: Session, *, user: User, disabled: bool, by: User) -> None:
    """Disable or re-enable an account (its API keys stop or start working with it)."""
    if user.id == by.id and disabled:
        raise UserError(N_("You cannot disable your own account."))
    user.disabled = disabled
    log(logger, logging.INFO, "user disabled" if disabled else "user enabled", user_id=user.id, by_user_id=by.id)


def set_role(session: Session, *, user: User, role: str, by: User, now: datetime) -> bool:
    """Change a user's role (recorded); False when it was that already. An admin cannot demote themselves
    (someone must be left to manage users)."""
    if role not in ROLES:
        raise UserError(N_("Role must be one of: %(known)s.", known=", ".join(ROLES)))
    if role == user.role:
        return False
    if user.id == by.id:
        raise UserError(N_("You cannot change your own role."))
    old_role, user.role = user.role, role
    record_role(session, user=user, old_role=old_role, by=by, now=now)
    return True


def revoke_api_key(session: Session, *, key_id: int, now: datetime) -> ApiKey | None:
    """Revoke a key; it stops working at once. None when there is no such key."""
    key = session.get(ApiKey, key_id)
    if key is not None and key.revoked_at is None:
        key.revoked_at = now
        log(logger, logging.INFO, "api key revoked", user_id=key.user_id, api_key_id=key.id)
    return key

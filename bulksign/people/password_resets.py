"""Forgot password: a personal link by mail that sets a new password, once, within ``LINK_TTL``.
More in docs/architecture/people.md."""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import render_template
from flask_babel import force_locale
from flask_mail import Message
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from bulksign.core.errors import BulksignError
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.core.tokens import hash_token, new_nonce
from bulksign.mail.mailer import MailNotNeeded, builder, queue_mail
from bulksign.models import User, utcnow
from bulksign.models.base import rows_changed
from bulksign.models.mail import MailKind
from bulksign.models.people import PasswordReset
from bulksign.people.users import normalise_email, set_password
from bulksign.work.pipeline import enqueue_sends

logger = logging.getLogger(__name__)

#: How long a mailed link works.
LINK_TTL = timedelta(hours=1)
#: A second request for the same address within this gets no second mail (the first link still works).
RESEND_AFTER = timedelta(minutes=1)
MAIL_KIND = MailKind.PASSWORD_RESET
#: Where the link leads (the staff auth blueprint's reset page).
RESET_PATH = "/auth/reset/"


def reset_token(*, secret: str, reset: PasswordReset, password_hash: str) -> str:
    """The link's token: bound to the row, its random nonce and the password it replaces."""
    message = f"password-reset:{reset.id}:{reset.nonce}:{password_hash}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def reset_url(*, app_url: str, token: str) -> str:
    return f"{app_url}{RESET_PATH}{token}"


def _newest_id(session: Session, user_id: int) -> int | None:
    return session.scalar(
        select(PasswordReset.id)
        .where(PasswordReset.user_id == user_id)
        .order_by(PasswordReset.created_at.desc(), PasswordReset.id.desc())
        .limit(1)
    )


def request_reset(session: Session, *, email: str, locale: str, secret: str, now: datetime) -> bool:
    """Mail a reset link to the active account with ``email``, if there is one; committed and queued.

    True when a mail was queued (for logs and tests only: the person asking is told the same either way).
    """
    user = session.scalar(select(User).where(User.email == normalise_email(email)[:254]))
    if user is None or user.disabled:
        log(logger, logging.INFO, "password reset asked for no active account")
        return False
    newest = session.get(PasswordReset, _newest_id(session, user.id) or 0)
    if newest is not None and newest.used_at is None and newest.created_at > now - RESEND_AFTER:
        log(logger, logging.INFO, "password reset asked again too soon", user_id=user.id)
        return False
    reset = PasswordReset(
        user_id=user.id, nonce=new_nonce(), token_hash="", locale=locale, created_at=now, expires_at=now + LINK_TTL
    )
    session.add(reset)
    session.flush()
    reset.token_hash = hash_token(reset_token(secret=secret, reset=reset, password_hash=user.password_hash))

    with force_locale(locale):
        subject = str(N_("Set a new password"))
    mail = queue_mail(
        session, key=f"password-reset-{reset.id}", kind=MAIL_KIND, to_email=user.email, subject=subject, now=now
    )
    session.commit()
    log(logger, logging.INFO, "password reset mailed", user_id=user.id, reset_id=reset.id)
    # Ahead of bulk mail: the person is waiting for it, and the link lives an hour.
    enqueue_sends([mail.id], at_front=True)
    return True


@dataclass(frozen=True)
class ResetLink:
    #: ``valid``; ``expired``; ``spent`` (used, replaced by a newer link, the password changed since, the account
    #: disabled); ``unknown`` (no such link: mistyped, cut short).
    status: str
    reset: PasswordReset | None = None
    user: User | None = None


def check_link(session: Session, *, token: str, secret: str, now: datetime) -> ResetLink:
    """What a reset link is worth now."""
    reset = session.scalar(select(PasswordReset).where(PasswordReset.token_hash == hash_token(token[:200])))
    if reset is None:
        return ResetLink("unknown")
    user = session.get_one(User, reset.user_id)
    expected = reset_token(secret=secret, reset=reset, password_hash=user.password_hash)
    if (
        reset.used_at is not None
        or user.disabled
        or _newest_id(session, user.id) != reset.id
        or not hmac.compare_digest(expected, token)
    ):
        return ResetLink("spent", reset, user)
    if reset.expires_at <= now:
        return ResetLink("expired", reset, user)
    return ResetLink("valid", reset, user)


class ResetRefused(BulksignError):
    """The link no longer sets a password; ``link`` says why."""

    def __init__(self, link: ResetLink):
        super().__init__(link.status)
        self.link = link


def complete_reset(session: Session, *, token: str, password: str, repeat: str, secret: str, now: datetime) -> User:
    """Set the password through a valid link and spend it (compare-and-set: two tabs, one wins); the caller
    commits. ResetRefused for a link that no longer works, UserError for a password the rules refuse."""
    link = check_link(session, token=token, secret=secret, now=now)
    reset, user = link.reset, link.user
    if link.status != "valid" or reset is None or user is None:
        raise ResetRefused(link)
    set_password(session, user=user, password=password, repeat=repeat)
    won = rows_changed(
        session,
        update(PasswordReset)
        .where(PasswordReset.id == reset.id, PasswordReset.used_at.is_(None))
        .values(used_at=now)
        .execution_options(synchronize_session=False),
    )
    if not won:
        session.rollback()
        raise ResetRefused(ResetLink("spent", reset, user))
    log(logger, logging.INFO, "password reset used", user_id=user.id, reset_id=reset.id)
    return user


@builder(MAIL_KIND)
def build_reset_mail(session: Session, mail, app):
    """The mail with the link: the token is derived now and written nowhere."""

    reset_id = int(mail.message_id.strip("<>").partition("@")[0].removeprefix("password-reset-"))
    reset = session.get(PasswordReset, reset_id)
    if reset is None:
        raise MailNotNeeded("the account is gone")
    user = session.get_one(User, reset.user_id)
    token = reset_token(secret=app.config["SECRET_KEY"], reset=reset, password_hash=user.password_hash)
    link = check_link(session, token=token, secret=app.config["SECRET_KEY"], now=utcnow())
    if link.status != "valid":
        raise MailNotNeeded(f"the reset link is {link.status}")
    with force_locale(reset.locale):
        body = render_template(
            "emails/password_reset.txt",
            user=user,
            link=reset_url(app_url=app.config["APP_URL"], token=token),
            minutes=int(LINK_TTL.total_seconds() // 60),
        )
    message = Message(
        subject=mail.subject, recipients=[mail.to_email], body=body.strip(), sender=app.config["MAIL_DEFAULT_SENDER"]
    )
    message.msgId = mail.message_id
    return message

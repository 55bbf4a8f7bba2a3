"""One-time codes: before the document of a batch that asks for one can be seen, signed or declined, the
recipient proves they hold the mailbox or phone of their row.
"""

from __future__ import annotations

import hmac
import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, cast

from flask import Flask
from flask_mail import Message
from sqlalchemy import CursorResult, func, select, update
from sqlalchemy.orm import Session

from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.core.tokens import new_nonce
from bulksign.documents.audit_record import document_title
from bulksign.mail.mailer import MailNotNeeded, builder, queue_mail
from bulksign.models import (
    CountersignLink,
    OneTimeCode,
    Party,
    SigningRequest,
    utcnow,
)
from bulksign.models.mail import MailKind, OutgoingMail
from bulksign.signing.code_owners import (
    CODE_DIGITS,
    Owner,
    binding,
    code_hash,
    derive_code,
    mask,
    newest_code,
    of_link,
    of_request,
)
from bulksign.work.pipeline import enqueue_sends
from bulksign.work.queues import SMS_CODE

logger = logging.getLogger(__name__)

CODE_TTL = timedelta(minutes=10)
MAX_TRIES = 5
RESEND_AFTER = timedelta(seconds=60)
MAX_CODES_PER_DAY = 10
#: How long a verified code lets its session see, sign or decline the document.
VERIFIED_FOR = timedelta(hours=2)
MAIL_KIND = MailKind.ONE_TIME_CODE
_NOT_DIGITS = re.compile(r"[\s\-.]")


def required(request: SigningRequest) -> bool:
    """Whether the request's batch asks for a one-time code."""
    return bool(request.batch.one_time_code)


def is_verified(
    session: Session, *, request_id: int, code_id: int | None, now: datetime, party_id: int | None = None
) -> bool:
    """Whether ``code_id`` (kept by the signer's session) is a verified code of this request and party (None: the
    recipient), still fresh."""
    code = _fresh(session, code_id, now=now)
    return code is not None and code.request_id == request_id and code.party_id == party_id


def link_verified(session: Session, *, link_id: int, code_id: int | None, now: datetime) -> bool:
    """Whether ``code_id`` (kept by the countersigner's session) is a verified code of this link, still fresh."""
    code = _fresh(session, code_id, now=now)
    return code is not None and code.countersign_link_id == link_id


def _fresh(session: Session, code_id: int | None, *, now: datetime) -> OneTimeCode | None:
    """The code ``code_id`` if it was verified less than ``VERIFIED_FOR`` ago."""
    code = session.get(OneTimeCode, code_id) if code_id else None
    if code is None or code.verified_at is None or now - code.verified_at >= VERIFIED_FOR:
        return None
    return code


def may_act(
    session: Session, *, request: SigningRequest, code_id: int | None, now: datetime, party: Party | None = None
) -> bool:
    """Whether the recipient (or ``party``) may see, sign or decline: no code asked for, or a verified one."""
    return not required(request) or is_verified(
        session, request_id=request.id, code_id=code_id, now=now, party_id=party.id if party is not None else None
    )


class CodeState(StrEnum):
    VERIFIED = "verified"
    #: A code is out and may be entered.
    PENDING = "pending"
    #: Its tries are used up.
    LOCKED = "locked"
    EXPIRED = "expired"
    #: No code asked for yet.
    NONE = "none"


@dataclass(frozen=True)
class CodeStatus:
    """What the signing page says about codes."""

    state: CodeState
    channel: str
    #: The masked address or number the next (or current) code goes to.
    masked_to: str
    expires_at: datetime | None = None


def status(
    session: Session, *, request: SigningRequest, code_id: int | None, now: datetime, party: Party | None = None
) -> CodeStatus:
    """Where the recipient (or ``party``) stands with codes on ``request`` (whose batch asks for one)."""
    verified = is_verified(
        session, request_id=request.id, code_id=code_id, now=now, party_id=party.id if party is not None else None
    )
    return _status(session, of_request(request, party), verified=verified, now=now)


def link_status(session: Session, *, link: CountersignLink, code_id: int | None, now: datetime) -> CodeStatus:
    """Where the countersigner stands with the codes of their link (whose batch asks for one)."""
    verified = link_verified(session, link_id=link.id, code_id=code_id, now=now)
    return _status(session, of_link(session, link), verified=verified, now=now)


def _status(session: Session, owner: Owner, *, verified: bool, now: datetime) -> CodeStatus:
    if verified:
        return CodeStatus(CodeState.VERIFIED, owner.channel, mask(owner.channel, owner.destination))
    code = newest_code(session, owner)
    if code is None:
        return CodeStatus(CodeState.NONE, owner.channel, mask(owner.channel, owner.destination))
    # A code verified by another browser is spent for this one: it needs a code of its own.
    if code.locked_at:
        state = CodeState.LOCKED
    elif code.expires_at <= now or code.verified_at:
        state = CodeState.EXPIRED
    else:
        state = CodeState.PENDING
    return CodeStatus(state, code.channel, mask(code.channel, code.destination), expires_at=code.expires_at)


class SendStatus(StrEnum):
    SENT = "sent"
    #: Ask again at ``retry_at``.
    TOO_SOON = "too_soon"
    #: The day's codes are used up.
    TOO_MANY = "too_many"


@dataclass(frozen=True)
class CodeSent:
    status: SendStatus
    code_id: int | None = None
    channel: str = ""
    masked_to: str = ""
    retry_at: datetime | None = None
    #: For the caller to queue after the commit: the mail row (mail channel) to send.
    mail_id: int | None = None


def send_code(
    session: Session,
    *,
    request_id: int,
    secret: str,
    now: datetime,
    ip: str | None,
    user_agent: str | None,
    party: Party | None = None,
) -> CodeSent:
    """Issue a new code for the request's recipient, or ``party`` (older ones stop counting), and write how it goes
    out; commits.

    The caller then queues the mail (``mail_id``) or the SMS job (``code_id``): see ``dispatch``.
    """
    owner = of_request(session.get_one(SigningRequest, request_id), party)
    return _send(session, owner, secret=secret, now=now, ip=ip, user_agent=user_agent)


def send_link_code(
    session: Session,
    *,
    link: CountersignLink,
    secret: str,
    now: datetime,
    ip: str | None,
    user_agent: str | None,
) -> CodeSent:
    """``send_code`` for a countersigner's link: one code for the page of all their documents; commits."""
    return _send(session, of_link(session, link), secret=secret, now=now, ip=ip, user_agent=user_agent)


def _send(
    session: Session, owner: Owner, *, secret: str, now: datetime, ip: str | None, user_agent: str | None
) -> CodeSent:
    from flask_babel import force_locale

    # Serialise issues for one owner (a double click): the row lock makes the count below exact.
    session.execute(owner.lock())
    last = newest_code(session, owner)
    if last is not None and last.created_at + RESEND_AFTER > now:
        session.rollback()
        return CodeSent(SendStatus.TOO_SOON, retry_at=last.created_at + RESEND_AFTER)
    today = (
        session.scalar(
            select(func.count())
            .select_from(OneTimeCode)
            .where(owner.codes(), OneTimeCode.created_at > now - timedelta(days=1))
        )
        or 0
    )
    if today >= MAX_CODES_PER_DAY:
        session.rollback()
        return CodeSent(SendStatus.TOO_MANY)
    channel, destination = owner.channel, owner.destination
    nonce = new_nonce()
    code = derive_code(secret=secret, bound_to=owner.bound_to, nonce=nonce)
    row = OneTimeCode(
        **owner.ids,
        channel=channel,
        destination=destination[:254],
        nonce=nonce,
        code_hash=code_hash(secret=secret, bound_to=owner.bound_to, nonce=nonce, code=code),
        created_at=now,
        expires_at=now + CODE_TTL,
        attempts=0,
    )
    session.add(row)
    session.flush()
    masked = mask(channel, destination)
    details = {"code_id": row.id, "channel": channel, "to": masked}
    session.add(owner.event("code.sent", now=now, ip=ip, user_agent=user_agent, details=details))
    mail_id = None
    if channel == "email":
        with force_locale(owner.batch.language):
            subject = str(N_("Your code to sign “%(document)s”", document=document_title(owner.batch)))
        # The subject is stored with the mail row: it must not hold the code (the body, built at send time, does).
        mail_id = queue_mail(
            session,
            key=f"code-{row.id}",
            kind=MAIL_KIND,
            to_email=destination,
            subject=subject,
            now=now,
            request_id=owner.request.id if owner.request is not None else None,
            batch_id=owner.batch.id,
        ).id
    session.commit()
    log(logger, logging.INFO, "one-time code issued", code_id=row.id, channel=channel, **owner.ids)
    return CodeSent(SendStatus.SENT, code_id=row.id, channel=channel, masked_to=masked, mail_id=mail_id)


def dispatch(sent: CodeSent) -> None:
    """Queue the delivery of a code ``send_code`` issued (committed), ahead of bulk mail: it lives 10 minutes."""
    if sent.mail_id is not None:
        enqueue_sends([sent.mail_id], at_front=True)
    elif sent.code_id is not None:
        SMS_CODE.enqueue_unique([sent.code_id])


class CheckStatus(StrEnum):
    VERIFIED = "verified"
    #: ``tries_left`` more.
    WRONG = "wrong"
    #: This try or an earlier one used the last.
    LOCKED = "locked"
    EXPIRED = "expired"
    #: Verified before: a code works once.
    USED = "used"
    NO_CODE = "no_code"
    #: Not 6 digits; not counted as a try.
    INVALID = "invalid"


@dataclass(frozen=True)
class CodeCheck:
    status: CheckStatus
    code_id: int | None = None
    tries_left: int = 0
    #: For ``invalid``: what to correct (translated where it is shown).
    message: N_ | str = ""


def verify_code(
    session: Session,
    *,
    request_id: int,
    code: str,
    secret: str,
    now: datetime,
    ip: str | None,
    user_agent: str | None,
    party: Party | None = None,
) -> CodeCheck:
    """Check a typed code against the newest code of the request's recipient (or ``party``); every try counts, and is
    an event; commits."""
    owner = of_request(session.get_one(SigningRequest, request_id), party)
    return _verify(session, owner, code=code, secret=secret, now=now, ip=ip, user_agent=user_agent)


def verify_link_code(
    session: Session,
    *,
    link: CountersignLink,
    code: str,
    secret: str,
    now: datetime,
    ip: str | None,
    user_agent: str | None,
) -> CodeCheck:
    """``verify_code`` for a countersigner's link; commits."""
    return _verify(session, of_link(session, link), code=code, secret=secret, now=now, ip=ip, user_agent=user_agent)


def _verify(
    session: Session, owner: Owner, *, code: str, secret: str, now: datetime, ip: str | None, user_agent: str | None
) -> CodeCheck:
    typed = _NOT_DIGITS.sub("", code or "")
    if not (len(typed) == CODE_DIGITS and typed.isascii() and typed.isdigit()):
        return CodeCheck(CheckStatus.INVALID, message=N_("Type the %(count)s digits of the code.", count=CODE_DIGITS))
    current = newest_code(session, owner)
    if current is None:
        return CodeCheck(CheckStatus.NO_CODE)
    if current.verified_at is not None:
        return CodeCheck(CheckStatus.USED, code_id=current.id)
    if current.locked_at is not None:
        return CodeCheck(CheckStatus.LOCKED, code_id=current.id)
    if current.expires_at <= now:
        return CodeCheck(CheckStatus.EXPIRED, code_id=current.id)
    # Count the try before comparing, in one statement: parallel guesses cannot get past MAX_TRIES.
    attempts = session.scalar(
        update(OneTimeCode)
        .where(OneTimeCode.id == current.id, OneTimeCode.attempts < MAX_TRIES, OneTimeCode.verified_at.is_(None))
        .values(attempts=OneTimeCode.attempts + 1)
        .returning(OneTimeCode.attempts)
    )
    if attempts is None:
        session.rollback()
        session.refresh(current)
        return CodeCheck(CheckStatus.USED if current.verified_at else CheckStatus.LOCKED, code_id=current.id)
    expected = code_hash(secret=secret, bound_to=owner.bound_to, nonce=current.nonce, code=typed)
    details = {"code_id": current.id, "channel": current.channel}
    if hmac.compare_digest(expected, current.code_hash):
        won = cast(
            CursorResult[Any],
            session.execute(
                update(OneTimeCode)
                .where(OneTimeCode.id == current.id, OneTimeCode.verified_at.is_(None))
                .values(verified_at=now)
            ),
        ).rowcount
        if not won:  # the same code entered twice at once: the other try used it
            session.rollback()
            return CodeCheck(CheckStatus.USED, code_id=current.id)
        session.add(owner.event("code.verified", details=details, now=now, ip=ip, user_agent=user_agent))
        session.commit()
        return CodeCheck(CheckStatus.VERIFIED, code_id=current.id)
    tries_left = MAX_TRIES - attempts
    session.add(
        owner.event("code.failed", details={**details, "tries_left": tries_left}, now=now, ip=ip, user_agent=user_agent)
    )
    if tries_left == 0:
        session.execute(update(OneTimeCode).where(OneTimeCode.id == current.id).values(locked_at=now))
        session.add(owner.event("code.locked", details=details, now=now, ip=ip, user_agent=user_agent))
    session.commit()
    log(logger, logging.INFO, "wrong one-time code", code_id=current.id, tries_left=tries_left, **owner.ids)
    return CodeCheck(CheckStatus.WRONG if tries_left else CheckStatus.LOCKED, code_id=current.id, tries_left=tries_left)


def code_text(session: Session, *, code_id: int, secret: str, now: datetime) -> tuple[OneTimeCode, str] | None:
    """The code row and the message that carries its code (in the batch's language), or None when the code
    no longer counts (a newer one was issued, it was used, locked or ran out): sending it would only confuse."""
    from flask import render_template
    from flask_babel import force_locale

    row = session.get(OneTimeCode, code_id)
    if row is None:
        return None
    if row.countersign_link_id is not None:
        owner = of_link(session, session.get_one(CountersignLink, row.countersign_link_id))
    else:
        party = session.get(Party, row.party_id) if row.party_id is not None else None
        owner = of_request(session.get_one(SigningRequest, row.request_id), party)
    newest = newest_code(session, owner)
    if newest is None or newest.id != row.id or row.verified_at or row.locked_at or row.expires_at <= now:
        return None
    code = derive_code(secret=secret, bound_to=binding(row), nonce=row.nonce)
    with force_locale(owner.batch.language):
        text = render_template(
            f"emails/one_time_code_{row.channel}.txt",
            code=code,
            name=owner.name,
            document=document_title(owner.batch),
            minutes=int(CODE_TTL.total_seconds() // 60),
        )
    return row, text.strip()


@builder(MAIL_KIND)
def build_code_mail(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """The mail that carries a code: the body is made now, from the derived code, and never stored."""

    code_id = int(mail.message_id.strip("<>").partition("@")[0].removeprefix("code-"))
    found = code_text(session, code_id=code_id, secret=app.config["SECRET_KEY"], now=utcnow())
    if found is None:
        raise MailNotNeeded("a newer code was asked for, or this one was used or ran out")
    message = Message(
        subject=mail.subject, recipients=[mail.to_email], body=found[1], sender=app.config["MAIL_DEFAULT_SENDER"]
    )
    message.msgId = mail.message_id
    return message

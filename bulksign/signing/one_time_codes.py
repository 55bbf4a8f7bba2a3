"""One-time codes: before the document of a batch that asks for one can be seen, signed or declined, the
recipient proves they hold the mailbox or phone of their row.

On request from the signing page a 6-digit code goes by SMS when the row has a phone number, else by
mail. It is valid ``CODE_TTL``, allows ``MAX_TRIES`` tries, and belongs to one request: only the newest
code of that request is compared, through a hash that names the request. A new code may be asked for
after ``RESEND_AFTER``, at most ``MAX_CODES_PER_DAY`` a day: 5 tries of 10 codes is 50 guesses of a
million a day.

The code is never stored. It is derived from the secret key and a random nonce (HMAC), so the mail or
SMS job can re-derive it (a retried send sends the same code) while the row keeps only the nonce and a
keyed hash: a copy of the database alone neither holds codes nor lets them be guessed offline.

A verified code vouches for the browser session that entered it (the caller keeps its id, e.g. in the
signed session cookie) for ``VERIFIED_FOR``, not for the link: a forwarded link still needs a code.
Every step is an event of the request, printed on the audit certificate.

Every other party of a document several sign (issue 29) proves the same for its own phone or mailbox (its
``<role>_phone`` when given, else its address): the functions take ``party`` (a ``Party`` other than the
recipient; None: the recipient, whose codes are the request's), its codes carry ``party_id``, and only the newest
code of that party counts. Its events name the role.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.core.tokens import new_nonce
from bulksign.documents.signed_pdf import document_title
from bulksign.mail.mailer import MailNotNeeded, builder, queue_mail
from bulksign.models import RECIPIENT_ROLE, Event, OneTimeCode, Party, SigningRequest, utcnow
from bulksign.work.pipeline import enqueue_sends
from bulksign.work.queues import SMS_CODE

logger = logging.getLogger(__name__)

CODE_DIGITS = 6
CODE_TTL = timedelta(minutes=10)
MAX_TRIES = 5
RESEND_AFTER = timedelta(seconds=60)
MAX_CODES_PER_DAY = 10
#: How long a verified code lets its session see, sign or decline the document.
VERIFIED_FOR = timedelta(hours=2)
MAIL_KIND = "one_time_code"
_NOT_DIGITS = re.compile(r"[\s\-.]")


def derive_code(*, secret: str, request_id: int, nonce: str) -> str:
    """The code of one issue: HMAC(secret, request id + nonce) reduced to ``CODE_DIGITS`` digits."""
    mac = hmac.new(secret.encode(), f"one-time-code:{request_id}:{nonce}".encode(), hashlib.sha256).digest()
    return str(int.from_bytes(mac[:8], "big") % 10**CODE_DIGITS).zfill(CODE_DIGITS)


def code_hash(*, secret: str, request_id: int, nonce: str, code: str) -> str:
    """What is stored and compared: the code keyed by the secret and bound to its request and issue."""
    return hmac.new(
        secret.encode(), f"one-time-code-check:{request_id}:{nonce}:{code}".encode(), hashlib.sha256
    ).hexdigest()


def mask(channel: str, destination: str) -> str:
    """Enough of the address or number for the recipient to recognise it, not enough to learn it."""
    if channel == "sms":
        digits = re.sub(r"\D", "", destination)
        return "•" * max(len(digits) - 2, 3) + digits[-2:]
    local, _at, domain = destination.partition("@")
    return f"{local[:1]}•••@{domain}"


def code_party(party: Party | None) -> Party | None:
    """The party whose own codes these are: ``party`` unless it is the recipient, whose codes are the request's."""
    return party if party is not None and party.role != RECIPIENT_ROLE else None


def channel_of(request: SigningRequest, party: Party | None = None) -> tuple[str, str]:
    """``("sms", phone)`` when the row (or the party) has a phone number, else ``("email", address)``."""
    phone = ((party.phone if party is not None else request.phone) or "").strip()
    if len(re.sub(r"\D", "", phone)) >= 6:
        return "sms", phone
    return "email", party.email if party is not None else request.email


def required(request: SigningRequest) -> bool:
    """Whether the request's batch asks for a one-time code."""
    return bool(request.batch.one_time_code)


def _newest(session: Session, request_id: int, party_id: int | None = None) -> OneTimeCode | None:
    return session.scalar(
        select(OneTimeCode)
        .where(OneTimeCode.request_id == request_id, _of_party(party_id))
        .order_by(OneTimeCode.created_at.desc(), OneTimeCode.id.desc())
        .limit(1)
    )


def _of_party(party_id: int | None):
    """The codes of the party ``party_id``, or the recipient's (None)."""
    return OneTimeCode.party_id.is_(None) if party_id is None else OneTimeCode.party_id == party_id


def is_verified(
    session: Session, *, request_id: int, code_id: int | None, now: datetime, party_id: int | None = None
) -> bool:
    """Whether ``code_id`` (kept by the signer's session) is a verified code of this request and party (None: the
    recipient), still fresh."""
    if not code_id:
        return False
    code = session.get(OneTimeCode, code_id)
    return (
        code is not None
        and code.request_id == request_id
        and code.party_id == party_id
        and code.verified_at is not None
        and now - code.verified_at < VERIFIED_FOR
    )


def may_act(
    session: Session, *, request: SigningRequest, code_id: int | None, now: datetime, party: Party | None = None
) -> bool:
    """Whether the recipient (or ``party``) may see, sign or decline: no code asked for, or a verified one."""
    return not required(request) or is_verified(
        session, request_id=request.id, code_id=code_id, now=now, party_id=party.id if party is not None else None
    )


@dataclass(frozen=True)
class CodeStatus:
    """What the signing page says about codes."""

    #: ``verified``, ``pending`` (a code is out and may be entered), ``locked`` (tries used up), ``expired``
    #: or ``none`` (no code asked for yet).
    state: str
    channel: str
    #: The masked address or number the next (or current) code goes to.
    masked_to: str
    expires_at: datetime | None = None


def status(
    session: Session, *, request: SigningRequest, code_id: int | None, now: datetime, party: Party | None = None
) -> CodeStatus:
    """Where the recipient (or ``party``) stands with codes on ``request`` (whose batch asks for one)."""
    party_id = party.id if party is not None else None
    channel, destination = channel_of(request, party)
    if is_verified(session, request_id=request.id, code_id=code_id, now=now, party_id=party_id):
        return CodeStatus("verified", channel, mask(channel, destination))
    code = _newest(session, request.id, party_id)
    if code is None:
        return CodeStatus("none", channel, mask(channel, destination))
    # A code verified by another browser is spent for this one: it needs a code of its own.
    state = "locked" if code.locked_at else "expired" if code.expires_at <= now or code.verified_at else "pending"
    return CodeStatus(state, code.channel, mask(code.channel, code.destination), expires_at=code.expires_at)


@dataclass(frozen=True)
class CodeSent:
    #: ``sent``, ``too_soon`` (ask again at ``retry_at``) or ``too_many`` (the day's codes are used up).
    status: str
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
    from flask_babel import force_locale

    request = session.get(SigningRequest, request_id)
    # Serialise issues for one request (a double click): the row lock makes the count below exact.
    session.execute(select(SigningRequest.id).where(SigningRequest.id == request_id).with_for_update())
    party_id = party.id if party is not None else None
    last = _newest(session, request_id, party_id)
    if last is not None and last.created_at + RESEND_AFTER > now:
        session.rollback()
        return CodeSent("too_soon", retry_at=last.created_at + RESEND_AFTER)
    today = session.scalar(
        select(func.count())
        .select_from(OneTimeCode)
        .where(
            OneTimeCode.request_id == request_id,
            _of_party(party_id),
            OneTimeCode.created_at > now - timedelta(days=1),
        )
    )
    if today >= MAX_CODES_PER_DAY:
        session.rollback()
        return CodeSent("too_many")
    channel, destination = channel_of(request, party)
    nonce = new_nonce()
    code = derive_code(secret=secret, request_id=request_id, nonce=nonce)
    row = OneTimeCode(
        request_id=request_id,
        party_id=party_id,
        channel=channel,
        destination=destination[:254],
        nonce=nonce,
        code_hash=code_hash(secret=secret, request_id=request_id, nonce=nonce, code=code),
        created_at=now,
        expires_at=now + CODE_TTL,
        attempts=0,
    )
    session.add(row)
    session.flush()
    masked = mask(channel, destination)
    _event(
        session,
        request,
        "code.sent",
        now=now,
        ip=ip,
        user_agent=user_agent,
        details={"code_id": row.id, "channel": channel, "to": masked, **_role(party)},
    )
    mail_id = None
    if channel == "email":
        with force_locale(request.batch.language):
            subject = str(N_("Your code to sign “%(document)s”", document=document_title(request.batch)))
        # The subject is stored with the mail row: it must not hold the code (the body, built at send time, does).
        mail_id = queue_mail(
            session,
            key=f"code-{row.id}",
            kind=MAIL_KIND,
            to_email=destination,
            subject=subject,
            now=now,
            request_id=request_id,
            batch_id=request.batch_id,
        ).id
    session.commit()
    log(logger, logging.INFO, "one-time code issued", request_id=request_id, code_id=row.id, channel=channel)
    return CodeSent("sent", code_id=row.id, channel=channel, masked_to=masked, mail_id=mail_id)


def dispatch(sent: CodeSent) -> None:
    """Queue the delivery of a code ``send_code`` issued (committed), ahead of bulk mail: it lives 10 minutes."""
    if sent.mail_id is not None:
        enqueue_sends([sent.mail_id], at_front=True)
    elif sent.code_id is not None:
        SMS_CODE.enqueue_unique([sent.code_id])


@dataclass(frozen=True)
class CodeCheck:
    #: ``verified``, ``wrong`` (``tries_left`` more), ``locked`` (this try or an earlier one used the last),
    #: ``expired``, ``used`` (verified before: a code works once), ``no_code`` or ``invalid`` (not 6 digits;
    #: not counted as a try).
    status: str
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
    typed = _NOT_DIGITS.sub("", code or "")
    if not (len(typed) == CODE_DIGITS and typed.isascii() and typed.isdigit()):
        return CodeCheck("invalid", message=N_("Type the %(count)s digits of the code.", count=CODE_DIGITS))
    request = session.get(SigningRequest, request_id)
    current = _newest(session, request_id, party.id if party is not None else None)
    if current is None:
        return CodeCheck("no_code")
    if current.verified_at is not None:
        return CodeCheck("used", code_id=current.id)
    if current.locked_at is not None:
        return CodeCheck("locked", code_id=current.id)
    if current.expires_at <= now:
        return CodeCheck("expired", code_id=current.id)
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
        return CodeCheck("used" if current.verified_at else "locked", code_id=current.id)
    expected = code_hash(secret=secret, request_id=request_id, nonce=current.nonce, code=typed)
    details = {"code_id": current.id, "channel": current.channel, **_role(party)}
    if hmac.compare_digest(expected, current.code_hash):
        won = session.execute(
            update(OneTimeCode)
            .where(OneTimeCode.id == current.id, OneTimeCode.verified_at.is_(None))
            .values(verified_at=now)
        ).rowcount
        if not won:  # the same code entered twice at once: the other try used it
            session.rollback()
            return CodeCheck("used", code_id=current.id)
        _event(session, request, "code.verified", now=now, ip=ip, user_agent=user_agent, details=details)
        session.commit()
        return CodeCheck("verified", code_id=current.id)
    tries_left = MAX_TRIES - attempts
    _event(
        session,
        request,
        "code.failed",
        now=now,
        ip=ip,
        user_agent=user_agent,
        details={**details, "tries_left": tries_left},
    )
    if tries_left == 0:
        session.execute(update(OneTimeCode).where(OneTimeCode.id == current.id).values(locked_at=now))
        _event(session, request, "code.locked", now=now, ip=ip, user_agent=user_agent, details=details)
    session.commit()
    log(logger, logging.INFO, "wrong one-time code", request_id=request_id, code_id=current.id, tries_left=tries_left)
    return CodeCheck("wrong" if tries_left else "locked", code_id=current.id, tries_left=tries_left)


def _role(party: Party | None) -> dict:
    """What a code's events say of whose it is: the role of a party other than the recipient."""
    return {"role": party.role} if party is not None else {}


def _event(
    session: Session,
    request: SigningRequest,
    type_: str,
    *,
    now: datetime,
    ip: str | None,
    user_agent: str | None,
    details: dict,
) -> None:
    session.add(
        Event(
            request_id=request.id,
            batch_id=request.batch_id,
            type=type_,
            created_at=now,
            actor="recipient",
            ip=ip,
            user_agent=(user_agent or "")[:500],
            details=details,
        )
    )


def code_text(session: Session, *, code_id: int, secret: str, now: datetime) -> tuple[OneTimeCode, str] | None:
    """The code row and the message that carries its code (in the batch's language), or None when the code
    no longer counts (a newer one was issued, it was used, locked or ran out): sending it would only confuse."""
    from flask import render_template
    from flask_babel import force_locale

    row = session.get(OneTimeCode, code_id)
    if row is None:
        return None
    newest = _newest(session, row.request_id, row.party_id)
    if newest.id != row.id or row.verified_at or row.locked_at or row.expires_at <= now:
        return None
    request = session.get(SigningRequest, row.request_id)
    party = session.get(Party, row.party_id) if row.party_id is not None else None
    code = derive_code(secret=secret, request_id=row.request_id, nonce=row.nonce)
    with force_locale(request.batch.language):
        text = render_template(
            f"emails/one_time_code_{row.channel}.txt",
            code=code,
            name=(party.name or party.email) if party is not None else (request.name or request.email),
            document=document_title(request.batch),
            minutes=int(CODE_TTL.total_seconds() // 60),
        )
    return row, text.strip()


@builder(MAIL_KIND)
def build_code_mail(session: Session, mail, app):
    """The mail that carries a code: the body is made now, from the derived code, and never stored."""
    from flask_mail import Message

    code_id = int(mail.message_id.strip("<>").partition("@")[0].removeprefix("code-"))
    found = code_text(session, code_id=code_id, secret=app.config["SECRET_KEY"], now=utcnow())
    if found is None:
        raise MailNotNeeded("a newer code was asked for, or this one was used or ran out")
    message = Message(
        subject=mail.subject, recipients=[mail.to_email], body=found[1], sender=app.config["MAIL_DEFAULT_SENDER"]
    )
    message.msgId = mail.message_id
    return message

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

A countersigner (one address waiting on many documents of a batch, ``signing.countersign``) proves it once for
their link: ``send_link_code``, ``verify_link_code``, ``link_status`` and ``link_verified`` are the same rules
(the same limits, derivation and tries) for codes that carry ``countersign_link_id``, with the link's events kept
on its batch. Each document a verified countersigner then signs or declines keeps the check in its own trail
(``link_proof``, ``proof_event``), as if its own code had been confirmed.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, func, select, update
from sqlalchemy.orm import Session

from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.core.tokens import new_nonce
from bulksign.documents.signed_pdf import document_title
from bulksign.mail.mailer import MailNotNeeded, builder, queue_mail
from bulksign.models import (
    RECIPIENT_ROLE,
    Batch,
    CountersignLink,
    Event,
    OneTimeCode,
    Party,
    SigningRequest,
    utcnow,
)
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


def derive_code(*, secret: str, bound_to: str, nonce: str) -> str:
    """The code of one issue: HMAC(secret, owner (``binding``) + nonce) reduced to ``CODE_DIGITS`` digits."""
    mac = hmac.new(secret.encode(), f"one-time-code:{bound_to}:{nonce}".encode(), hashlib.sha256).digest()
    return str(int.from_bytes(mac[:8], "big") % 10**CODE_DIGITS).zfill(CODE_DIGITS)


def code_hash(*, secret: str, bound_to: str, nonce: str, code: str) -> str:
    """What is stored and compared: the code keyed by the secret and bound to its owner and issue."""
    return hmac.new(
        secret.encode(), f"one-time-code-check:{bound_to}:{nonce}:{code}".encode(), hashlib.sha256
    ).hexdigest()


def binding(code: OneTimeCode) -> str:
    """What a code is bound to (``derive_code``, ``code_hash``)."""
    return _bound_to(request_id=code.request_id, link_id=code.countersign_link_id)


def _bound_to(*, request_id: int | None, link_id: int | None) -> str:
    """A request's id (as every code was bound before links had codes), or its link's."""
    return str(request_id) if link_id is None else f"countersign-{link_id}"


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
    if party is not None:
        return _channel(phone=party.phone, email=party.email)
    return _channel(phone=request.phone, email=request.email)


def _channel(*, phone: str | None, email: str) -> tuple[str, str]:
    phone = (phone or "").strip()
    if len(re.sub(r"\D", "", phone)) >= 6:
        return "sms", phone
    return "email", email


def link_channel(session: Session, link: CountersignLink) -> tuple[str, str]:
    """``channel_of`` for a countersigner: SMS to the phone their documents give most often (the fixed party's, or
    the one a manager's rows agree on), else mail to the link's address."""
    phones = session.execute(
        select(Party.phone)
        .where(
            Party.batch_id == link.batch_id,
            func.lower(Party.email) == link.email,
            Party.role != RECIPIENT_ROLE,
            Party.phone.is_not(None),
        )
        .group_by(Party.phone)
        .order_by(func.count().desc(), Party.phone)
    ).scalars()
    for phone in phones:
        channel = _channel(phone=phone, email=link.email)
        if channel[0] == "sms":
            return channel
    return "email", link.email


@dataclass(frozen=True)
class _Owner:
    """Whose codes these are: a request's recipient (``party`` None) or another party of it, or a countersigner's
    link; the rules are the same, what they count, lock and write differs."""

    batch: Batch
    channel: str
    destination: str
    #: Whom the code's message greets.
    name: str
    request: SigningRequest | None = None
    party: Party | None = None
    link: CountersignLink | None = None

    @property
    def bound_to(self) -> str:
        return _bound_to(request_id=self.ids.get("request_id"), link_id=self.ids.get("countersign_link_id"))

    @property
    def ids(self) -> dict:
        """The owner's columns on its code rows (and in its log lines)."""
        if self.link is not None:
            return {"countersign_link_id": self.link.id}
        return {"request_id": self.request.id, "party_id": self.party.id if self.party is not None else None}

    def codes(self):
        """Of the one_time_codes rows: this owner's."""
        if self.link is not None:
            return OneTimeCode.countersign_link_id == self.link.id
        return and_(OneTimeCode.request_id == self.request.id, _of_party(self.party.id if self.party else None))

    def lock(self):
        """The row whose lock serialises this owner's issues (a double click): its request, or its link."""
        if self.link is not None:
            return select(CountersignLink.id).where(CountersignLink.id == self.link.id).with_for_update()
        return select(SigningRequest.id).where(SigningRequest.id == self.request.id).with_for_update()

    def event(self, type_: str, *, now: datetime, ip: str | None, user_agent: str | None, details: dict) -> Event:
        """An event of the request (naming the role of a party other than the recipient), or of the link's batch
        (naming the link)."""
        if self.link is not None:
            details = {**details, "countersign_link_id": self.link.id}
        elif self.party is not None:
            details = {**details, "role": self.party.role}
        return Event(
            request_id=self.request.id if self.request is not None else None,
            batch_id=self.batch.id,
            type=type_,
            created_at=now,
            actor="recipient",
            ip=ip,
            user_agent=(user_agent or "")[:500],
            details=details,
        )


def _of_request(request: SigningRequest, party: Party | None) -> _Owner:
    channel, destination = channel_of(request, party)
    name = (party.name or party.email) if party is not None else (request.name or request.email)
    return _Owner(request.batch, channel, destination, name, request=request, party=party)


def _of_link(session: Session, link: CountersignLink) -> _Owner:
    channel, destination = link_channel(session, link)
    name = session.scalar(
        select(Party.name)
        .where(Party.batch_id == link.batch_id, func.lower(Party.email) == link.email, Party.name.is_not(None))
        .order_by(Party.id)
        .limit(1)
    )
    return _Owner(link.batch, channel, destination, name or link.email, link=link)


def required(request: SigningRequest) -> bool:
    """Whether the request's batch asks for a one-time code."""
    return bool(request.batch.one_time_code)


def _newest(session: Session, owner: _Owner) -> OneTimeCode | None:
    return session.scalar(
        select(OneTimeCode).where(owner.codes()).order_by(OneTimeCode.created_at.desc(), OneTimeCode.id.desc()).limit(1)
    )


def _of_party(party_id: int | None):
    """The codes of the party ``party_id``, or the recipient's (None)."""
    return OneTimeCode.party_id.is_(None) if party_id is None else OneTimeCode.party_id == party_id


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
    verified = is_verified(
        session, request_id=request.id, code_id=code_id, now=now, party_id=party.id if party is not None else None
    )
    return _status(session, _of_request(request, party), verified=verified, now=now)


def link_status(session: Session, *, link: CountersignLink, code_id: int | None, now: datetime) -> CodeStatus:
    """Where the countersigner stands with the codes of their link (whose batch asks for one)."""
    verified = link_verified(session, link_id=link.id, code_id=code_id, now=now)
    return _status(session, _of_link(session, link), verified=verified, now=now)


def _status(session: Session, owner: _Owner, *, verified: bool, now: datetime) -> CodeStatus:
    if verified:
        return CodeStatus("verified", owner.channel, mask(owner.channel, owner.destination))
    code = _newest(session, owner)
    if code is None:
        return CodeStatus("none", owner.channel, mask(owner.channel, owner.destination))
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
    owner = _of_request(session.get(SigningRequest, request_id), party)
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
    return _send(session, _of_link(session, link), secret=secret, now=now, ip=ip, user_agent=user_agent)


def _send(
    session: Session, owner: _Owner, *, secret: str, now: datetime, ip: str | None, user_agent: str | None
) -> CodeSent:
    from flask_babel import force_locale

    # Serialise issues for one owner (a double click): the row lock makes the count below exact.
    session.execute(owner.lock())
    last = _newest(session, owner)
    if last is not None and last.created_at + RESEND_AFTER > now:
        session.rollback()
        return CodeSent("too_soon", retry_at=last.created_at + RESEND_AFTER)
    today = session.scalar(
        select(func.count())
        .select_from(OneTimeCode)
        .where(owner.codes(), OneTimeCode.created_at > now - timedelta(days=1))
    )
    if today >= MAX_CODES_PER_DAY:
        session.rollback()
        return CodeSent("too_many")
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
    owner = _of_request(session.get(SigningRequest, request_id), party)
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
    return _verify(session, _of_link(session, link), code=code, secret=secret, now=now, ip=ip, user_agent=user_agent)


def _verify(
    session: Session, owner: _Owner, *, code: str, secret: str, now: datetime, ip: str | None, user_agent: str | None
) -> CodeCheck:
    typed = _NOT_DIGITS.sub("", code or "")
    if not (len(typed) == CODE_DIGITS and typed.isascii() and typed.isdigit()):
        return CodeCheck("invalid", message=N_("Type the %(count)s digits of the code.", count=CODE_DIGITS))
    current = _newest(session, owner)
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
    expected = code_hash(secret=secret, bound_to=owner.bound_to, nonce=current.nonce, code=typed)
    details = {"code_id": current.id, "channel": current.channel}
    client = {"now": now, "ip": ip, "user_agent": user_agent}
    if hmac.compare_digest(expected, current.code_hash):
        won = session.execute(
            update(OneTimeCode)
            .where(OneTimeCode.id == current.id, OneTimeCode.verified_at.is_(None))
            .values(verified_at=now)
        ).rowcount
        if not won:  # the same code entered twice at once: the other try used it
            session.rollback()
            return CodeCheck("used", code_id=current.id)
        session.add(owner.event("code.verified", details=details, **client))
        session.commit()
        return CodeCheck("verified", code_id=current.id)
    tries_left = MAX_TRIES - attempts
    session.add(owner.event("code.failed", details={**details, "tries_left": tries_left}, **client))
    if tries_left == 0:
        session.execute(update(OneTimeCode).where(OneTimeCode.id == current.id).values(locked_at=now))
        session.add(owner.event("code.locked", details=details, **client))
    session.commit()
    log(logger, logging.INFO, "wrong one-time code", code_id=current.id, tries_left=tries_left, **owner.ids)
    return CodeCheck("wrong" if tries_left else "locked", code_id=current.id, tries_left=tries_left)


@dataclass(frozen=True)
class LinkProof:
    """A countersigner's verified link code, as each document they sign or decline keeps it (``proof_event``)."""

    code_id: int
    batch_id: int
    #: The link's address (lower-cased): the proof vouches only for the parties of its batch and address.
    email: str
    channel: str
    #: The masked address or number the code went to.
    to: str
    verified_at: datetime
    #: Where it was confirmed from.
    ip: str | None
    user_agent: str | None

    def vouches_for(self, party: Party) -> bool:
        return party.batch_id == self.batch_id and (party.email or "").lower() == self.email


def link_proof(session: Session, *, link: CountersignLink, code_id: int | None) -> LinkProof | None:
    """The verified code ``code_id`` of the link as its documents record it; None when it is not one. Its freshness
    is the caller's to check when the countersigner acts (a run's when it starts: its jobs may run later)."""
    code = session.get(OneTimeCode, code_id) if code_id else None
    if code is None or code.countersign_link_id != link.id or code.verified_at is None:
        return None
    verified = session.scalars(
        select(Event)
        .where(Event.batch_id == link.batch_id, Event.request_id.is_(None), Event.type == "code.verified")
        .order_by(Event.id.desc())
    )
    event = next((e for e in verified if (e.details or {}).get("code_id") == code.id), None)
    return LinkProof(
        code_id=code.id,
        batch_id=link.batch_id,
        email=link.email,
        channel=code.channel,
        to=mask(code.channel, code.destination),
        verified_at=code.verified_at,
        ip=event.ip if event is not None else None,
        user_agent=event.user_agent if event is not None else None,
    )


def proof_event(proof: LinkProof, *, party: Party) -> Event:
    """The ``code.verified`` event of ``party``'s request that the link's code vouches for: when and from where it was
    confirmed, and where it went (in its own details: the code's ``code.sent`` is the link's, not this request's)."""
    return Event(
        request_id=party.request_id,
        batch_id=party.batch_id,
        type="code.verified",
        created_at=proof.verified_at,
        actor="recipient",
        ip=proof.ip,
        user_agent=proof.user_agent,
        details={
            "code_id": proof.code_id,
            "channel": proof.channel,
            "to": proof.to,
            "role": party.role,
            "countersign": True,
        },
    )


def code_text(session: Session, *, code_id: int, secret: str, now: datetime) -> tuple[OneTimeCode, str] | None:
    """The code row and the message that carries its code (in the batch's language), or None when the code
    no longer counts (a newer one was issued, it was used, locked or ran out): sending it would only confuse."""
    from flask import render_template
    from flask_babel import force_locale

    row = session.get(OneTimeCode, code_id)
    if row is None:
        return None
    if row.countersign_link_id is not None:
        owner = _of_link(session, session.get(CountersignLink, row.countersign_link_id))
    else:
        party = session.get(Party, row.party_id) if row.party_id is not None else None
        owner = _of_request(session.get(SigningRequest, row.request_id), party)
    newest = _newest(session, owner)
    if newest.id != row.id or row.verified_at or row.locked_at or row.expires_at <= now:
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

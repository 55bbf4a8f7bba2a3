"""Whose a one-time code is (a request's recipient, another party, a countersigner's link), where it goes, and
how a code is derived from what it is bound to."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, func, select
from sqlalchemy.orm import Session

from bulksign.models import (
    RECIPIENT_ROLE,
    Batch,
    CountersignLink,
    Event,
    OneTimeCode,
    Party,
    SigningRequest,
)

#: Digits of a code.
CODE_DIGITS = 6


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
    return bound_to(request_id=code.request_id, link_id=code.countersign_link_id)


def bound_to(*, request_id: int | None, link_id: int | None) -> str:
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
        return _channel(phone=party.phone, email=party.email or "")
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
class Owner:
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
        return bound_to(request_id=self.ids.get("request_id"), link_id=self.ids.get("countersign_link_id"))

    @property
    def _request(self) -> SigningRequest:
        if self.request is None:
            raise LookupError("a countersigner's link code has no request")
        return self.request

    @property
    def ids(self) -> dict[str, int | None]:
        """The owner's columns on its code rows (and in its log lines)."""
        if self.link is not None:
            return {"countersign_link_id": self.link.id}
        return {"request_id": self._request.id, "party_id": self.party.id if self.party is not None else None}

    def codes(self) -> ColumnElement[bool]:
        """Of the one_time_codes rows: this owner's."""
        if self.link is not None:
            return OneTimeCode.countersign_link_id == self.link.id
        return and_(OneTimeCode.request_id == self._request.id, of_party(self.party.id if self.party else None))

    def lock(self) -> Select[tuple[int]]:
        """The row whose lock serialises this owner's issues (a double click): its request, or its link."""
        if self.link is not None:
            return select(CountersignLink.id).where(CountersignLink.id == self.link.id).with_for_update()
        return select(SigningRequest.id).where(SigningRequest.id == self._request.id).with_for_update()

    def event(
        self, type_: str, *, now: datetime, ip: str | None, user_agent: str | None, details: dict[str, Any]
    ) -> Event:
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


def of_request(request: SigningRequest, party: Party | None) -> Owner:
    channel, destination = channel_of(request, party)
    name = (party.name or party.email or "") if party is not None else (request.name or request.email)
    return Owner(request.batch, channel, destination, name, request=request, party=party)


def of_link(session: Session, link: CountersignLink) -> Owner:
    channel, destination = link_channel(session, link)
    name = session.scalar(
        select(Party.name)
        .where(Party.batch_id == link.batch_id, func.lower(Party.email) == link.email, Party.name.is_not(None))
        .order_by(Party.id)
        .limit(1)
    )
    return Owner(link.batch, channel, destination, name or link.email, link=link)


def newest_code(session: Session, owner: Owner) -> OneTimeCode | None:
    return session.scalar(
        select(OneTimeCode).where(owner.codes()).order_by(OneTimeCode.created_at.desc(), OneTimeCode.id.desc()).limit(1)
    )


def of_party(party_id: int | None) -> ColumnElement[bool]:
    """The codes of the party ``party_id``, or the recipient's (None)."""
    return OneTimeCode.party_id.is_(None) if party_id is None else OneTimeCode.party_id == party_id

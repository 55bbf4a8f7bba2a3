"""A countersigner's verified link code, as each document they sign or decline records it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.models import (
    CountersignLink,
    Event,
    OneTimeCode,
    Party,
)
from bulksign.signing.code_owners import mask


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

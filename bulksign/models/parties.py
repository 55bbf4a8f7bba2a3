"""The parties of a request: every person who signs its document, in the steps of its routing.
More in docs/architecture/models.md."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import Index, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from bulksign.core.extensions import db
from bulksign.models.base import BigId, Model, UTCDateTime, utcnow
from bulksign.models.requests import SigningRequest
from bulksign.models.status import WAITING_FOR_RECIPIENT, Status

#: The role of the row's own recipient, whose mark is ``{{ signature }}``.
RECIPIENT_ROLE = "recipient"


class PartyStatus(StrEnum):
    """The status of one party of a request (a person who signs it: the row's recipient, or another role)."""

    WAITING = "waiting"
    INVITED = "invited"
    OPENED = "opened"
    SIGNED = "signed"
    DECLINED = "declined"


P = PartyStatus

#: Every legal move of a party. waiting: its step has not started, or its link was withdrawn for a new one.
PARTY_TRANSITIONS: dict[PartyStatus, frozenset[PartyStatus]] = {
    P.WAITING: frozenset({P.INVITED}),
    # → waiting: staff resend (the old link dies, a new invitation goes out).
    P.INVITED: frozenset({P.OPENED, P.DECLINED, P.WAITING}),
    P.OPENED: frozenset({P.SIGNED, P.DECLINED, P.WAITING}),
    # signed → waiting: a correction voided the signature; only while its request is back to ``pending``
    # (``PARTY_LEAVE_NEEDS``).
    P.SIGNED: frozenset({P.WAITING}),
    # declined → waiting: staff invite again, like a declined request.
    P.DECLINED: frozenset({P.WAITING}),
}

#: The request states a party's move to a state needs, checked in the move's own UPDATE: a party signs or declines
#: only while its request waits for its parties (not once it was cancelled, expired, declined or bounced).
PARTY_MOVE_NEEDS: dict[PartyStatus, frozenset[Status]] = {
    P.SIGNED: WAITING_FOR_RECIPIENT,
    P.DECLINED: WAITING_FOR_RECIPIENT,
}

#: The request states a party's move away from a state needs: a signature is voided only by a correction, which
#: moved the request back to ``pending`` in the same transaction.
PARTY_LEAVE_NEEDS: dict[PartyStatus, frozenset[Status]] = {
    P.SIGNED: frozenset({Status.PENDING}),
}

#: How the one party of a single-signer request follows its request: request state reached → (the party's states
#: it moves from, the state it moves to). A request that has only its ``recipient`` is moved as today, and its
#: party follows in the same statement (``parties.follows``).
RECIPIENT_FOLLOWS: dict[Status, tuple[frozenset[PartyStatus], PartyStatus]] = {
    Status.GENERATED: (frozenset({P.INVITED, P.OPENED, P.DECLINED}), P.WAITING),
    Status.SENT: (frozenset({P.WAITING}), P.INVITED),
    Status.OPENED: (frozenset({P.INVITED}), P.OPENED),
    Status.SIGNED: (frozenset({P.OPENED}), P.SIGNED),
    Status.DECLINED: (frozenset({P.INVITED, P.OPENED}), P.DECLINED),
}
#: Request states before ``generated`` from which a move to ``generated`` is the first render, not a resend:
#: its party is waiting already, so nothing follows.
FIRST_RENDER = frozenset({Status.GENERATING, Status.SENDING})


class Party(Model):
    __tablename__ = "parties"
    __table_args__ = (
        UniqueConstraint("request_id", "role"),
        # The batch page's "waiting for <role>" filter and its counts per role.
        Index("ix_parties_batch_role_status", "batch_id", "role", "status"),
        # A countersigner's documents: every request waiting on one address.
        Index("ix_parties_email_lower", text("lower(email)")),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    request_id: Mapped[int] = mapped_column(BigId, db.ForeignKey("signing_requests.id", ondelete="CASCADE"))
    batch_id: Mapped[int] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"))
    #: ``recipient``, or the ``<role>`` of the template's ``signature_<role>`` mark.
    role: Mapped[str] = mapped_column(db.String(40))
    #: The party's step in the request's routing, from 0; the parties of one step sign in parallel.
    step: Mapped[int] = mapped_column(default=0)
    #: ``row`` (the row's ``<role>_email`` columns) or ``batch`` (the batch's fixed party); None for the recipient.
    source: Mapped[str | None] = mapped_column(db.String(10))
    #: Who the party is; None for the recipient, who is the request's own ``email``, ``name``, ``phone``.
    email: Mapped[str | None] = mapped_column(db.String(254))
    name: Mapped[str | None] = mapped_column(db.String(300))
    phone: Mapped[str | None] = mapped_column(db.String(50))
    #: Current state (``status.PartyStatus``); changed only by ``signing.parties`` (compare-and-set).
    status: Mapped[str] = mapped_column(db.String(20), default="waiting")
    status_changed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    #: sha256 hex of the party's signing token and the nonce it is derived from (``tokens.signing_token``);
    #: None for the recipient, whose link is the request's.
    token_hash: Mapped[str | None] = mapped_column(db.String(64), unique=True)
    token_nonce: Mapped[str | None] = mapped_column(db.String(64))
    invited_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    opened_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    signed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    declined_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    decline_reason: Mapped[str | None] = mapped_column(db.Text)
    #: The name the party typed when signing, where from, and the PNG of the drawn signature.
    signer_name: Mapped[str | None] = mapped_column(db.String(300))
    signer_ip: Mapped[str | None] = mapped_column(db.String(64))
    signature_image: Mapped[bytes | None] = mapped_column(db.LargeBinary)
    reminder_count: Mapped[int] = mapped_column(default=0)
    last_reminder_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    request: Mapped[SigningRequest] = relationship()

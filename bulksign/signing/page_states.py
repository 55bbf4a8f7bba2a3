"""What a signer's page shows: the request's state as the signer sees it, and whose link was opened."""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.models import RECIPIENT_ROLE, Batch, Party, SigningRequest
from bulksign.models.parties import PartyStatus
from bulksign.models.status import WAITING_FOR_RECIPIENT, Status
from bulksign.signing import routing


class PageState(StrEnum):
    """What a signer's page shows."""

    UNKNOWN = "unknown"
    #: The signer may act.
    WAITING = "waiting"
    EXPIRED = "expired"
    SIGNED = "signed"
    DECLINED = "declined"
    CANCELLED = "cancelled"
    #: The invitation is out, or about to be: its send is not recorded yet. Not an error: come back.
    ON_ITS_WAY = "on_its_way"
    #: Sent out but not in a state the recipient can act on.
    UNAVAILABLE = "unavailable"
    #: A party's step has not started: no working link yet.
    NOT_STARTED = "not_started"
    #: The party signed; the others have not all signed yet.
    PARTY_SIGNED = "party_signed"
    #: A party's invitation bounced: staff correct that address and resend, and the request goes on.
    PAUSED = "paused"
    #: The link of a version staff corrected since: the newer version has links of its own.
    REPLACED = "replaced"


#: The page states that end a request for every party.
ENDED = frozenset({PageState.SIGNED, PageState.DECLINED, PageState.CANCELLED, PageState.EXPIRED, PageState.UNKNOWN})


def deadline_of(request: SigningRequest) -> datetime | None:
    """When the link stops working: the request's own expiry, else the batch's fixed deadline, else sent + days."""
    if request.expires_at:
        return request.expires_at
    batch: Batch = request.batch
    if batch.deadline_at:
        return batch.deadline_at
    if request.sent_at:
        return request.sent_at + timedelta(days=batch.deadline_days)
    return None


def page_state(request: SigningRequest | None, *, now: datetime) -> PageState:
    """What the recipient's page of a single-signer request shows."""
    if request is None:
        return PageState.UNKNOWN
    status = request.status
    if status in (Status.GENERATED, Status.SENDING) and request.token_hash:
        # The invitation is out, or about to be: its sender has not recorded the send yet (a worker that
        # died between the SMTP answer and its commit waits for the reconciler). Not an error: come back.
        return PageState.ON_ITS_WAY
    if status in (Status.SIGNED, Status.DECLINED, Status.CANCELLED, Status.EXPIRED):
        return PageState(status)
    if status in WAITING_FOR_RECIPIENT:
        deadline = deadline_of(request)
        return PageState.EXPIRED if deadline is not None and deadline <= now else PageState.WAITING
    return PageState.UNAVAILABLE


def signer_party(session: Session, request: SigningRequest, party: Party | None) -> Party | None:
    """The party whose link was opened: ``party`` (another role's link), the recipient's party for the request's
    own link of a request several sign; None for a single-signer request (its recipient is the request)."""
    if party is not None or not routing.is_routed(session, request.id):
        return party
    return session.scalar(select(Party).where(Party.request_id == request.id, Party.role == RECIPIENT_ROLE))


def signer_state(request: SigningRequest | None, party: Party | None, *, now: datetime) -> PageState:
    """What a signer's page shows: ``page_state`` for a single-signer request (``party`` None), else also what
    the party's own progress says (``NOT_STARTED``, ``PARTY_SIGNED``, ``PAUSED``)."""
    state = page_state(request, now=now)
    if party is None or request is None or state in ENDED:
        return state
    if party.status == PartyStatus.SIGNED:
        return PageState.PARTY_SIGNED
    if party.status in (PartyStatus.WAITING, PartyStatus.DECLINED):
        return PageState.NOT_STARTED
    if request.status == Status.BOUNCED:
        # A party resent while another's bounce stands holds a new link before the request goes on: not the
        # sender's "contact us" page, nothing is wrong on its side.
        return PageState.PAUSED
    # Every party acts once the request is out (its page says "on its way" until the recipient's invitation is
    # recorded sent, seconds): a decline then always finds the request in a state it can leave for declined.
    return state


def contact_of(batch: Batch) -> str | None:
    """Whom a recipient should contact about a batch: its reply-to, else its owner."""
    return batch.reply_to or (batch.created_by.email if batch.created_by is not None else None)

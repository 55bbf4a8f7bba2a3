"""A two-party batch (the row's recipient, then a fixed ``employer``) whose parties stand in chosen states, made
directly (``make_batch`` and ``add_parties``, the parties moved by ``move_parties``), for the staff pages' tests."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select, update

from bulksign.models import Party, SigningRequest
from bulksign.models.parties import PartyStatus
from bulksign.recipients.parties import PartyPerson
from bulksign.signing.parties import add_parties, move_parties
from tests.support.batchdata import batch_in_states

P = PartyStatus
#: The moves from ``waiting`` that lead a party to each state.
PATHS = {
    P.WAITING: (),
    P.INVITED: (P.INVITED,),
    P.OPENED: (P.INVITED, P.OPENED),
    P.SIGNED: (P.INVITED, P.OPENED, P.SIGNED),
    P.DECLINED: (P.INVITED, P.DECLINED),
}
#: (request status, recipient's state, employer's state) per row: two wait for the recipient, three for the
#: employer (one of them with the recipient signed), one is signed by both, one declined by the employer, one
#: expired before anyone signed (closed: it waits for nobody).
ROWS = (
    ("sent", P.INVITED, P.WAITING),
    ("opened", P.OPENED, P.WAITING),
    ("opened", P.SIGNED, P.INVITED),
    ("signed", P.SIGNED, P.SIGNED),
    ("declined", P.SIGNED, P.DECLINED),
    ("expired", P.INVITED, P.WAITING),
)


def make_two_party_batch(session, *, now: datetime, user_id: int | None, rows=ROWS, name: str = "Contracts") -> int:
    """A batch of ``rows`` (request status, recipient's state, employer's state) with the employer ``ACME HR``
    for every row; committed. Returns its id. Each move is a minute after the one before it."""
    batch = batch_in_states(session, statuses=[status for status, _, _ in rows], now=now, name=name, user_id=user_id)
    ids = list(session.scalars(select(SigningRequest.id).where(SigningRequest.batch_id == batch.id).order_by("id")))
    add_parties(
        session,
        batch_id=batch.id,
        request_ids=ids,
        per_row=[{}] * len(ids),
        fixed={"employer": PartyPerson("hr@example.com", "ACME HR")},
        steps={"recipient": 0, "employer": 1},
        now=now,
    )
    parties = {
        (request_id, role): party_id
        for party_id, request_id, role in session.execute(
            select(Party.id, Party.request_id, Party.role).where(Party.batch_id == batch.id)
        )
    }
    # A party signs or declines only while its request waits (``PARTY_MOVE_NEEDS``): the requests wait while their
    # parties move, then stand in their given states again (test data, set directly as ``make_batch`` does).
    session.execute(update(SigningRequest).where(SigningRequest.id.in_(ids)).values(status="opened"))
    for request_id, (_, *states) in zip(ids, rows, strict=True):
        at = now - timedelta(minutes=10)
        for role, state in zip(("recipient", "employer"), states, strict=True):
            frm = P.WAITING
            for to in PATHS[state]:
                at += timedelta(minutes=1)
                assert move_parties(session, parties[request_id, role], frm=frm, to=to, now=at)
                frm = to
    for request_id, (status, *_) in zip(ids, rows, strict=True):
        session.execute(update(SigningRequest).where(SigningRequest.id == request_id).values(status=status))
    session.commit()
    return batch.id


def recipients_sign(session, request_ids, *, now: datetime | None = None) -> None:
    """The row's own recipient of each of these requests several sign signs it through the signing page's path
    (typed name ``Employee <request id>``, a drawn signature, from 198.51.100.7)."""
    from bulksign.models import utcnow
    from bulksign.signing.recipient_actions import sign
    from tests.support.signatures import png

    image = png()
    parties = dict(
        session.execute(
            select(Party.request_id, Party.id).where(Party.request_id.in_(list(request_ids)), Party.role == "recipient")
        ).all()
    )
    for request_id in request_ids:
        outcome = sign(
            session,
            request_id=request_id,
            now=now or utcnow(),
            signer_name=f"Employee {request_id}",
            signature_png=image,
            consent=True,
            ip="198.51.100.7",
            user_agent="test",
            party=session.get(Party, parties[request_id]),
        )
        assert outcome.status == "signed", outcome

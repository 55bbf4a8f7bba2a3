"""Parties of requests: their one writer of state (compare-and-set, like requests), their links, and the
``recipient`` party every request has from its creation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import BindParameter, Exists, Select, Update, exists, insert, literal, select, update
from sqlalchemy.orm import Session, aliased
from sqlalchemy.orm.util import AliasedClass, identity_key

from bulksign.batches import versions
from bulksign.core.errors import BulksignError
from bulksign.core.messages import N_
from bulksign.core.slicing import slices
from bulksign.core.tokens import hash_token, new_nonce, signing_token
from bulksign.models import RECIPIENT_ROLE, Event, Party, SigningRequest
from bulksign.models.parties import (
    FIRST_RENDER,
    PARTY_LEAVE_NEEDS,
    PARTY_MOVE_NEEDS,
    PARTY_TRANSITIONS,
    RECIPIENT_FOLLOWS,
    PartyStatus,
)
from bulksign.models.status import IllegalTransition, Status

#: The column each state's arrival is stamped in.
_STAMPS = {
    PartyStatus.INVITED: "invited_at",
    PartyStatus.OPENED: "opened_at",
    PartyStatus.SIGNED: "signed_at",
    PartyStatus.DECLINED: "declined_at",
}


#: The recipient's moves its request follows when it has other parties, not the other way round.
PARTIES_OWN_MOVES = frozenset({PartyStatus.SIGNED, PartyStatus.DECLINED})


class RoutingError(BulksignError):
    """A routing that cannot be followed; ``message`` is for people."""


def routing_steps(given: str | list[list[str]] | None, *, roles: Sequence[str]) -> dict[str, int]:
    """Each of the template's ``roles`` → its step from 0, from ``routing``: a JSON list of steps, each a list of roles
    that sign in parallel, e.g. ``[["recipient"], ["employer"]]``; default: the recipient first, then one step
    per other role. RoutingError for a role named twice, not at all or unknown, or an empty step."""
    if given is None or given == "":
        others = [r for r in roles if r != RECIPIENT_ROLE]
        return {RECIPIENT_ROLE: 0, **{role: step for step, role in enumerate(others, start=1)}}
    if isinstance(given, str):
        try:
            given = json.loads(given)
        except ValueError:
            given = None
    if not isinstance(given, list) or not all(isinstance(s, list) and s for s in given):
        raise RoutingError(N_('"routing" must be a JSON list of steps, each a list of roles: [["recipient"], …].'))
    steps: dict[str, int] = {}
    for step, names in enumerate(given):
        for role in names:
            if not isinstance(role, str) or role not in roles:
                raise RoutingError(
                    N_(
                        "The routing names %(role)s; the template is signed by: %(roles)s.",
                        role=str(role)[:40],
                        roles=", ".join(roles),
                    )
                )
            if role in steps:
                raise RoutingError(N_("The routing names %(role)s twice: each party signs once.", role=role))
            steps[role] = step
    left_out = [r for r in roles if r not in steps]
    if left_out:
        raise RoutingError(N_("The routing leaves out %(roles)s: give every party a step.", roles=", ".join(left_out)))
    return steps


@dataclass(frozen=True)
class PartyMoves:
    """Which parties moved. A party missing from ``won`` was not in an expected state."""

    to: PartyStatus
    won: tuple[int, ...] = field(default_factory=tuple)

    def __bool__(self) -> bool:
        return bool(self.won)


def move_parties(
    session: Session,
    party_ids: int | Sequence[int],
    *,
    frm: str | Iterable[str],
    to: str,
    now: datetime,
    actor: str = "system",
    ip: str | None = None,
    details: dict[str, Any] | None = None,
    **fields: Any,
) -> PartyMoves:
    """Move parties from one of ``frm`` to ``to`` by compare-and-set, a ``party.<to>`` event per win; a move that needs
    its request in some states (``PARTY_MOVE_NEEDS``) checks them in the same UPDATE, with ``fields`` and the
    arrival's time. The caller commits; moves off the table raise ``IllegalTransition``."""
    ids = [party_ids] if isinstance(party_ids, int) else sorted(set(party_ids))
    sources = [PartyStatus(frm)] if isinstance(frm, str) else [PartyStatus(s) for s in frm]
    target = PartyStatus(to)
    for source in sources:
        if target not in PARTY_TRANSITIONS[source]:
            raise IllegalTransition(f"PartyStatus {source} → {target} is not allowed")
    if "status" in fields:
        raise IllegalTransition("status is set by the move itself")
    values = {"status": target.value, "status_changed_at": now, **fields}
    if target in _STAMPS:
        values.setdefault(_STAMPS[target], now)
    request_allows = [
        exists().where(SigningRequest.id == Party.request_id, SigningRequest.status.in_([s.value for s in needs]))
        for needs in _request_needs(sources, target)
    ]
    won: list[tuple[int, int, int, str]] = []
    for chunk in slices(ids):
        won.extend(
            session.execute(
                update(Party)
                .where(Party.id.in_(chunk), Party.status.in_([s.value for s in sources]), *request_allows)
                .values(**values)
                .returning(Party.id, Party.request_id, Party.batch_id, Party.role)
                .execution_options(synchronize_session=False)
            )
            .tuples()
            .all()
        )
    if won:
        session.execute(
            insert(Event),
            [
                {
                    "request_id": request_id,
                    "batch_id": batch_id,
                    "type": f"party.{target.value}",
                    "created_at": now,
                    "actor": actor,
                    "ip": ip,
                    "details": {"role": role, **(details or {})},
                }
                for _, request_id, batch_id, role in won
            ],
        )
    versions.touch(session, (batch_id for _, _, batch_id, _ in won))
    for party_id, *_ in won:
        loaded = session.identity_map.get(identity_key(Party, party_id))
        if loaded is not None:
            session.expire(loaded)
    return PartyMoves(to=target, won=tuple(sorted(party_id for party_id, *_ in won)))


@dataclass(frozen=True)
class PartyView:
    """One party of a request as staff and the API see it; the recipient's person is the request's."""

    role: str
    step: int
    email: str | None
    name: str | None
    status: str
    invited_at: datetime | None
    signed_at: datetime | None
    declined_at: datetime | None


def _request_needs(sources: Sequence[PartyStatus], target: PartyStatus) -> list[frozenset[Status]]:
    """The request states a move from ``sources`` to ``target`` needs: the arrival's (``PARTY_MOVE_NEEDS``), and a
    leave's for a move only from states that need one (``PARTY_LEAVE_NEEDS``); a move from several sources, one of
    them guarded, is refused rather than half checked."""
    needs = [PARTY_MOVE_NEEDS[target]] if target in PARTY_MOVE_NEEDS else []
    guarded = [s for s in sources if s in PARTY_LEAVE_NEEDS]
    if guarded and len(guarded) != len(sources):
        raise IllegalTransition(f"PartyStatus {guarded[0]} → {target} must be moved on its own")
    return needs + [PARTY_LEAVE_NEEDS[s] for s in dict.fromkeys(guarded)]


def parties_of(session: Session, request: SigningRequest) -> list[PartyView]:
    """The request's parties by step, then role; none of a purged request's addresses or names."""
    return parties_by_request(session, [request])[request.id]


class RequestPerson(Protocol):
    """What ``parties_by_request`` reads of a request (a ``SigningRequest`` or a row of its columns)."""

    @property
    def id(self) -> int: ...
    @property
    def email(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def purged_at(self) -> datetime | None: ...


def parties_by_request(session: Session, requests: Sequence[RequestPerson]) -> dict[int, list[PartyView]]:
    """``parties_of`` for many requests in one query per slice of ids: request id → its parties (a request
    without any: an empty list)."""
    shown: dict[int, list[PartyView]] = {r.id: [] for r in requests}
    by_id = {r.id: r for r in requests}
    for part in slices(sorted(shown)):
        for p in session.scalars(
            select(Party).where(Party.request_id.in_(part)).order_by(Party.request_id, Party.step, Party.role)
        ):
            request = by_id[p.request_id]
            kept = request.purged_at is None
            shown[p.request_id].append(
                PartyView(
                    role=p.role,
                    step=p.step,
                    email=(request.email if p.role == RECIPIENT_ROLE else p.email) if kept else None,
                    name=(request.name if p.role == RECIPIENT_ROLE else p.name) if kept else None,
                    status=p.status,
                    invited_at=p.invited_at,
                    signed_at=p.signed_at,
                    declined_at=p.declined_at,
                )
            )
    return shown


def follows(
    request_ids: Sequence[int] | Select[tuple[int]], *, frm: str, to: str, now: datetime | BindParameter[datetime]
) -> Update | None:
    """The UPDATE by which the ``recipient`` party of each single-signer request among ``request_ids`` follows its
    request's move ``frm`` → ``to`` (``RECIPIENT_FOLLOWS``); None when the move takes no party along. Only from
    the states the table names, so a repeat changes nothing; ``now`` is a bind parameter."""
    rule = RECIPIENT_FOLLOWS.get(Status(to))
    if rule is None or (Status(to) == Status.GENERATED and Status(frm) in FIRST_RENDER):
        return None
    sources, target = rule
    others = aliased(Party)
    values = {"status": target.value, "status_changed_at": now}
    if target in _STAMPS:
        values[_STAMPS[target]] = now
    alone = []
    if target in PARTIES_OWN_MOVES:
        alone = [~exists().where(others.request_id == Party.request_id, others.role != RECIPIENT_ROLE)]
    if target == PartyStatus.INVITED:
        # A recipient whose step comes after others' is invited when they have signed (``steps.advance``), not
        # when the request goes out to its first step.
        alone = [~step_not_started(Party)]
    return (
        update(Party)
        .where(
            Party.request_id.in_(request_ids),
            Party.role == RECIPIENT_ROLE,
            Party.status.in_([s.value for s in sources]),
            *alone,
        )
        .values(**values)
        .execution_options(synchronize_session=False)
    )


def step_not_started(party: type[Party] | AliasedClass[Party]) -> Exists:
    """Whether the step of ``party`` (``Party`` or an alias of it, in the enclosing statement) has not started: a
    party of the same request at an earlier step has not signed."""
    earlier = aliased(Party)
    return exists().where(
        earlier.request_id == party.request_id,
        earlier.step < party.step,
        earlier.status != PartyStatus.SIGNED.value,
    )


class Person(Protocol):
    """Who signs as a role (``recipients.parties.PartyPerson``)."""

    @property
    def email(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def phone(self) -> str | None: ...


def add_parties(
    session: Session,
    *,
    batch_id: int,
    request_ids: Sequence[int],
    per_row: Sequence[Mapping[str, Person]],
    fixed: Mapping[str, Person],
    steps: Mapping[str, int],
    now: datetime,
) -> None:
    """Give the batch's new requests their parties, all waiting: the recipient (``add_recipients``) and each other
    role of ``steps``, the person the request's row names (``per_row[i]`` for ``request_ids[i]``, its
    ``<role>_email`` columns) or else the batch's ``fixed`` one; a role with neither is a programming error (the
    file check refused it). The caller commits with the requests."""
    add_recipients(session, batch_id=batch_id, now=now, step=steps.get(RECIPIENT_ROLE, 0))
    values = []
    for request_id, named in zip(request_ids, per_row, strict=True):
        for role, step in steps.items():
            if role == RECIPIENT_ROLE:
                continue
            person = named.get(role) or fixed[role]
            source = "row" if role in named else "batch"
            values.append(
                {
                    "request_id": request_id,
                    "batch_id": batch_id,
                    "role": role,
                    "step": step,
                    "source": source,
                    "email": person.email,
                    "name": person.name[:300],
                    "phone": person.phone,
                    "status": PartyStatus.WAITING.value,
                    "status_changed_at": now,
                    "reminder_count": 0,
                    "created_at": now,
                }
            )
    for chunk in slices(values):
        session.execute(insert(Party), chunk)


def add_recipients(session: Session, *, batch_id: int, now: datetime, step: int = 0) -> None:
    """Give every request of the batch that has none its ``recipient`` party, in one statement, at ``step`` and
    waiting (the request is not sent yet). The caller commits with the requests."""
    has_one = exists().where(Party.request_id == SigningRequest.id, Party.role == RECIPIENT_ROLE)
    session.execute(
        insert(Party).from_select(
            ["request_id", "batch_id", "role", "step", "status", "status_changed_at", "reminder_count", "created_at"],
            select(
                SigningRequest.id,
                SigningRequest.batch_id,
                literal(RECIPIENT_ROLE),
                literal(step),
                literal(PartyStatus.WAITING.value),
                literal(now, Party.status_changed_at.type),
                literal(0),
                literal(now, Party.created_at.type),
            ).where(SigningRequest.batch_id == batch_id, ~has_one),
        )
    )


def issue_party_link(session: Session, *, party: Party, secret: str, now: datetime, actor: str = "system") -> str:
    """Give a party other than the recipient a new link (its older link dies) and return its token; the
    recipient's link is the request's (``links.issue_link``). The caller commits."""
    if party.role == RECIPIENT_ROLE:
        raise ValueError("the recipient's link is the request's own")
    party.token_nonce = new_nonce()
    token = party_token(party, secret=secret)
    party.token_hash = hash_token(token)
    session.add(
        Event(
            request_id=party.request_id,
            batch_id=party.batch_id,
            type="link.issued",
            created_at=now,
            actor=actor,
            details={"role": party.role},
        )
    )
    session.flush()
    return token


def party_token(party: Party, *, secret: str) -> str:
    """The token of a party's current link, re-derived from its nonce (a retried mail sends the same link).
    Bound to the party's id, so it never equals a request's token."""
    return signing_token(secret=secret, request_id=party.request_id, nonce=f"{party.id}:{party.token_nonce}")


def find_party(session: Session, token: str) -> Party | None:
    """The party (not the recipient) whose current link is ``token``; compares hashes."""
    if not token or len(token) > 128:
        return None
    return session.scalar(select(Party).where(Party.token_hash == hash_token(token)))

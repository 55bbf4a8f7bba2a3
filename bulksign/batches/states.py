"""The state machines of requests and batches: one compare-and-set writer each (tables in ``status``); of racing
movers exactly one wins. docs/architecture/batches.md says how."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar, cast

from sqlalchemy import ColumnElement, CursorResult, Insert, Update, bindparam, insert, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.util import identity_key
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.dml import ReturningUpdate

from bulksign.batches import counts as batch_counts
from bulksign.batches import versions
from bulksign.core.slicing import slices
from bulksign.models import Batch, Event, SigningRequest

# The statuses, tables and sets live in the leaf module ``status``; this module only moves rows between them.
from bulksign.models.status import BATCH_TRANSITIONS, TRANSITIONS, IllegalTransition, Status
from bulksign.signing import parties

E = TypeVar("E", bound=StrEnum)


@dataclass(frozen=True)
class TransitionResult:
    """Which requests moved. A request missing from ``won`` was not in an expected state."""

    to: Status
    won: tuple[int, ...] = field(default_factory=tuple)

    def __bool__(self) -> bool:
        return bool(self.won)


def transition(
    session: Session,
    request_ids: int | Sequence[int],
    *,
    frm: str | Iterable[str],
    to: str,
    now: datetime,
    actor: str = "system",
    ip: str | None = None,
    user_agent: str | None = None,
    details: dict[str, Any] | None = None,
    also: Update | None = None,
    also_params: Mapping[str, Any] | None = None,
    **fields: Any,
) -> TransitionResult:
    """Move requests from one of ``frm`` to ``to`` by compare-and-set, append an event per win; ``fields`` are set
    in the same UPDATE, ``also`` is an UPDATE run with it (built once, ``also_params`` its values). The caller
    commits; moves not in ``TRANSITIONS`` raise ``IllegalTransition``."""
    # Sorted: the row locks are taken in id order, so two movers of overlapping sets queue instead of deadlocking.
    ids = [request_ids] if isinstance(request_ids, int) else sorted(set(request_ids))
    sources, target = _checked(TRANSITIONS, frm=frm, to=to, fields=fields)
    if not ids:
        if also is not None:
            session.execute(also, also_params)
        return TransitionResult(to=target)

    allowed = list(dict.fromkeys(s.value for s in sources))
    values = {"status": target.value, "status_changed_at": now, **fields}
    event = {
        "type": f"status.{target.value}",
        "created_at": now,
        "actor": actor,
        "ip": ip,
        "user_agent": user_agent,
        "details": details or {},
    }
    dialect = session.get_bind().dialect.name
    won: list[int] = []
    moves: list[tuple[int, str, str]] = []
    for chunk in slices(ids):
        if dialect == "postgresql" and len(allowed) == 1:
            # The hot path (every pipeline step): the move, its events and the party's move in one round trip.
            rows = _move_and_log(
                session, chunk, source=allowed[0], values=values, event=event, also=also, also_params=also_params
            )
        else:
            if also is not None:
                session.execute(also, also_params)
            if dialect == "postgresql":
                rows = _lock_and_move(session, chunk, allowed=allowed, values=values, event=event)
            else:
                rows = _move_per_source(session, chunk, allowed=allowed, values=values)
                if rows:
                    session.execute(
                        insert(Event), [{"request_id": r.id, "batch_id": r.batch_id, **event} for r in rows]
                    )
                for source in {r.old_status for r in rows}:
                    won_from = [r.id for r in rows if r.old_status == source]
                    follow = parties.follows(won_from, frm=source, to=target, now=now)
                    if follow is not None:
                        session.execute(follow)
        also = None  # once, with the first slice
        won.extend(r.id for r in rows)
        moves.extend((r.batch_id, r.old_status, target.value) for r in rows)
    batch_counts.record_moves(session, moves)
    # Objects already loaded in this session must not keep showing the old status. Found by identity key:
    # reading ``obj.id`` of a request an earlier move expired would reload it, one SELECT per request.
    for request_id in won:
        loaded = session.identity_map.get(identity_key(SigningRequest, request_id))
        if loaded is not None:
            session.expire(loaded)
    return TransitionResult(to=target, won=tuple(won))


def move_batches(
    session: Session, batch_ids: int | Iterable[int], *, frm: str | Iterable[str], to: str, **fields: Any
) -> int:
    """Move batches from one of ``frm`` to ``to`` by compare-and-set; returns how many moved. The caller commits.

    ``UPDATE batches SET status=:to ... WHERE id IN (:ids) AND status IN (:frm)``: of two racing movers one
    wins. ``fields`` are further columns set in the same UPDATE. Moves not in ``BATCH_TRANSITIONS`` raise
    ``IllegalTransition``.
    """
    ids = [batch_ids] if isinstance(batch_ids, int) else sorted(set(batch_ids))
    sources, target = _checked(BATCH_TRANSITIONS, frm=frm, to=to, fields=fields)
    moved = 0
    for chunk in slices(ids):
        result = session.execute(
            update(Batch)
            .where(Batch.id.in_(chunk), Batch.status.in_([s.value for s in sources]))
            .values(status=target.value, **fields)
        )
        moved += cast(CursorResult[Any], result).rowcount
    if moved:
        versions.touch(session, ids)
    return moved


def _checked(
    table: Mapping[E, frozenset[E]], *, frm: str | Iterable[str], to: str, fields: dict[str, Any]
) -> tuple[list[E], E]:
    """The sources and target of a move as members of the table's enum; ``IllegalTransition`` off the table."""
    kind = type(next(iter(table)))
    sources = [kind(frm)] if isinstance(frm, str) else [kind(s) for s in frm]
    target = kind(to)
    for source in sources:
        if target not in table[source]:
            raise IllegalTransition(f"{kind.__name__} {source} → {target} is not allowed")
    if "status" in fields:
        raise IllegalTransition("status is set by the transition itself")
    return sources, target


@dataclass(frozen=True)
class _Moved:
    """One request a transition moved, and the status it left."""

    id: int
    batch_id: int
    old_status: str


def _update(
    chunk: list[int], *conditions: ColumnElement[bool], values: dict[str, Any]
) -> ReturningUpdate[tuple[int, int]]:
    return (
        update(SigningRequest)
        .where(SigningRequest.id.in_(chunk), *conditions)
        .values(**values)
        .returning(SigningRequest.id, SigningRequest.batch_id)
        .execution_options(synchronize_session=False)
    )


def _move_and_log(
    session: Session,
    chunk: list[int],
    *,
    source: str,
    values: dict[str, Any],
    event: dict[str, Any],
    also: Update | None = None,
    also_params: Mapping[str, Any] | None = None,
) -> list[_Moved]:
    """PostgreSQL: ``WITH moved AS (UPDATE … RETURNING), [also AS (UPDATE …)], [follow AS (UPDATE parties …)]
    INSERT INTO events SELECT … FROM moved``.

    A data-modifying ``WITH`` runs exactly once, whether or not the rest of the statement reads it. Built once
    per shape and bound per call: building and keying a statement this size costs more CPU than running it.
    """
    # Values that are SQL (``attempts = attempts + 1``) are part of the statement, which is then built anew.
    inline = {k: v for k, v in values.items() if isinstance(v, ClauseElement)}
    bound = tuple(k for k in values if k not in inline)
    shape = (source, values["status"], bound, tuple(event), also)
    logged = _logged_move(*shape, inline=inline) if inline else _cached_logged_move(*shape)
    params = {
        "ids": chunk,
        **{f"set_{k}": values[k] for k in bound},
        **{f"event_{k}": v for k, v in event.items()},
        **(also_params or {}),
    }
    # On the connection: ``Session.execute`` would first annotate the statement, a new copy whose cache key (of a
    # statement this size) is worked out again at each call. Flushed first, as ``Session.execute`` autoflushes.
    if session.autoflush:
        session.flush()
    return [_Moved(r.request_id, r.batch_id, source) for r in session.connection().execute(logged, params)]


def _logged_move(
    source: str,
    target: str,
    bound: tuple[str, ...],
    event_columns: tuple[str, ...],
    also: Update | None,
    *,
    inline: Mapping[str, ClauseElement] | None = None,
) -> Insert:
    """``_move_and_log``'s statement for one shape, its values as bind parameters: ``ids`` (the requests),
    ``set_<column>`` (the columns ``bound`` set on them; ``inline`` are SQL), ``event_<column>`` (their events)."""
    requests, events = SigningRequest.__table__.c, Event.__table__.c
    # Named apart from the columns: a bind parameter named like a column it sets is SQLAlchemy's own.
    values = {k: bindparam(f"set_{k}", type_=requests[k].type) for k in bound}
    # Locked first, in id order: an UPDATE locks rows in the order its plan reads them (a bitmap scan reads them
    # in their order on disk), so two movers of overlapping sets could each hold a row the other waits for.
    locked = (
        select(SigningRequest.id)
        .where(SigningRequest.id.in_(bindparam("ids", expanding=True)), SigningRequest.status == source)
        .order_by(SigningRequest.id)
        .with_for_update()
        .cte("locked")
    )
    moved = (
        update(SigningRequest)
        .where(SigningRequest.id.in_(select(locked.c.id)), SigningRequest.status == source)
        .values(**values, **(inline or {}))
        .returning(SigningRequest.id, SigningRequest.batch_id)
        .cte("moved")
    )
    ctes = [locked, moved] if also is None else [locked, moved, also.cte("also")]
    # The recipient party of a single-signer request moves with it (``parties.follows``).
    follow = parties.follows(select(moved.c.id), frm=source, to=target, now=values["status_changed_at"])
    if follow is not None:
        ctes.append(follow.cte("follow"))
    return (
        insert(Event)
        .from_select(
            ["request_id", "batch_id", *event_columns],
            select(
                moved.c.id, moved.c.batch_id, *(bindparam(f"event_{k}", type_=events[k].type) for k in event_columns)
            ),
        )
        .add_cte(*ctes)
        .returning(Event.request_id, Event.batch_id)
    )


#: The statements of the shapes the code moves requests in (a few dozen: the transition table's moves, each
#: caller's columns): ``also`` is a module's constant, so the cache cannot grow with the calls.
_cached_logged_move = functools.lru_cache(maxsize=256)(_logged_move)


def _lock_and_move(
    session: Session, chunk: list[int], *, allowed: list[str], values: dict[str, Any], event: dict[str, Any]
) -> list[_Moved]:
    """Lock the requests of ``chunk`` still in an ``allowed`` status, in id order, then move each group of
    them from the status it was locked in (``_move_and_log``: the move and its events in one round trip)."""
    # FOR UPDATE under READ COMMITTED waits for a concurrent mover, re-checks the status and returns the row
    # as that mover left it (or skips it): the status read here is the one the UPDATEs below replace.
    locked: dict[str, list[int]] = {}
    for request_id, status in session.execute(
        select(SigningRequest.id, SigningRequest.status)
        .where(SigningRequest.id.in_(chunk), SigningRequest.status.in_(allowed))
        .order_by(SigningRequest.id)
        .with_for_update()
    ):
        locked.setdefault(status, []).append(request_id)
    return [
        moved
        for source, ids in locked.items()
        for moved in _move_and_log(session, ids, source=source, values=values, event=event)
    ]


def _move_per_source(session: Session, chunk: list[int], *, allowed: list[str], values: dict[str, Any]) -> list[_Moved]:
    """One UPDATE per allowed status, so each winner's old status is the one its UPDATE matched.

    Used on SQLite: pysqlite begins a transaction only at the first write, so a status SELECTed before it
    may already be stale. The table has no self-moves, so a request moved by one of these UPDATEs matches
    none of the others.
    """
    moved: list[_Moved] = []
    for source in allowed:
        rows = session.execute(_update(chunk, SigningRequest.status == source, values=values)).all()
        moved.extend(_Moved(r.id, r.batch_id, source) for r in rows)
    return moved

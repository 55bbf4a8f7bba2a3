"""Requests per (batch, status), kept in the transaction of every status change so the counters cannot drift:
moves are noted and applied at commit, in one global order. docs/architecture/batches.md says why."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import cast

from sqlalchemy import Table, bindparam, event, func, insert, select, update
from sqlalchemy.orm import Session, SessionTransaction

from bulksign.batches import versions
from bulksign.models import BatchStatusCount, SigningRequest
from bulksign.models.status import Status

#: ``session.info`` key: the transaction's moves not applied yet, Counter{(batch_id, status): delta}.
_PENDING = "batch_counts.pending"
#: ``session.info`` key: batches whose notes a rolled-back savepoint made unreliable; recounted at commit.
_STALE = "batch_counts.stale"

_COUNTERS = cast(Table, BatchStatusCount.__table__)
_ADD = (
    update(_COUNTERS)
    .where(_COUNTERS.c.batch_id == bindparam("b"), _COUNTERS.c.status == bindparam("s"))
    .values(count=_COUNTERS.c.count + bindparam("delta"))
)
_SET = (
    update(_COUNTERS)
    .where(_COUNTERS.c.batch_id == bindparam("b"), _COUNTERS.c.status == bindparam("s"))
    .values(count=bindparam("n"))
)


def _statuses() -> list[str]:
    return [s.value for s in Status]


def record_moves(session: Session, moves: Iterable[tuple[int, str, str]]) -> None:
    """Note (batch_id, old status, new status) of each moved request; the counters (and the batches' versions) move
    when the session commits."""
    pending: Counter[tuple[int, str]] = session.info.setdefault(_PENDING, Counter())
    moved: set[int] = set()
    for batch_id, old, new in moves:
        if old != new:
            pending[(batch_id, old)] -= 1
            pending[(batch_id, new)] += 1
            moved.add(batch_id)
    versions.touch(session, moved)


def seed(session: Session, *, batch_id: int, counts: Mapping[str, int]) -> None:
    """Insert a new batch's counters, one row per status (zeros included), before any of its requests moves."""
    statuses = _statuses()
    unknown = set(counts) - set(statuses)
    if unknown:
        raise ValueError(f"unknown statuses {sorted(unknown)}")
    session.execute(
        insert(BatchStatusCount), [{"batch_id": batch_id, "status": s, "count": counts.get(s, 0)} for s in statuses]
    )


def counters(session: Session, batch_ids: Iterable[int]) -> dict[int, dict[str, int]]:
    """status → count for each batch, as committed (one query on the primary key); no rows read as zeros."""
    ids = sorted(set(batch_ids))
    zeros = dict.fromkeys(_statuses(), 0)
    found: dict[int, dict[str, int]] = {bid: dict(zeros) for bid in ids}
    if ids:
        rows = session.execute(
            select(BatchStatusCount.batch_id, BatchStatusCount.status, BatchStatusCount.count).where(
                BatchStatusCount.batch_id.in_(ids)
            )
        )
        for batch_id, status, count in rows:
            found[batch_id][status] = count
    return found


def recount(session: Session, batch_ids: Iterable[int]) -> dict[int, dict[str, int]]:
    """status → count for each batch from the requests themselves (GROUP BY), this transaction's moves included."""
    ids = sorted(set(batch_ids))
    zeros = dict.fromkeys(_statuses(), 0)
    found: dict[int, dict[str, int]] = {bid: dict(zeros) for bid in ids}
    if ids:
        rows = session.execute(
            select(SigningRequest.batch_id, SigningRequest.status, func.count())
            .where(SigningRequest.batch_id.in_(ids))
            .group_by(SigningRequest.batch_id, SigningRequest.status)
        )
        for batch_id, status, count in rows:
            found[batch_id][status] = count
    return found


def rebuild(session: Session, *, batch_ids: Iterable[int]) -> None:
    """Set these batches' counters to what their requests say, in the session's transaction; the caller commits.

    For writers that bypass ``transition`` (test and benchmark helpers inserting requests) and for repairs.
    """
    ids = sorted(set(batch_ids))
    if not ids:
        return
    # Lock the existing rows first, in the commit hook's order: a mover that commits meanwhile is either
    # done before the GROUP BY below (which then sees its rows) or waits and adds its deltas after ours.
    if session.get_bind().dialect.name == "sqlite":
        # No row locks, and pysqlite begins a transaction only at the first write: writing first keeps every
        # other writer out until this commit.
        session.connection().execute(
            update(_COUNTERS).where(_COUNTERS.c.batch_id.in_(ids)).values(count=_COUNTERS.c.count)
        )
    existing = {
        tuple(row)
        for row in session.execute(
            select(BatchStatusCount.batch_id, BatchStatusCount.status)
            .where(BatchStatusCount.batch_id.in_(ids))
            .order_by(BatchStatusCount.batch_id, BatchStatusCount.status)
            .with_for_update()
        )
    }
    truth = recount(session, ids)
    # The GROUP BY already includes this transaction's own moves: their notes must not count twice.
    pending: Counter[tuple[int, str]] | None = session.info.get(_PENDING)
    if pending is not None:
        for key in [k for k in pending if k[0] in truth]:
            del pending[key]
    values = [(b, s, n) for b in ids for s, n in truth[b].items()]
    updates = [{"b": b, "s": s, "n": n} for b, s, n in values if (b, s) in existing]
    inserts = [{"batch_id": b, "status": s, "count": n} for b, s, n in values if (b, s) not in existing]
    if updates:
        session.connection().execute(_SET, updates)
    if inserts:
        session.execute(insert(BatchStatusCount), inserts)


def _apply_pending(session: Session) -> None:
    # A savepoint's commit fires this too; only the outermost commit applies, once.
    if session.in_nested_transaction():
        return
    pending: Counter[tuple[int, str]] | None = session.info.pop(_PENDING, None)
    stale: set[int] = session.info.pop(_STALE, set())
    if not pending and not stale:
        return
    # Flush the ORM's own changes before locking the counters: a request row UPDATE flushed after them could
    # wait on a transaction that is itself waiting for these counters.
    session.flush()
    if stale:
        rebuild(session, batch_ids=stale)
    deltas = [{"b": b, "s": s, "delta": d} for (b, s), d in sorted((pending or {}).items()) if d and b not in stale]
    if deltas:
        # Core executemany: the ORM would read a list of parameters as a bulk UPDATE by primary key.
        session.connection().execute(_ADD, deltas)


def _after_soft_rollback(session: Session, previous_transaction: SessionTransaction) -> None:
    if previous_transaction.nested and session.info.get(_PENDING):
        # Which notes the savepoint took back is not known: count those batches afresh at commit.
        session.info.setdefault(_STALE, set()).update(b for b, _ in session.info[_PENDING])


def _after_transaction_end(session: Session, transaction: SessionTransaction) -> None:
    # The outermost transaction is over: committed (notes applied), rolled back, or closed; the notes go.
    # Not on after_rollback: ``Session.close()`` ends a transaction without one, and the Session lives on.
    if transaction.parent is None:
        session.info.pop(_PENDING, None)
        session.info.pop(_STALE, None)


event.listen(Session, "before_commit", _apply_pending)
event.listen(Session, "after_soft_rollback", _after_soft_rollback)
event.listen(Session, "after_transaction_end", _after_transaction_end)

"""A version per batch, bumped at commit by every transaction that moved one of its requests, its parties or the
batch itself: live pages send it back (their ETag) and are answered 304 while it stands.

Every state writer notes the batches it moved (``touch``); the outermost commit bumps them once, in id order.
It runs before the counters' own commit step (registered first), so both take their row locks in one order.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Integer, Select, bindparam, event, func, select, text
from sqlalchemy.orm import Session, SessionTransaction

from bulksign.models import Batch, BatchVersion

#: ``session.info`` key: the batches this transaction changed, bumped at commit.
_TOUCHED = "batch_versions.touched"


def touch(session: Session, batch_ids: Iterable[int]) -> None:
    """Note batches whose state this transaction changed; their versions grow when it commits."""
    ids = set(batch_ids)
    if ids:
        session.info.setdefault(_TOUCHED, set()).update(ids)


def versions(session: Session, *, batch_ids: Iterable[int]) -> dict[int, int]:
    """batch id → its version as committed (0 for a batch never changed since it was created)."""
    ids = sorted(set(batch_ids))
    found = dict.fromkeys(ids, 0)
    if ids:
        found.update(
            session.execute(select(BatchVersion.batch_id, BatchVersion.version).where(BatchVersion.batch_id.in_(ids)))
            .tuples()
            .all()
        )
    return found


def version_of(session: Session, *, batch_id: int) -> int:
    """One batch's version (a look-up by primary key)."""
    return session.scalar(select(BatchVersion.version).where(BatchVersion.batch_id == batch_id)) or 0


def fingerprint(session: Session, *, batch_ids: Select[tuple[int]]) -> tuple[int, int, int]:
    """(how many, the sum of their versions, the newest id) of the batches ``batch_ids`` selects: it changes when
    one of them changes, comes or goes (versions only grow)."""
    row = session.execute(
        select(
            func.count(Batch.id), func.coalesce(func.sum(BatchVersion.version), 0), func.coalesce(func.max(Batch.id), 0)
        )
        .select_from(Batch)
        .outerjoin(BatchVersion, BatchVersion.batch_id == Batch.id)
        .where(Batch.id.in_(batch_ids))
    ).one()
    return int(row[0]), int(row[1]), int(row[2])


def _bump(session: Session) -> None:
    # A savepoint's commit fires this too; only the outermost commit bumps, once.
    if session.in_nested_transaction():
        return
    touched: set[int] | None = session.info.pop(_TOUCHED, None)
    if not touched:
        return
    session.flush()
    session.execute(_BUMP, {"ids": sorted(touched)})


#: ``_bump``'s statement: from the batches still there (one deleted in this transaction has nothing to version), in
#: id order, version 1 or one more. Text, as PostgreSQL and SQLite both write it: SQLAlchemy keys no ``ON CONFLICT``
#: construct, so it would compile one anew at every commit; this one is compiled once.
_BUMP = text(
    "INSERT INTO batch_versions (batch_id, version) SELECT batches.id, 1 FROM batches WHERE batches.id IN :ids"
    " ORDER BY batches.id ON CONFLICT (batch_id) DO UPDATE SET version = batch_versions.version + 1"
).bindparams(bindparam("ids", expanding=True, type_=Integer))


def _after_transaction_end(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:
        session.info.pop(_TOUCHED, None)


event.listen(Session, "before_commit", _bump)
event.listen(Session, "after_transaction_end", _after_transaction_end)

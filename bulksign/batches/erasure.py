"""Erasure of one person: every request sent to an address purged now unless a legal hold or a signed contract in
its keeping period forbids it, with its left-out rows and recipients files. docs/architecture/batches.md."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Text, cast, delete, func, select
from sqlalchemy.orm import Session

from bulksign.batches.retention import PurgeResult, erase_from_uploads, holds, policies, purge_requests
from bulksign.batches.states import transition
from bulksign.core.logs import log
from bulksign.documents.storage import Storage
from bulksign.models import Batch, SigningRequest, User
from bulksign.models.batches import BatchSkippedRow
from bulksign.models.status import TRANSITIONS, WAITING_FOR_RECIPIENT, WORKING, Status

logger = logging.getLogger(__name__)

#: States a request is cancelled from before it is erased: someone could still act on it.
OPEN = WORKING | WAITING_FOR_RECIPIENT
#: Why a request was kept: ``legal_hold`` (its batch is held) or ``signed_kept`` (a signed contract within its
#: batch's keeping period).
LEGAL_HOLD = "legal_hold"
SIGNED_KEPT = "signed_kept"


@dataclass(frozen=True)
class ErasedRequest:
    request_id: int
    batch_id: int
    batch_name: str
    #: Its status when erased (``cancelled`` for one that was still open).
    status: str


@dataclass(frozen=True)
class KeptRequest:
    request_id: int
    batch_id: int
    batch_name: str
    status: str
    #: ``LEGAL_HOLD`` or ``SIGNED_KEPT``.
    reason: str
    #: For ``signed_kept``: until when (None: for ever); for ``legal_hold``: the hold's reason in ``hold_reason``.
    kept_until: datetime | None = None
    hold_reason: str | None = None


@dataclass(frozen=True)
class Erasure:
    erased: tuple[ErasedRequest, ...]
    kept: tuple[KeptRequest, ...]
    #: Files deleted from storage.
    files: int
    #: Rows of recipients files left out at creation that held the address (outside held batches), deleted.
    skipped_rows: int = 0
    #: Recipients files that held the address (outside held batches), deleted.
    uploads: int = 0
    #: Webhook deliveries that told of the erased requests: done ones emptied, pending ones re-built without them.
    deliveries_emptied: int = 0
    deliveries_rebuilt: int = 0


def erase_person(session: Session, *, storage: Storage, email: str, by: User | None, now: datetime) -> Erasure:
    """Erase ``email`` (any case) from every batch now; the caller commits. Running it again erases nothing twice."""
    address = (email or "").strip().lower()
    rows = (
        session.execute(
            select(
                SigningRequest.id, SigningRequest.batch_id, SigningRequest.status, SigningRequest.signed_at, Batch.name
            )
            .join(Batch, Batch.id == SigningRequest.batch_id)
            .where(func.lower(SigningRequest.email) == address)
            .order_by(SigningRequest.id)
        ).all()
        if address
        else []
    )
    # A purged row's address is empty: an erasure run again finds nothing left of the person.
    found = policies(session, {r.batch_id for r in rows}) if rows else {}
    erase: list[tuple[int, int, str, str]] = []
    kept: list[KeptRequest] = []
    for rid, bid, status, signed_at, batch_name in rows:
        policy = found[bid]
        if policy.held_at is not None:
            kept.append(KeptRequest(rid, bid, batch_name, status, LEGAL_HOLD, hold_reason=policy.hold_reason))
            continue
        if status == Status.SIGNED.value:
            until = policy.signed_until(signed_at)
            if until is None or until > now:
                kept.append(KeptRequest(rid, bid, batch_name, status, SIGNED_KEPT, kept_until=until))
                continue
        erase.append((rid, bid, batch_name, status))
    actor = f"user:{by.id}" if by else "cli"
    open_ids = [rid for rid, _, _, status in erase if status in OPEN]
    if open_ids:
        cancellable = [s for s in OPEN if Status.CANCELLED in TRANSITIONS[s]]
        transition(session, open_ids, frm=cancellable, to=Status.CANCELLED, now=now, actor=actor)
    done = (
        purge_requests(
            session, storage=storage, request_ids=[r[0] for r in erase], now=now, reason="erasure", actor=actor
        )
        if erase
        else PurgeResult()
    )
    held = {h.batch_id for h in holds(session)}
    skipped = _erase_skipped_rows(session, address=address, held=held)
    found_in = {k.batch_id for k in kept if k.batch_id not in held} | {batch_id for batch_id, _ in skipped}
    uploads = done.uploads + erase_from_uploads(session, storage, address=address, batch_ids=found_in)
    erased = tuple(
        ErasedRequest(rid, bid, name, Status.CANCELLED.value if rid in open_ids else status)
        for rid, bid, name, status in erase
    )
    # Counts only: the address itself is what is being erased, it goes in no log.
    log(
        logger,
        logging.INFO,
        "person erased",
        erased=len(erased),
        kept=len(kept),
        cancelled=len(open_ids),
        files=done.files,
        skipped_rows=len(skipped),
        uploads=uploads,
        deliveries_emptied=done.deliveries_emptied,
        deliveries_rebuilt=done.deliveries_rebuilt,
        batches=len({r.batch_id for r in erased}),
    )
    return Erasure(
        erased=erased,
        kept=tuple(kept),
        files=done.files,
        skipped_rows=len(skipped),
        uploads=uploads,
        deliveries_emptied=done.deliveries_emptied,
        deliveries_rebuilt=done.deliveries_rebuilt,
    )


def _erase_skipped_rows(session: Session, *, address: str, held: set[int]) -> list[tuple[int, int]]:
    """Delete the rows left out at creation that hold ``address`` in a cell, but in batches on legal hold; (batch
    id, row number) of each."""
    if not address:
        return []
    pattern = "%" + address.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    candidates = session.execute(
        select(BatchSkippedRow.batch_id, BatchSkippedRow.row_number, BatchSkippedRow.cells).where(
            func.lower(cast(BatchSkippedRow.cells, Text)).like(pattern, escape="\\")
        )
    ).all()
    # The text match finds candidates; a cell equal to the address (any case) decides.
    matched = [
        (batch_id, row)
        for batch_id, row, cells in candidates
        if batch_id not in held and any(str(v).strip().lower() == address for v in (cells or {}).values())
    ]
    for batch_id, row in matched:
        session.execute(
            delete(BatchSkippedRow).where(BatchSkippedRow.batch_id == batch_id, BatchSkippedRow.row_number == row)
        )
    return matched

"""The purge: a request's files deleted and its personal fields emptied, the proof kept (ids, times, hashes);
files first, rows after, one chunk per commit. docs/architecture/batches.md."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, and_, delete, insert, or_, select, update
from sqlalchemy.orm import Session

from bulksign.batches.exports import ExportStatus
from bulksign.batches.field_values import values_by_name
from bulksign.batches.retention.due import by_policy, due_ids
from bulksign.batches.retention.uploads import expire_uploads, purge_batch_uploads
from bulksign.core.logs import log
from bulksign.core.slicing import slices
from bulksign.documents.document_pages import pages_folder
from bulksign.documents.storage import Storage
from bulksign.integrations.webhook_privacy import forget_requests
from bulksign.models import (
    AddressChange,
    Batch,
    Correction,
    CountersignLink,
    Document,
    Event,
    Export,
    FieldValue,
    OneTimeCode,
    OutgoingMail,
    Party,
    SigningRequest,
)
from bulksign.models.batches import BatchSkippedRow
from bulksign.signing.digests import DIGEST
from bulksign.signing.one_time_codes import MAIL_KIND as CODE_MAIL

logger = logging.getLogger(__name__)

#: Requests purged per transaction: their files are deleted, then their rows emptied and committed.
CHUNK = 100
#: Requests one run purges at most; the next run (an hour later) goes on.
MAX_PER_RUN = 20_000
#: ``Event.type`` of a purged request.
PURGED_EVENT = "data.purged"
#: What an export deleted with its batch's purged requests says on the batch page.
EXPORT_PURGED = "Deleted under the retention rules: build it again from what is kept."


@dataclass(frozen=True)
class PurgeResult:
    requests: int = 0
    documents: int = 0
    #: Files deleted from storage (documents, page images, exports, signers' attachments; a file already gone counts too).
    files: int = 0
    #: Rows of recipients files left out at creation (``batch_skipped_rows``), deleted with their cells.
    skipped_rows: int = 0
    #: Recipients files deleted (``recipient_uploads``): those purged batches were made of, and stale ones.
    uploads: int = 0
    #: Webhook deliveries that told of purged requests: done ones emptied, pending ones re-built without the person.
    deliveries_emptied: int = 0
    deliveries_rebuilt: int = 0

    def __add__(self, other: PurgeResult) -> PurgeResult:
        return PurgeResult(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


def _delete_files(storage: Storage, document: Document) -> int:
    """Delete a document's page images, their manifest, then the document: a rerun after a kill finds the rest."""
    folder = pages_folder(document)
    deleted = 0
    manifest = f"{folder}/pages.json"
    if storage.exists(manifest):
        pages = len(json.loads(storage.get(manifest)).get("pages", ()))
        for number in range(1, pages + 1):
            storage.delete(f"{folder}/{number}.webp")
            deleted += 1
        storage.delete(manifest)
        deleted += 1
    storage.delete(document.storage_key)
    return deleted + 1


def purge_requests(
    session: Session, *, storage: Storage, request_ids: list[int], now: datetime, reason: str, actor: str = "system"
) -> PurgeResult:
    """Purge these requests now (those not purged yet): files first, then the personal data of their rows.

    ``reason``: ``retention`` or ``erasure``, kept in each request's ``data.purged`` event. The caller commits.
    """
    ids = sorted(
        session.scalars(
            select(SigningRequest.id).where(SigningRequest.id.in_(request_ids), SigningRequest.purged_at.is_(None))
        )
    )
    if not ids:
        return PurgeResult()
    documents = session.scalars(select(Document).where(Document.request_id.in_(ids))).all()
    files = sum(_delete_files(storage, document) for document in documents)
    # A signed ZIP or evidence package of the batch holds copies of these documents and names their people: it goes
    # too (staff build it again from what is left).
    batch_ids = set(session.scalars(select(SigningRequest.batch_id).where(SigningRequest.id.in_(ids))))
    exports = session.scalars(
        select(Export).where(Export.batch_id.in_(batch_ids), Export.storage_key.is_not(None), Export.created_at <= now)
    ).all()
    for export in exports:
        if export.storage_key is not None:  # the query's condition, for the type checker
            storage.delete(export.storage_key)
        export.storage_key, export.status, export.error = None, ExportStatus.FAILED, EXPORT_PURGED
    files += len(exports)
    # What the signers filled in: the attachments' files, then the values (each row keeps its field's name, role,
    # time and an attachment's sha256, the proof of what was given).
    attachments = session.scalars(
        select(FieldValue.storage_key).where(FieldValue.request_id.in_(ids), FieldValue.storage_key.is_not(None))
    ).all()
    for key in attachments:
        if key is not None:
            storage.delete(key)
    files += len(attachments)
    session.execute(
        update(FieldValue).where(FieldValue.request_id.in_(ids)).values(value=None, storage_key=None, entered_ip=None)
    )
    # The rows' stored mail attachments are the documents above: their list goes with the addresses.
    session.execute(
        update(OutgoingMail)
        .where(OutgoingMail.request_id.in_(ids))
        .values(to_email="", to_phone=None, subject="", error=None, attachments=[])
    )
    session.execute(update(OneTimeCode).where(OneTimeCode.request_id.in_(ids)).values(destination=""))
    # Every party who signs the document (the row's recipient and the other roles): who they are and how they signed.
    session.execute(
        update(Party)
        .where(Party.request_id.in_(ids))
        .values(
            email=None,
            name=None,
            phone=None,
            decline_reason=None,
            signer_name=None,
            signer_ip=None,
            signature_image=None,
            token_nonce=None,
        )
    )
    # Address changes held for approval: the addresses and what the asker and the approver wrote.
    session.execute(
        update(AddressChange)
        .where(AddressChange.request_id.in_(ids))
        .values(old_email="", new_email="", note=None, reason=None)
    )
    # Corrections: the values, names and addresses they changed, and what the asker and the approver wrote.
    session.execute(update(Correction).where(Correction.request_id.in_(ids)).values(changes={}, note="", reason=None))
    # What an event says beyond its type, time and actor may name a person (an old address, a typed reason).
    session.execute(update(Event).where(Event.request_id.in_(ids)).values(ip=None, user_agent=None, details={}))
    purged = session.execute(
        update(SigningRequest)
        .where(SigningRequest.id.in_(ids), SigningRequest.purged_at.is_(None))
        .values(
            email="",
            name="",
            phone=None,
            data={},
            decline_reason=None,
            cancel_reason=None,
            signer_name=None,
            signer_ip=None,
            signature_image=None,
            error_message=None,
            token_nonce=None,
            purged_at=now,
        )
        .returning(SigningRequest.id, SigningRequest.batch_id)
    ).all()
    if purged:
        session.execute(
            insert(Event),
            [
                {
                    "request_id": rid,
                    "batch_id": bid,
                    "type": PURGED_EVENT,
                    "created_at": now,
                    "actor": actor,
                    "details": {"reason": reason},
                }
                for rid, bid in purged
            ],
        )
    _purge_countersigners(session, batch_ids=batch_ids)
    told = forget_requests(session, request_ids=ids, values_of=values_by_name)
    return PurgeResult(
        requests=len(purged),
        documents=len(documents),
        files=files,
        uploads=purge_batch_uploads(session, storage, batch_ids=batch_ids),
        deliveries_emptied=told.emptied,
        deliveries_rebuilt=told.rebuilt,
    )


def _purge_countersigners(session: Session, *, batch_ids: set[int]) -> None:
    """Once no request of a batch is left unpurged, its countersigners' links go, with their runs (the address,
    the typed name, the drawn signature, the IP) and one-time codes, their digests' and codes' mails lose their
    addresses and subjects, and their codes' events what they say beyond type and time (masked address, IP)."""
    kept = set(
        session.scalars(
            select(SigningRequest.batch_id).where(
                SigningRequest.batch_id.in_(batch_ids), SigningRequest.purged_at.is_(None)
            )
        )
    )
    emptied = sorted(batch_ids - kept)
    if not emptied:
        return
    session.execute(delete(CountersignLink).where(CountersignLink.batch_id.in_(emptied)))  # its runs by cascade
    session.execute(
        update(OutgoingMail)
        .where(
            OutgoingMail.batch_id.in_(emptied),
            or_(OutgoingMail.kind == DIGEST, and_(OutgoingMail.kind == CODE_MAIL, OutgoingMail.request_id.is_(None))),
        )
        .values(to_email="", subject="", error=None)
    )
    session.execute(
        update(Event)
        .where(Event.batch_id.in_(emptied), Event.request_id.is_(None), Event.type.like("code.%"))
        .values(ip=None, user_agent=None, details={})
    )


def purge_due(
    session: Session,
    *,
    storage: Storage,
    now: datetime,
    on_page: Callable[[], None],
    upload_hours: int,
    max_requests: int = MAX_PER_RUN,
) -> PurgeResult:
    """Purge every request whose time has passed (at most ``max_requests``), ``on_page`` (a commit) after each chunk;
    then the rows left out of batches at creation, the recipients files of those batches, and the files no batch
    was made of ``upload_hours`` after their upload."""
    total = PurgeResult()
    while total.requests < max_requests:
        ids = due_ids(session, now=now, limit=min(CHUNK, max_requests - total.requests))
        if not ids:
            break
        done = purge_requests(session, storage=storage, request_ids=ids, now=now, reason="retention")
        on_page()
        total += done
        if not done.requests:  # every id found was purged by a parallel run meanwhile
            break
    # Rows left out at creation were never sent: they end with the batch's creation, with the file that held them.
    # Its count of them stays.
    skipped = uploads = 0
    for policy, batch_ids in by_policy(session).items():
        old = select(Batch.id).where(Batch.created_at <= now - timedelta(days=policy.keep_unsigned_days))
        for chunk in slices(batch_ids):
            gone = delete(BatchSkippedRow).where(BatchSkippedRow.batch_id.in_(old.where(Batch.id.in_(chunk))))
            skipped += cast(CursorResult[Any], session.execute(gone)).rowcount
            uploads += purge_batch_uploads(session, storage, batch_ids=session.scalars(old.where(Batch.id.in_(chunk))))
    uploads += expire_uploads(session, storage, now=now, hours=upload_hours)
    on_page()
    total += PurgeResult(skipped_rows=skipped, uploads=uploads)
    if total.requests or skipped or uploads:
        log(logger, logging.INFO, "retention purge", **{f.name: getattr(total, f.name) for f in fields(total)})
    return total

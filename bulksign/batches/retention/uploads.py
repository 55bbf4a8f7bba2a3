"""The recipients files under retention: each holds every row of its batch (the left-out ones too), so it goes with
the batch's first purge, never kept past the rows it copies; one never made into a batch goes after
``UPLOAD_KEEP_HOURS``. A file that a batch on legal hold was made of stays with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import Exists, exists, select
from sqlalchemy.orm import Session, aliased

from bulksign.core.slicing import slices
from bulksign.documents.storage import Storage
from bulksign.models import Batch, RecipientUpload
from bulksign.models.batches import BatchRetention
from bulksign.recipients.uploads import delete_uploads, naming

#: Stale uploads deleted per run at most (each is a file); the next run goes on.
MAX_STALE = 1000


def _made_into_held() -> Exists:
    """Uploads a batch on legal hold was made of (any batch: not the one the outer query joined)."""
    other = aliased(Batch)
    return exists().where(
        other.upload_id == RecipientUpload.id,
        BatchRetention.batch_id == other.id,
        BatchRetention.held_at.is_not(None),
    )


def purge_batch_uploads(session: Session, storage: Storage, *, batch_ids: Iterable[int]) -> int:
    """Delete the files these batches were made of (one a held batch was made of too stays); how many."""
    found: list[str] = []
    for chunk in slices(sorted(set(batch_ids))):
        found.extend(
            session.scalars(
                select(RecipientUpload.id)
                .join(Batch, Batch.upload_id == RecipientUpload.id)
                .where(Batch.id.in_(chunk), ~_made_into_held())
            )
        )
    return delete_uploads(session, storage, upload_ids=found)


def expire_uploads(session: Session, storage: Storage, *, now: datetime, hours: int) -> int:
    """Delete the files uploaded ``hours`` before ``now`` or earlier that no batch was made of; how many."""
    stale = session.scalars(
        select(RecipientUpload.id)
        .where(
            RecipientUpload.created_at <= now - timedelta(hours=hours),
            ~exists().where(Batch.upload_id == RecipientUpload.id),
        )
        .limit(MAX_STALE)
    ).all()
    return delete_uploads(session, storage, upload_ids=stale)


def erase_from_uploads(session: Session, storage: Storage, *, address: str, batch_ids: Iterable[int]) -> int:
    """For an erasure of ``address``: delete the files of these batches (those it was found in) and the files not
    made into a batch yet that name it in a cell; how many."""
    waiting = session.scalars(
        select(RecipientUpload.id).where(~exists().where(Batch.upload_id == RecipientUpload.id))
    ).all()
    named = naming(session, storage, upload_ids=waiting, address=address) if address else []
    return purge_batch_uploads(session, storage, batch_ids=batch_ids) + delete_uploads(
        session, storage, upload_ids=named
    )

"""Jobs on the ``default`` queue for new batches."""

from __future__ import annotations

from bulksign.batches.creation import enqueue_pending_renders
from bulksign.core.extensions import db
from bulksign.work.queues import BATCH_RENDERS, job


@job(BATCH_RENDERS)
def enqueue_renders(batch_id: int) -> int:
    """Queue the render job of every pending request of a big batch (the web request only queued this job)."""
    return enqueue_pending_renders(db.session, batch_id=batch_id)

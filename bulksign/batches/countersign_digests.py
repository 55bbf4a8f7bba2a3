"""Staff's "send the countersigners' digest now": each countersigner of a batch (``signing.digests``) with
documents ready gets a digest at once, whatever ``COUNTERSIGN_DIGEST_HOURS`` says."""

from __future__ import annotations

import logging
from datetime import datetime

from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from bulksign.batches.progress import batch_for_action
from bulksign.core.logs import log
from bulksign.models import User
from bulksign.signing.digests import queue_digests_now
from bulksign.work.pipeline import enqueue_sends

logger = logging.getLogger(__name__)


def send_digests_now(session: Session, *, batch_id: int, user: User, now: datetime) -> int:
    """Queue a digest to each countersigner of the batch with documents ready; how many. Commits, then sends.
    BatchActionError (404, 403) when ``user`` may not act on the batch."""
    batch_for_action(session, batch_id=batch_id, user=user)
    mail_ids = queue_digests_now(session, batch_id=batch_id, now=now)
    session.commit()
    try:
        enqueue_sends(mail_ids, at_front=True)
    except RedisError as exc:  # committed in ``queued``: the reconciler sends them
        log(logger, logging.ERROR, "could not queue the digests", batch_id=batch_id, error=str(exc))
    log(logger, logging.INFO, "countersign digests sent now", batch_id=batch_id, user_id=user.id, digests=len(mail_ids))
    return len(mail_ids)

"""Bulk actions too large for a web request ("select all N matching"), on the ``default`` queue."""
from __future__ import annotations

import logging

from ..batches import BatchActionError
from ..bulk_actions import apply_action, follow_up
from ..dashboard import RecipientFilter, resolve_selection
from ..extensions import db
from ..logs import log
from ..models import User, utcnow

logger = logging.getLogger(__name__)


def apply_to_filter(batch_id: int, action: str, user_id: int, status: str, q: str,
                    extend_days: int | None = None) -> str:
    """Resolve every request matching the filter, apply the action as ``user_id``, commit, queue follow-ups."""
    user = db.session.get(User, user_id)
    if user is None or user.disabled:
        return "skipped: user gone"
    ids = list(resolve_selection(db.session, batch_id=batch_id, request_ids=[], select_all=True,
                                 flt=RecipientFilter(status=status, q=q)).request_ids)
    now = utcnow()
    try:
        outcome = apply_action(db.session, action=action, batch_id=batch_id, request_ids=ids, user=user, now=now,
                               extend_days=extend_days)
    except BatchActionError as exc:
        db.session.rollback()
        log(logger, logging.WARNING, "bulk action refused", batch_id=batch_id, action=action, user_id=user_id,
            error=exc.message)
        return f"refused: {exc.message}"
    db.session.commit()
    follow_up(outcome)
    log(logger, logging.INFO, "bulk action done", batch_id=batch_id, action=action, user_id=user_id,
        requests=len(ids), done=outcome.done, skipped=outcome.skipped)
    return f"{action}: {outcome.done}"

"""Bulk actions too large for a web request, on the ``default`` queue: one slice of requests per commit."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from bulksign.batches.bulk_actions import JOB_SLICE, reachable_ids, run_staff_action
from bulksign.batches.progress import BatchActionError
from bulksign.batches.recipients_table import RecipientFilter, resolve_selection
from bulksign.core.extensions import db
from bulksign.core.logs import log
from bulksign.core.slicing import slices
from bulksign.models import User, utcnow
from bulksign.work.queues import BULK_BY_FILTER, BULK_BY_IDS, job

logger = logging.getLogger(__name__)


@job(BULK_BY_FILTER)
def apply_to_filter(
    batch_id: int,
    action: str,
    user_id: int,
    status: str,
    q: str,
    extend_days: int | None = None,
    force: bool = False,
    reason: str | None = None,
) -> str:
    """Resolve every request matching the filter, then apply the action to them as ``apply_to_ids`` does."""
    ids = list(
        resolve_selection(
            db.session, batch_id=batch_id, request_ids=[], select_all=True, flt=RecipientFilter(status=status, q=q)
        ).request_ids
    )
    return apply_to_ids(batch_id, action, user_id, ids, extend_days, force=force, reason=reason)


@job(BULK_BY_IDS)
def apply_to_ids(
    batch_id: int,
    action: str,
    user_id: int,
    request_ids: list[int] | None,
    extend_days: int | None = None,
    selector: str | None = None,
    force: bool = False,
    role: str | None = None,
    reason: str | None = None,
) -> str:
    """Apply the action as ``user_id`` to ``request_ids`` (None: every request of the batch it can reach),
    committing and queueing follow-ups after each slice, so a stop part-way keeps what was done; ``reason``: a
    cancel's, told to the parties already invited.
    A reminder to a ``selector`` ("all not signed") runs as one call: it pages through the batch itself."""
    user = db.session.get(User, user_id)
    if user is None or user.disabled:
        return "skipped: user gone"
    ids: list[int] = []
    parts: Iterable[list[int] | None] = [None]
    if selector is None:
        ids = reachable_ids(db.session, action=action, batch_id=batch_id) if request_ids is None else request_ids
        parts = slices(ids, JOB_SLICE)
    done = 0
    skipped: dict[str, int] = {}
    for part in parts:
        try:
            outcome = run_staff_action(
                db.session,
                action=action,
                batch_id=batch_id,
                request_ids=part,
                user=user,
                now=utcnow(),
                extend_days=extend_days,
                selector=selector,
                force=force,
                role=role,
                inline=True,
                reason=reason,
            )
        except BatchActionError as exc:
            log(
                logger,
                logging.WARNING,
                "bulk action refused",
                batch_id=batch_id,
                action=action,
                user_id=user_id,
                error=exc.message,
                done=done,
            )
            return f"refused: {exc.message}"
        done += outcome.done
        for why, n in outcome.skipped.items():
            skipped[why] = skipped.get(why, 0) + n
    log(
        logger,
        logging.INFO,
        "bulk action done",
        batch_id=batch_id,
        action=action,
        user_id=user_id,
        requests=len(ids),
        done=done,
        skipped=skipped,
    )
    return f"{action}: {done}"

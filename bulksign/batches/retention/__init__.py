"""Retention: how long a batch keeps its documents and the personal data of its rows, legal holds that stop it,
what the next purge removes, and the purge itself.

A signed request is kept ``keep_signed_days`` after signing (default: for ever); an unsigned one that ended
(declined, expired, cancelled, failed, bounced) ``keep_unsigned_days`` after it ended (default 90). The team sets
both (``TeamRetention``), a batch may set its own (``BatchRetention``); a batch on legal hold is never purged.

The parts: ``periods`` (the periods a team or a batch sets, and each batch's policy), ``due`` (which requests have
passed their time, and the preview of the next purge), ``purge`` (files and personal data removed) and
``legal_hold``. Callers use the names below, whichever part holds them; the limits each part works by (``CHUNK``,
``MAX_REASON`` ...) stay in that part, where a test that changes one must change it.
"""

from bulksign.batches.retention.due import BatchDue, preview
from bulksign.batches.retention.legal_hold import HOLD_LIFTED, HOLD_PLACED, HeldBatch, holds, lift_hold, place_hold
from bulksign.batches.retention.periods import (
    MAX_DAYS,
    Policy,
    RetentionError,
    batch_days_from_form,
    check_days,
    policies,
    set_batch_retention,
    set_team_retention,
    team_policies,
    team_policy,
)
from bulksign.batches.retention.purge import EXPORT_PURGED, PURGED_EVENT, PurgeResult, purge_due, purge_requests

__all__ = [
    "EXPORT_PURGED",
    "HOLD_LIFTED",
    "HOLD_PLACED",
    "MAX_DAYS",
    "PURGED_EVENT",
    "BatchDue",
    "HeldBatch",
    "Policy",
    "PurgeResult",
    "RetentionError",
    "batch_days_from_form",
    "check_days",
    "holds",
    "lift_hold",
    "place_hold",
    "policies",
    "preview",
    "purge_due",
    "purge_requests",
    "set_batch_retention",
    "set_team_retention",
    "team_policies",
    "team_policy",
]

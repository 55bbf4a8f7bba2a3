"""Retention: how long a batch keeps its documents and its rows' personal data (``periods``), legal holds
(``legal_hold``), what is due (``due``), the purge (``purge``) and recipients files (``uploads``)."""

from bulksign.batches.retention.due import BatchDue, preview
from bulksign.batches.retention.legal_hold import HOLD_LIFTED, HOLD_PLACED, HeldBatch, holds, lift_hold, place_hold
from bulksign.batches.retention.periods import (
    MAX_DAYS,
    Policy,
    RetentionError,
    check_days,
    policies,
    set_batch_retention,
    set_team_retention,
    team_policies,
    team_policy,
)
from bulksign.batches.retention.purge import EXPORT_PURGED, PURGED_EVENT, PurgeResult, purge_due, purge_requests
from bulksign.batches.retention.uploads import erase_from_uploads

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
    "check_days",
    "erase_from_uploads",
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

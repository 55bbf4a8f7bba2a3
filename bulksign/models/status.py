"""Every status a request or a batch can be in, the moves allowed between them, and the named sets of states.

A leaf module (it imports nothing of bulksign): the models derive their partial indexes from these sets, the
writers (``states.transition`` for requests, ``states.move_batches`` for batches) check their moves against
the tables, and the counters (``batch_counts``) list the statuses, without importing one another.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Status(StrEnum):
    """The status of one signing request."""

    PENDING = "pending"
    GENERATING = "generating"
    GENERATED = "generated"
    SENDING = "sending"
    SENT = "sent"
    OPENED = "opened"
    SIGNED = "signed"
    DECLINED = "declined"
    EXPIRED = "expired"
    FAILED = "failed"
    BOUNCED = "bounced"
    CANCELLED = "cancelled"


S = Status

#: Every legal move: from-state → the states it may go to. Anything not listed is refused.
TRANSITIONS: dict[Status, frozenset[Status]] = {
    # generating/sending → back one step: the reconciler requeues work whose worker died.
    S.PENDING: frozenset({S.GENERATING, S.CANCELLED}),
    S.GENERATING: frozenset({S.GENERATED, S.FAILED, S.PENDING, S.CANCELLED}),
    S.GENERATED: frozenset({S.SENDING, S.FAILED, S.CANCELLED}),
    S.SENDING: frozenset({S.SENT, S.FAILED, S.BOUNCED, S.GENERATED, S.CANCELLED}),
    # sent/opened → generated: staff resend with a new link (a fresh invitation goes out).
    S.SENT: frozenset({S.OPENED, S.EXPIRED, S.BOUNCED, S.CANCELLED, S.GENERATED}),
    S.OPENED: frozenset({S.SIGNED, S.DECLINED, S.EXPIRED, S.BOUNCED, S.CANCELLED, S.GENERATED}),
    S.FAILED: frozenset({S.PENDING, S.CANCELLED}),
    S.EXPIRED: frozenset({S.GENERATED}),
    S.BOUNCED: frozenset({S.GENERATED, S.CANCELLED}),
    S.SIGNED: frozenset(),
    # declined → generated: staff invite again (a new link) once the recipient's concern is settled.
    S.DECLINED: frozenset({S.GENERATED}),
    S.CANCELLED: frozenset(),
}

#: States in which the pipeline still owes work (the reconciler watches these).
WORKING = frozenset({S.PENDING, S.GENERATING, S.GENERATED, S.SENDING})
#: States in which the recipient can act on the link (reminders and expiry look at these).
WAITING_FOR_RECIPIENT = frozenset({S.SENT, S.OPENED})
#: States in which nothing more will happen unless staff act.
FINAL = frozenset({S.SIGNED, S.DECLINED, S.EXPIRED, S.FAILED, S.BOUNCED, S.CANCELLED})
#: States in which the dispatch of a request is over (delivered or explicitly not).
DISPATCHED = FINAL | WAITING_FOR_RECIPIENT


class BatchStatus(StrEnum):
    """The status of a batch: ``processing`` while any of its requests still owes dispatch work."""

    PENDING = "pending"
    PROCESSING = "processing"
    COMPLETED = "completed"
    PARTIALLY_FAILED = "partially_failed"
    CANCELLED = "cancelled"


B = BatchStatus

#: Every legal move of a batch. Staff may stop a batch in any state but cancelled.
BATCH_TRANSITIONS: dict[BatchStatus, frozenset[BatchStatus]] = {
    B.PENDING: frozenset({B.PROCESSING, B.CANCELLED}),
    B.PROCESSING: frozenset({B.COMPLETED, B.PARTIALLY_FAILED, B.CANCELLED}),
    # completed → partially_failed: a bounce reported after the batch closed;
    # → processing: staff retry or resend some of its requests.
    B.COMPLETED: frozenset({B.PARTIALLY_FAILED, B.PROCESSING, B.CANCELLED}),
    B.PARTIALLY_FAILED: frozenset({B.PROCESSING, B.CANCELLED}),
    B.CANCELLED: frozenset(),
}

#: Batch states in which the pipeline has nothing left to do for the batch.
BATCH_FINAL = frozenset({B.COMPLETED, B.PARTIALLY_FAILED, B.CANCELLED})


class IllegalTransition(ValueError):
    """A move the table does not allow; a programming error, never a race."""


def can_move(frm: str, to: str) -> bool:
    """Whether the request table allows ``frm`` → ``to``."""
    return Status(to) in TRANSITIONS[Status(frm)]


def sql_in(states: Iterable[Status]) -> str:
    """``status IN ('a','b')`` for a partial index, in the enum's order so the text (and the migration) is stable."""
    chosen = set(states)
    return "status IN ({})".format(",".join(f"'{s.value}'" for s in Status if s in chosen))

"""Every status a request or a batch can be in, the moves allowed between them, and the named sets of states.
More in docs/architecture/models.md."""

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
    # sent/opened → generated: staff resend with a new link (a fresh invitation goes out). sent → declined: another
    # party of a document several sign declined it before the recipient opened it (``routing``).
    # sent/opened/declined/expired/bounced → pending: staff corrected the request (``batches.corrections``); its
    # document is rendered again as a new version and every party asked again.
    S.SENT: frozenset({S.OPENED, S.EXPIRED, S.BOUNCED, S.CANCELLED, S.GENERATED, S.DECLINED, S.PENDING}),
    S.OPENED: frozenset({S.SIGNED, S.DECLINED, S.EXPIRED, S.BOUNCED, S.CANCELLED, S.GENERATED, S.PENDING}),
    # failed → generated: the batch's text cap was raised; the invitation text it held back (its document is ready)
    # goes out now.
    S.FAILED: frozenset({S.PENDING, S.GENERATED, S.CANCELLED}),
    S.EXPIRED: frozenset({S.GENERATED, S.PENDING}),
    # bounced → sent/opened: another party's invitation was returned; staff corrected that party's address and
    # resent to it alone (``party_resend.resend_to_party``): the request goes back to where its routing stood.
    S.BOUNCED: frozenset({S.GENERATED, S.CANCELLED, S.SENT, S.OPENED, S.PENDING}),
    S.SIGNED: frozenset(),
    # declined → generated: staff invite again (a new link) once the recipient's concern is settled.
    S.DECLINED: frozenset({S.GENERATED, S.PENDING}),
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
    """The status of a batch, named by what it means for its owner; the moves between them:
    docs/architecture/models.md."""

    AWAITING_APPROVAL = "awaiting_approval"
    PENDING = "pending"
    PROCESSING = "processing"
    AWAITING_SIGNATURES = "awaiting_signatures"
    PARTIALLY_FAILED = "partially_failed"
    ALL_SIGNED = "all_signed"
    CLOSED = "closed"
    CANCELLED = "cancelled"


B = BatchStatus

#: Every legal move of a batch. Staff may stop a batch in any state but all_signed and cancelled.
BATCH_TRANSITIONS: dict[BatchStatus, frozenset[BatchStatus]] = {
    # → processing: approved (its renders are queued then); → cancelled: rejected, or cancelled by staff.
    B.AWAITING_APPROVAL: frozenset({B.PROCESSING, B.CANCELLED}),
    B.PENDING: frozenset({B.PROCESSING, B.CANCELLED}),
    # → all_signed | closed: the last request dispatched was also the last to settle (resent after the rest signed).
    B.PROCESSING: frozenset({B.AWAITING_SIGNATURES, B.PARTIALLY_FAILED, B.ALL_SIGNED, B.CLOSED, B.CANCELLED}),
    # → partially_failed: a bounce reported after sending ended; → processing: staff retry or resend some requests.
    B.AWAITING_SIGNATURES: frozenset({B.PARTIALLY_FAILED, B.ALL_SIGNED, B.CLOSED, B.PROCESSING, B.CANCELLED}),
    B.PARTIALLY_FAILED: frozenset({B.CLOSED, B.PROCESSING, B.CANCELLED}),
    # Nothing can change in a batch every recipient signed.
    B.ALL_SIGNED: frozenset(),
    # closed → processing: staff resend expired requests, invite decliners again or retry failed ones.
    B.CLOSED: frozenset({B.PROCESSING, B.CANCELLED}),
    B.CANCELLED: frozenset(),
}

#: Batch states in which the pipeline has nothing left to do for the batch (every invitation dispatched).
BATCH_DISPATCHED = frozenset({B.AWAITING_SIGNATURES, B.PARTIALLY_FAILED, B.ALL_SIGNED, B.CLOSED})
#: Batch states in which recipients may still sign: the roll-up watches these for their end.
BATCH_AWAITING = frozenset({B.AWAITING_SIGNATURES, B.PARTIALLY_FAILED})
#: Batch states in which nothing more will happen unless staff act.
BATCH_FINAL = frozenset({B.ALL_SIGNED, B.CLOSED, B.CANCELLED})
#: Batch states staff may cancel: every one whose moves include cancelled.
BATCH_CANCELLABLE = frozenset(s for s, moves in BATCH_TRANSITIONS.items() if B.CANCELLED in moves)


class IllegalTransition(ValueError):
    """A move the table does not allow; a programming error, never a race."""


def can_move(frm: str, to: str) -> bool:
    """Whether the request table allows ``frm`` → ``to``."""
    return Status(to) in TRANSITIONS[Status(frm)]


def sql_in(states: Iterable[Status]) -> str:
    """``status IN ('a','b')`` for a partial index, in the enum's order so the text (and the migration) is stable."""
    chosen = set(states)
    return "status IN ({})".format(",".join(f"'{s.value}'" for s in Status if s in chosen))


#: A batch's status as the API and webhooks name it, by what it means for the owner: it waits for approval (nothing
#: sent yet; a rejected one is ``cancelled``, its ``approval`` says so), its documents are being
#: prepared and sent, every invitation is out and signatures are awaited, everyone signed, or it closed with
#: some unsigned (``unsigned`` says how many), or staff cancelled it. A partly failed batch awaits the rest's.
BATCH_STATE_NAMES: dict[BatchStatus, str] = {
    B.AWAITING_APPROVAL: "awaiting_approval",
    B.PENDING: "sending",
    B.PROCESSING: "sending",
    B.AWAITING_SIGNATURES: "awaiting_signatures",
    B.PARTIALLY_FAILED: "awaiting_signatures",
    B.ALL_SIGNED: "all_signed",
    B.CLOSED: "closed",
    B.CANCELLED: "cancelled",
}

"""Approval before sending: a batch of a team that requires it waits in ``awaiting_approval`` until a manager or
an admin, never its creator, approves it (its renders are queued) or rejects it (cancelled, its creator told)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from flask import Flask
from flask_babel import force_locale
from flask_babel import gettext as _
from flask_mail import Message
from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.batches import approval_requests
from bulksign.batches.notices import notice_batch, notice_locale, notice_message
from bulksign.batches.progress import close_if_done
from bulksign.batches.rendering import document_context
from bulksign.batches.states import move_batches, transition
from bulksign.core.errors import BulksignError
from bulksign.core.errors import Message as Text
from bulksign.core.logs import log
from bulksign.core.messages import N_, N_plural
from bulksign.doc_templates.kinds import render_document
from bulksign.mail.mailer import builder, queue_mail
from bulksign.models import Batch, Event, OutgoingMail, SigningRequest, Team, User
from bulksign.models.mail import MailKind, MailStatus
from bulksign.models.status import BatchStatus, Status
from bulksign.people import access
from bulksign.work import pipeline
from bulksign.work.queues import BATCH_RENDERS

logger = logging.getLogger(__name__)


class Approval(StrEnum):
    """Where a batch held for approval stands (``Batch.approval``; None: its team required none)."""

    WAITING = "waiting"
    APPROVED = "approved"
    REJECTED = "rejected"


#: The mail that tells a batch's creator it was rejected, and why.
REJECTED_NOTICE = MailKind.APPROVAL_REJECTED
#: Documents an approver may look at before deciding: the batch's first rows that will be mailed.
SAMPLE_COUNT = 3
MAX_REASON = 1000
#: Up to this many renders are queued inside the approving request; a bigger batch gets the fan-out job.
INLINE_ENQUEUE_MAX = 10_000


class ApprovalError(BulksignError):
    """An approval or rejection that cannot be done; ``status`` is the HTTP status a view answers."""

    def __init__(self, message: Text, status: int):
        super().__init__(message, status=status)


@dataclass(frozen=True)
class Decision:
    batch: Batch
    approval: Approval
    #: Requests whose render was queued (approved) or that were cancelled (rejected).
    requests: int


def required_for(session: Session, *, team_id: int | None) -> bool:
    """Whether a new batch of this team waits for approval."""
    return team_id is not None and bool(session.scalar(select(Team.require_approval).where(Team.id == team_id)))


def may_decide(session: Session, *, batch: Batch, user: User) -> bool:
    """Whether ``user`` may approve or reject ``batch`` (for showing the buttons): an admin or a manager of its
    team, not its creator."""
    return _refusal(session, batch=batch, user=user) is None


def is_approver(session: Session, *, team_id: int | None, user: User) -> bool:
    """Whether ``user`` approves for the team: an admin, or a manager of it (never what they asked for themselves)."""
    return user.is_admin or (user.role == access.MANAGER and team_id in access.team_ids_of(session, user=user))


def _refusal(session: Session, *, batch: Batch, user: User) -> ApprovalError | None:
    if batch.created_by_id == user.id:
        return ApprovalError(N_("You created this batch: someone else must approve or reject it."), 403)
    if is_approver(session, team_id=batch.team_id, user=user):
        return None
    return ApprovalError(N_("Only a manager of the batch's team or an admin can approve or reject it."), 403)


def _decidable(session: Session, *, batch_id: int, user: User) -> Batch:
    try:
        batch = access.batch_for_read(session, batch_id=batch_id, user=user)
    except access.Refused as exc:
        raise ApprovalError(exc.message, exc.status) from None
    refusal = _refusal(session, batch=batch, user=user)
    if refusal is not None:
        raise refusal
    if batch.status != BatchStatus.AWAITING_APPROVAL:
        raise ApprovalError(N_("This batch is not waiting for approval."), 409)
    return batch


def approve(session: Session, *, batch_id: int, user: User, now: datetime) -> Decision:
    """Approve a waiting batch (commits), then queue its renders; ``ApprovalError`` 404/403/409 otherwise."""
    batch = _decidable(session, batch_id=batch_id, user=user)
    _decide(session, batch, approval=Approval.APPROVED, to=BatchStatus.PROCESSING, user=user, now=now, started_at=now)
    session.add(Event(batch_id=batch.id, type="batch.approved", created_at=now, actor=f"user:{user.id}", details={}))
    session.commit()
    session.refresh(batch)
    pending = list(
        session.scalars(
            select(SigningRequest.id)
            .where(SigningRequest.batch_id == batch.id, SigningRequest.status == Status.PENDING)
            .order_by(SigningRequest.id)
        )
    )
    log(logger, logging.INFO, "batch approved", batch_id=batch.id, user_id=user.id, requests=len(pending))
    if not pending:  # every row was suppressed: nothing to send, the batch moves on to its end
        close_if_done(session, batch_id=batch.id, now=now)
        session.commit()
    try:
        if len(pending) <= INLINE_ENQUEUE_MAX:
            pipeline.enqueue_renders(pending)
        else:
            BATCH_RENDERS.enqueue_unique([batch.id])
    except RedisError as exc:
        # The batch is processing and its requests pending: the reconciler queues them when Redis is back.
        log(logger, logging.ERROR, "could not queue renders", batch_id=batch.id, error=str(exc))
    return Decision(batch=batch, approval=Approval.APPROVED, requests=len(pending))


def _decide(
    session: Session, batch: Batch, *, approval: Approval, to: str, user: User, now: datetime, **fields: Any
) -> None:
    """Move the waiting batch to ``to`` with the decision, who made it and when (and ``fields``); 409 when someone
    else decided or cancelled it a moment ago (the move found it no longer waiting)."""
    moved = move_batches(
        session,
        batch.id,
        frm=BatchStatus.AWAITING_APPROVAL,
        to=to,
        approval=approval,
        approval_by_id=user.id,
        approval_at=now,
        **fields,
    )
    if not moved:
        session.rollback()
        raise ApprovalError(N_("This batch is not waiting for approval."), 409)


def reject(session: Session, *, batch_id: int, user: User, reason: str, now: datetime) -> Decision:
    """Reject a waiting batch with a reason (commits): it is cancelled, nothing of it is sent, and its creator is
    mailed the reason. The caller enqueues ``Decision``'s notice (``rejection_notices``)."""
    batch = _decidable(session, batch_id=batch_id, user=user)
    reason = checked_reason(reason, missing=N_("Say why the batch is rejected: its creator reads it."))
    _decide(
        session,
        batch,
        approval=Approval.REJECTED,
        to=BatchStatus.CANCELLED,
        user=user,
        now=now,
        rejection_reason=reason,
        cancelled_at=now,
        finished_at=now,
    )
    ids = list(
        session.scalars(
            select(SigningRequest.id).where(
                SigningRequest.batch_id == batch.id, SigningRequest.status == Status.PENDING
            )
        )
    )
    cancelled = transition(session, ids, frm=Status.PENDING, to=Status.CANCELLED, now=now, actor=f"user:{user.id}")
    session.add(
        Event(
            batch_id=batch.id,
            type="batch.rejected",
            created_at=now,
            actor=f"user:{user.id}",
            details={"reason": reason},
        )
    )
    creator = batch.created_by
    if creator is not None and not creator.disabled:
        with force_locale(creator.locale or "en"):
            subject = _('Batch "%(batch)s" was not approved', batch=batch.name)
        queue_mail(
            session,
            key=f"approval-rejected-{batch.id}",
            kind=REJECTED_NOTICE,
            to_email=creator.email,
            subject=subject,
            now=now,
            batch_id=batch.id,
        )
    session.commit()
    session.refresh(batch)
    log(logger, logging.INFO, "batch rejected", batch_id=batch.id, user_id=user.id, requests=len(cancelled.won))
    return Decision(batch=batch, approval=Approval.REJECTED, requests=len(cancelled.won))


def checked_reason(reason: str | None, *, missing: N_) -> str:
    """A rejection's reason on one line; ``ApprovalError`` 422 saying ``missing`` when there is none, or when it is
    too long."""
    reason = " ".join((reason or "").split())
    if not reason:
        raise ApprovalError(missing, 422)
    if len(reason) > MAX_REASON:
        raise ApprovalError(
            N_plural(
                "The reason is longer than %(num)s character.",
                "The reason is longer than %(num)s characters.",
                MAX_REASON,
            ),
            422,
        )
    return reason


@dataclass(frozen=True)
class HistoryLine:
    """One event of the batch's approval: created, approved or rejected, by whom, when (and why)."""

    type: str
    at: datetime
    who: str
    reason: str | None = None


@dataclass(frozen=True)
class ApprovalPage:
    """What the batch page shows of its approval."""

    waiting: bool
    may_decide: bool
    is_creator: bool
    samples: tuple[SigningRequest, ...]
    history: tuple[HistoryLine, ...]
    #: While it waits: the names of who is asked to approve it (its team's managers).
    approvers: tuple[str, ...] = ()
    #: While it waits: its roles and who signs as each (none for a single-signer batch).
    parties: tuple[approval_requests.PartyLine, ...] = ()


#: Batch events the page lists with its approval.
HISTORY_EVENTS = ("batch.created", "batch.approved", "batch.rejected")


def page(session: Session, *, batch: Batch, user: User) -> ApprovalPage:
    """The approval part of the batch page for ``user``; its history only for a batch that needed approval."""
    waiting = batch.status == BatchStatus.AWAITING_APPROVAL
    history: list[HistoryLine] = []
    if batch.approval is not None:
        events = session.execute(
            select(Event.type, Event.created_at, Event.actor, Event.details)
            .where(Event.batch_id == batch.id, Event.request_id.is_(None), Event.type.in_(HISTORY_EVENTS))
            .order_by(Event.id)
        ).all()
        ids = {int(e.actor[5:]) for e in events if (e.actor or "").startswith("user:") and e.actor[5:].isdigit()}
        names = {u.id: u.shown_name for u in session.scalars(select(User).where(User.id.in_(ids)))} if ids else {}
        for e in events:
            actor = e.actor or ""
            who = names.get(int(actor[5:]), actor) if actor.startswith("user:") and actor[5:].isdigit() else actor
            history.append(HistoryLine(type=e.type, at=e.created_at, who=who, reason=(e.details or {}).get("reason")))
    return ApprovalPage(
        waiting=waiting,
        may_decide=waiting and may_decide(session, batch=batch, user=user),
        is_creator=batch.created_by_id == user.id,
        samples=tuple(sample_requests(session, batch_id=batch.id)) if waiting else (),
        history=tuple(history),
        approvers=tuple(u.shown_name for u in approval_requests.approvers(session, batch=batch)) if waiting else (),
        parties=approval_requests.party_lines(session, batch_id=batch.id) if waiting else (),
    )


def rejection_notices(session: Session, *, batch_id: int) -> list[int]:
    """The rejection mail of this batch still to go out (the caller enqueues it after the commit)."""
    return list(
        session.scalars(
            select(OutgoingMail.id).where(
                OutgoingMail.batch_id == batch_id,
                OutgoingMail.kind == REJECTED_NOTICE,
                OutgoingMail.status == MailStatus.QUEUED,
            )
        )
    )


def sample_requests(session: Session, *, batch_id: int, limit: int = SAMPLE_COUNT) -> list[SigningRequest]:
    """The batch's first rows that would be mailed: the ones an approver opens."""
    return list(
        session.scalars(
            select(SigningRequest)
            .where(SigningRequest.batch_id == batch_id, SigningRequest.status == Status.PENDING)
            .order_by(SigningRequest.id)
            .limit(limit)
        )
    )


def sample_document(session: Session, *, batch: Batch, request_id: int, timeout: float) -> bytes:
    """Any of the batch's documents that would be mailed, rendered now for its real row (not stored, not mailed);
    LookupError for a request of another batch or not to be mailed, ``ApprovalError`` 409 once the batch no longer
    waits."""
    if batch.status != BatchStatus.AWAITING_APPROVAL:
        raise ApprovalError(N_("Samples are shown while the batch waits for approval; this one does not."), 409)
    request = session.get(SigningRequest, request_id)
    if request is None or request.batch_id != batch.id or request.status != Status.PENDING:
        raise LookupError(request_id)
    return render_document(batch.template_version, document_context(request), timeout=timeout)


@builder(REJECTED_NOTICE)
def build_rejected_notice(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """Who rejected the batch, why, and where it is; in its creator's language."""
    batch = notice_batch(session, mail)
    by = batch.approval_by
    with force_locale(notice_locale(batch)):
        lines = [
            _(
                '%(who)s rejected the batch "%(batch)s". Nothing of it was sent.',
                who=by.shown_name if by is not None else _("An approver"),
                batch=batch.name,
            ),
            "",
            _("Their reason:"),
            batch.rejection_reason or "",
            "",
            _("Correct what they asked for and create the batch again. The batch page:"),
            f"{app.config['APP_URL']}/batches/{batch.id}",
        ]
    return notice_message(mail, app, body="\n".join(lines) + "\n")

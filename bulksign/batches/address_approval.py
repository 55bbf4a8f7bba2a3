"""Deciding a held address change: a manager of the batch's team or an admin, never whoever asked, approves it
(the new address gets its link) or rejects it with a reason. docs/architecture/batches.md has the rules."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.batches.address_changes import apply_change, checked_change, move_change, record
from bulksign.batches.approval import ApprovalError, checked_reason, is_approver
from bulksign.batches.progress import BatchActionError
from bulksign.batches.resend import resend_with_new_link
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.models import RECIPIENT_ROLE, AddressChange, Batch, SigningRequest, User
from bulksign.models.address_changes import AddressChangeStatus
from bulksign.models.status import Status
from bulksign.people import access

logger = logging.getLogger(__name__)

#: The recipient's invitation is on its way to the current address: a decision now would race it.
INVITATION_UNDER_WAY = (Status.GENERATED.value, Status.SENDING.value)


@dataclass(frozen=True)
class ChangeDecision:
    change: AddressChange
    #: The new address's invitation queued now (the caller enqueues it after the commit).
    mail_ids: tuple[int, ...] = ()
    #: Why none was sent now (a resend's reason: ``not_sent``, ``not_started``, ``countersign_digest`` ...); None
    #: when it was, or for a rejection.
    not_sent: str | None = None


def _refusal(session: Session, *, change: AddressChange, batch: Batch, user: User) -> ApprovalError | None:
    if change.requested_by_id == user.id:
        return ApprovalError(N_("You asked for this change: someone else must approve or reject it."), 403)
    if is_approver(session, team_id=batch.team_id, user=user):
        return None
    return ApprovalError(
        N_("Only a manager of the batch's team or an admin can approve or reject an address change."), 403
    )


def _decidable(session: Session, *, batch_id: int, change_id: int, user: User) -> AddressChange:
    try:
        batch = access.batch_for_read(session, batch_id=batch_id, user=user)
    except access.Refused as exc:
        raise ApprovalError(exc.message, exc.status) from None
    change = session.get(AddressChange, change_id)
    if change is None or change.batch_id != batch.id:
        raise ApprovalError(N_("No address change with this id in this batch."), 404)
    refusal = _refusal(session, change=change, batch=batch, user=user)
    if refusal is not None:
        raise refusal
    if change.status != AddressChangeStatus.PENDING:
        raise ApprovalError(N_("This address change is no longer waiting for approval."), 409)
    return change


def _decided(
    session: Session, change: AddressChange, *, to: AddressChangeStatus, user: User, now: datetime, **fields: Any
) -> None:
    if not move_change(session, change.id, to=to, decided_by_id=user.id, decided_at=now, **fields):
        session.rollback()
        raise ApprovalError(N_("This address change is no longer waiting for approval."), 409)


def _details(change: AddressChange, **more: Any) -> dict[str, Any]:
    return {"role": change.role, "old": change.old_email, "new": change.new_email, "change_id": change.id, **more}


def approve_change(session: Session, *, batch_id: int, change_id: int, user: User, now: datetime) -> ChangeDecision:
    """Approve a waiting change: the address changes and the new one gets its link (``ChangeDecision``); the
    caller commits, then enqueues its mails. ``ApprovalError`` 404/403/409 otherwise, and 409 when the request
    can no longer change (signed, cancelled, purged meanwhile: reject it) or its first invitation is being sent."""
    change = _decidable(session, batch_id=batch_id, change_id=change_id, user=user)
    request = session.get_one(SigningRequest, change.request_id)
    if change.role == RECIPIENT_ROLE and request.status in INVITATION_UNDER_WAY:
        raise ApprovalError(
            N_("The invitation to the current address is being sent this moment: approve again once it is out."), 409
        )
    try:
        found = checked_change(
            session, request_id=change.request_id, new_email=change.new_email, user=user, role=change.role
        )
        _decided(session, change, to=AddressChangeStatus.APPROVED, user=user, now=now)
        actor = f"user:{user.id}"
        record(session, request, "address_change.approved", actor=actor, now=now, details=_details(change))
        if found.new != found.old:
            apply_change(session, found, actor=actor, now=now, change_id=change.id)
        # The address being replaced must not keep a live link: the resend kills it and sends the new one.
        resent = resend_with_new_link(
            session,
            request_ids=[change.request_id],
            user=user,
            now=now,
            role=None if change.role == RECIPIENT_ROLE else change.role,
        )
    except BatchActionError as exc:
        session.rollback()
        raise ApprovalError(exc.message, exc.status) from None
    session.refresh(change)
    log(logger, logging.INFO, "address change approved", change_id=change.id, user_id=user.id, sent=resent.resent)
    return ChangeDecision(
        change=change,
        mail_ids=resent.mail_ids,
        not_sent=None if resent.resent else next(iter(resent.skipped), None),
    )


def reject_change(
    session: Session, *, batch_id: int, change_id: int, user: User, reason: str, now: datetime
) -> ChangeDecision:
    """Reject a waiting change with a reason (whoever asked reads it): the old address stays. The caller commits;
    ``ApprovalError`` 404/403/409/422 otherwise."""
    change = _decidable(session, batch_id=batch_id, change_id=change_id, user=user)
    reason = checked_reason(reason, missing=N_("Say why the change is rejected: whoever asked for it reads it."))
    _decided(session, change, to=AddressChangeStatus.REJECTED, user=user, now=now, reason=reason)
    request = session.get_one(SigningRequest, change.request_id)
    details = _details(change, reason=reason)
    record(session, request, "address_change.rejected", actor=f"user:{user.id}", now=now, details=details)
    session.refresh(change)
    log(logger, logging.INFO, "address change rejected", change_id=change.id, user_id=user.id)
    return ChangeDecision(change=change)


@dataclass(frozen=True)
class WaitingChange:
    """A change waiting for approval as the batch page and the request's panel show it."""

    change: AddressChange
    #: The request's person: its name, else its address.
    person: str
    row_number: int | None
    #: Who asked, by name.
    asked_by: str
    #: The user may approve or reject it (an approver who did not ask).
    may_decide: bool


def waiting_changes(
    session: Session, *, batch: Batch, user: User, request_id: int | None = None, limit: int = 200
) -> list[WaitingChange]:
    """The batch's changes waiting for approval (``request_id``: that request's), oldest first, at most ``limit``."""
    query = (
        select(AddressChange, SigningRequest.name, SigningRequest.email, SigningRequest.row_number)
        .join(SigningRequest, SigningRequest.id == AddressChange.request_id)
        .where(AddressChange.batch_id == batch.id, AddressChange.status == AddressChangeStatus.PENDING)
        .order_by(AddressChange.id)
        .limit(limit)
    )
    if request_id is not None:
        query = query.where(AddressChange.request_id == request_id)
    rows = session.execute(query).all()
    if not rows:
        return []
    approver = is_approver(session, team_id=batch.team_id, user=user)
    return [
        WaitingChange(
            change=change,
            person=name or email,
            row_number=row_number,
            asked_by=change.requested_by.shown_name if change.requested_by is not None else "—",
            may_decide=approver and change.requested_by_id != user.id,
        )
        for change, name, email, row_number in rows
    ]


def waiting_for(session: Session, *, request_id: int) -> list[AddressChange]:
    """The request's address changes waiting for approval (one per party at most)."""
    return list(
        session.scalars(
            select(AddressChange)
            .where(AddressChange.request_id == request_id, AddressChange.status == AddressChangeStatus.PENDING)
            .order_by(AddressChange.id)
        )
    )


def changes_page(
    session: Session, *, batch_id: int, status: AddressChangeStatus | None, after: int | None, limit: int
) -> tuple[list[AddressChange], int | None]:
    """A page of the batch's address changes by id (``status``: in that state only) after ``after``, and the id to
    go on after (None on the last page). The caller has checked the batch is the user's to see."""
    query = select(AddressChange).where(AddressChange.batch_id == batch_id).order_by(AddressChange.id)
    if status is not None:
        query = query.where(AddressChange.status == status.value)
    if after is not None:
        query = query.where(AddressChange.id > after)
    items = list(session.scalars(query.limit(limit + 1)))
    return items[:limit], items[limit - 1].id if len(items) > limit else None

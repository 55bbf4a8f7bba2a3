"""Staff corrections after dispatch: resend with a new link (the old one dies at once), change an address.

A resend moves the request back to ``generated`` by compare-and-set, clearing its link in the same
UPDATE, and queues a fresh invitation (its key holds the new link's nonce, so it is a new mail).
The send job then sets ``sent_at`` and a new ``expires_at``, with the extra days if staff gave some.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from email_validator import EmailNotValidError, validate_email
from flask import current_app
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from .batches import CANCELLED, COMPLETED, PARTIALLY_FAILED, PROCESSING, BatchActionError, batch_for_action
from .doc_templates import TemplateError
from .invitations import KIND as INVITATION
from .invitations import queue_invitations
from .logs import log
from .mailer import cancel_queued
from .models import Batch, Event, SigningRequest, User
from .reminders import KIND as REMINDER
from .states import Status, transition

logger = logging.getLogger(__name__)

#: Delivered (or tried) and not final for the recipient: these may get a new link.
RESENDABLE = (Status.SENT.value, Status.OPENED.value, Status.EXPIRED.value, Status.BOUNCED.value)
#: The record is closed: the address is part of it.
EMAIL_FROZEN = (Status.SIGNED.value, Status.DECLINED.value, Status.CANCELLED.value)
MAX_EXTEND_DAYS = 365


@dataclass(frozen=True)
class ResendResult:
    resent: int
    #: reason → how many requests were skipped for it (``signed``, ``declined``, ``cancelled``, ``not_sent``,
    #: ``not_found``, ``deadline_passed``, ``changed_meanwhile``).
    skipped: dict[str, int]
    mail_ids: tuple[int, ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class EmailChange:
    request_id: int
    old_email: str
    new_email: str
    changed: bool


def _skip_reason(status: str, *, batch: Batch, extend_days: int | None, now: datetime) -> str | None:
    if status in EMAIL_FROZEN:
        return status
    if batch.status == CANCELLED:
        return "cancelled"  # staff stopped the whole batch
    if status not in RESENDABLE:
        return "not_sent"
    if extend_days is None and batch.deadline_at is not None and batch.deadline_at <= now:
        return "deadline_passed"  # the new link would be dead on arrival
    return None


def resend_with_new_link(session: Session, *, request_ids: Iterable[int], user: User, now: datetime,
                         extend_days: int | None = None, chunk: int = 500) -> ResendResult:
    """New links and fresh invitations for these requests (sent, opened, expired or bounced). The caller commits, then enqueues ``mail_ids``."""
    if extend_days is not None and not (isinstance(extend_days, int) and 1 <= extend_days <= MAX_EXTEND_DAYS):
        raise BatchActionError(f"Extra days must be a whole number from 1 to {MAX_EXTEND_DAYS}.")
    ids = sorted(set(request_ids))
    app = current_app._get_current_object()
    skipped: dict[str, int] = {}
    mail_ids: list[int] = []
    batches: dict[int, Batch] = {}
    for start in range(0, len(ids), chunk):
        part = ids[start:start + chunk]
        rows = session.execute(select(SigningRequest.id, SigningRequest.status, SigningRequest.batch_id)
                               .where(SigningRequest.id.in_(part))).all()
        if len(rows) < len(part):
            skipped["not_found"] = skipped.get("not_found", 0) + len(part) - len(rows)
        eligible = []
        for row in rows:
            if row.batch_id not in batches:
                batches[row.batch_id] = batch_for_action(session, batch_id=row.batch_id, user=user)
            reason = _skip_reason(row.status, batch=batches[row.batch_id], extend_days=extend_days, now=now)
            if reason:
                skipped[reason] = skipped.get(reason, 0) + 1
            else:
                eligible.append(row.id)
        fields = {"deadline_days": extend_days} if extend_days else {}
        # Clearing the token kills the old link in the same compare-and-set; a fresh reminder series follows.
        won = transition(session, eligible, frm=RESENDABLE, to=Status.GENERATED, now=now, actor=f"user:{user.id}",
                         details={"resend": True, "extend_days": extend_days}, token_hash=None, token_nonce=None,
                         reminder_count=0, last_reminder_at=None, expires_at=None, attempts=0,
                         error_message=None, **fields).won
        if len(won) < len(eligible):
            skipped["changed_meanwhile"] = skipped.get("changed_meanwhile", 0) + len(eligible) - len(won)
        if not won:
            continue
        # Mails of the old link still waiting in the queue must not go out.
        cancel_queued(session, request_ids=list(won), kinds=[INVITATION, REMINDER])
        queued = queue_invitations(session, request_ids=won, now=now, app=app)
        if queued.errors:
            raise TemplateError(next(iter(queued.errors.values())))
        mail_ids += [queued.mail_ids[rid] for rid in won]
    touched = [b.id for b in batches.values() if b.status in (COMPLETED, PARTIALLY_FAILED)]
    if mail_ids and touched:
        session.execute(update(Batch).where(Batch.id.in_(touched)).values(status=PROCESSING, finished_at=None))
    log(logger, logging.INFO, "requests resent with new links", user_id=user.id, resent=len(mail_ids),
        skipped=skipped, extend_days=extend_days)
    return ResendResult(resent=len(mail_ids), skipped=skipped, mail_ids=tuple(mail_ids))


def change_email(session: Session, *, request_id: int, new_email: str, user: User, now: datetime) -> EmailChange:
    """Correct a recipient's address (e.g. after a bounce, before a resend), with an audit event old → new. The caller commits."""
    request = session.get(SigningRequest, request_id)
    if request is None:
        raise BatchActionError("No such request.", 404)
    batch_for_action(session, batch_id=request.batch_id, user=user)
    if request.status in EMAIL_FROZEN:
        raise BatchActionError(f"The request is {request.status}; its address can no longer change.", 409)
    try:
        normalized = validate_email((new_email or "").strip(), check_deliverability=False).normalized
    except EmailNotValidError as exc:
        raise BatchActionError(f"Not a valid email address: {exc}") from None
    old = request.email
    if normalized == old:
        return EmailChange(request_id=request_id, old_email=old, new_email=normalized, changed=False)
    session.execute(update(SigningRequest).where(SigningRequest.id == request_id).values(email=normalized)
                    .execution_options(synchronize_session="fetch"))
    session.add(Event(request_id=request_id, batch_id=request.batch_id, type="email.changed", created_at=now,
                      actor=f"user:{user.id}", details={"old": old, "new": normalized}))
    log(logger, logging.INFO, "recipient email changed", request_id=request_id, user_id=user.id)
    return EmailChange(request_id=request_id, old_email=old, new_email=normalized, changed=True)

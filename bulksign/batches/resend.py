"""Staff corrections after dispatch: resend with a new link (the old one dies at once), change an address.

A resend moves the request back to ``generated`` by compare-and-set, clearing its link in the same
UPDATE, and queues a fresh invitation (its key holds the new link's nonce, so it is a new mail).
The send job then sets ``sent_at`` and a new ``expires_at``. Extra days extend the request's deadline
(from the current one, or from now when it has passed), fixed here so that the mail can say the date.
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

from bulksign.batches.progress import REOPENABLE, BatchActionError, batch_for_action
from bulksign.batches.reminders import KIND as REMINDER
from bulksign.batches.states import move_batches, transition
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.doc_templates.errors import TemplateError
from bulksign.mail.mailer import cancel_queued
from bulksign.models import RECIPIENT_ROLE, Batch, Event, Party, SigningRequest, User
from bulksign.models.status import BatchStatus, Status
from bulksign.signing.invitations import KIND as INVITATION
from bulksign.signing.invitations import extended_deadline, queue_invitations

logger = logging.getLogger(__name__)

#: Delivered (or tried) and not signed: these may get a new link (a declined recipient is invited again).
RESENDABLE = (Status.SENT.value, Status.OPENED.value, Status.EXPIRED.value, Status.BOUNCED.value, Status.DECLINED.value)
#: The record is closed: the address is part of it.
EMAIL_FROZEN = (Status.SIGNED.value, Status.CANCELLED.value)
MAX_EXTEND_DAYS = 365


@dataclass(frozen=True)
class ResendResult:
    resent: int
    #: reason → how many requests were skipped for it (``signed``, ``declined``, ``cancelled``, ``not_sent``,
    #: ``not_found``, ``deadline_passed``, ``changed_meanwhile``, ``purged``, ``several_parties``).
    skipped: dict[str, int]
    mail_ids: tuple[int, ...] = field(default=(), repr=False)
    #: The earliest and latest new deadline given by extra days; None without extra days.
    deadlines: tuple[datetime, datetime] | None = None


@dataclass(frozen=True)
class EmailChange:
    request_id: int
    old_email: str
    new_email: str
    changed: bool


def _skip_reason(
    status: str, *, batch: Batch, extend_days: int | None, now: datetime, purged: bool = False, routed: bool = False
) -> str | None:
    if purged:
        return "purged"  # no address is left to send to (retention or erasure)
    if status in EMAIL_FROZEN:
        return status
    if routed:
        # A new link for the recipient alone would leave the other parties' signatures, declines and links as
        # they were: the request would read as sent again beside an employer's decline.
        return "several_parties"
    if batch.status == BatchStatus.CANCELLED:
        return "cancelled"  # staff stopped the whole batch
    if status not in RESENDABLE:
        return "not_sent"
    if extend_days is None and batch.deadline_at is not None and batch.deadline_at <= now:
        return "deadline_passed"  # the new link would be dead on arrival
    return None


def resend_with_new_link(
    session: Session,
    *,
    request_ids: Iterable[int],
    user: User,
    now: datetime,
    extend_days: int | None = None,
    chunk: int = 500,
) -> ResendResult:
    """New links and fresh invitations for these requests (sent, opened, expired or bounced). The caller commits, then enqueues ``mail_ids``."""
    if extend_days is not None and not (isinstance(extend_days, int) and 1 <= extend_days <= MAX_EXTEND_DAYS):
        raise BatchActionError(N_("Extra days must be a whole number from 1 to %(n)s.", n=MAX_EXTEND_DAYS))
    ids = sorted(set(request_ids))
    app = current_app._get_current_object()
    skipped: dict[str, int] = {}
    mail_ids: list[int] = []
    deadlines: list[datetime] = []
    batches: dict[int, Batch] = {}
    for start in range(0, len(ids), chunk):
        part = ids[start : start + chunk]
        rows = session.execute(
            select(
                SigningRequest.id,
                SigningRequest.status,
                SigningRequest.batch_id,
                SigningRequest.sent_at,
                SigningRequest.expires_at,
                SigningRequest.deadline_days,
                SigningRequest.purged_at,
            ).where(SigningRequest.id.in_(part))
        ).all()
        if len(rows) < len(part):
            skipped["not_found"] = skipped.get("not_found", 0) + len(part) - len(rows)
        routed = set(
            session.scalars(
                select(Party.request_id).where(Party.request_id.in_(part), Party.role != RECIPIENT_ROLE).distinct()
            )
        )
        eligible, by_id = [], {row.id: row for row in rows}
        for row in rows:
            if row.batch_id not in batches:
                batches[row.batch_id] = batch_for_action(session, batch_id=row.batch_id, user=user)
            reason = _skip_reason(
                row.status,
                batch=batches[row.batch_id],
                extend_days=extend_days,
                now=now,
                purged=row.purged_at is not None,
                routed=row.id in routed,
            )
            if reason:
                skipped[reason] = skipped.get(reason, 0) + 1
            else:
                eligible.append(row.id)
        # Clearing the token kills the old link in the same compare-and-set; a fresh reminder series follows.
        won = transition(
            session,
            eligible,
            frm=RESENDABLE,
            to=Status.GENERATED,
            now=now,
            actor=f"user:{user.id}",
            details={"resend": True, "extend_days": extend_days},
            token_hash=None,
            token_nonce=None,
            reminder_count=0,
            last_reminder_at=None,
            expires_at=None,
            attempts=0,
            error_message=None,
            declined_at=None,
            decline_reason=None,
        ).won
        if len(won) < len(eligible):
            skipped["changed_meanwhile"] = skipped.get("changed_meanwhile", 0) + len(eligible) - len(won)
        if not won:
            continue
        kept = _deadlines(by_id, won, batches=batches, extend_days=extend_days, now=now)
        if kept:
            session.execute(update(SigningRequest), kept)
            deadlines += [k["expires_at"] for k in kept if extend_days]
        # Mails of the old link still waiting in the queue must not go out.
        cancel_queued(session, request_ids=list(won), kinds=[INVITATION, REMINDER])
        queued = queue_invitations(session, request_ids=won, now=now, app=app)
        if queued.errors:
            raise TemplateError(next(iter(queued.errors.values())))
        mail_ids += [queued.mail_ids[rid] for rid in won]
    if mail_ids:
        move_batches(
            session,
            batches,
            frm=REOPENABLE,
            to=BatchStatus.PROCESSING,
            finished_at=None,
            settled_at=None,
        )
    log(
        logger,
        logging.INFO,
        "requests resent with new links",
        user_id=user.id,
        resent=len(mail_ids),
        skipped=skipped,
        extend_days=extend_days,
    )
    return ResendResult(
        resent=len(mail_ids),
        skipped=skipped,
        mail_ids=tuple(mail_ids),
        deadlines=(min(deadlines), max(deadlines)) if deadlines else None,
    )


def _deadlines(
    rows: dict, won: Iterable[int], *, batches: dict[int, Batch], extend_days: int | None, now: datetime
) -> list[dict]:
    """Per resent request, the deadline its new link keeps (``update`` by primary key): the extended one with
    extra days; without, an earlier extension still in the future; every other request follows its batch."""
    kept = []
    for rid in won:
        row = rows[rid]
        if extend_days:
            kept.append(
                {
                    "id": rid,
                    "deadline_days": extend_days,
                    "expires_at": extended_deadline(row, batch=batches[row.batch_id], extend_days=extend_days, now=now),
                }
            )
        elif row.deadline_days and row.expires_at is not None and row.expires_at > now:
            kept.append({"id": rid, "expires_at": row.expires_at})
    return kept


def change_email(session: Session, *, request_id: int, new_email: str, user: User, now: datetime) -> EmailChange:
    """Correct a recipient's address (e.g. after a bounce, before a resend), with an audit event old → new. The caller commits."""
    request = session.get(SigningRequest, request_id)
    if request is None:
        raise BatchActionError(N_("No such request."), 404)
    batch_for_action(session, batch_id=request.batch_id, user=user)
    if request.status in EMAIL_FROZEN:
        raise BatchActionError(
            N_("The request is %(status)s; its address can no longer change.", status=request.status), 409
        )
    if request.purged_at is not None:
        raise BatchActionError(N_("The request was deleted under the retention rules; it cannot be sent again."), 409)
    try:
        normalized = validate_email((new_email or "").strip(), check_deliverability=False).normalized
    except EmailNotValidError as exc:
        raise BatchActionError(N_("Not a valid email address: %(reason)s", reason=str(exc))) from None
    old = request.email
    if normalized == old:
        return EmailChange(request_id=request_id, old_email=old, new_email=normalized, changed=False)
    session.execute(
        update(SigningRequest)
        .where(SigningRequest.id == request_id)
        .values(email=normalized)
        .execution_options(synchronize_session="fetch")
    )
    session.add(
        Event(
            request_id=request_id,
            batch_id=request.batch_id,
            type="email.changed",
            created_at=now,
            actor=f"user:{user.id}",
            details={"old": old, "new": normalized},
        )
    )
    log(logger, logging.INFO, "recipient email changed", request_id=request_id, user_id=user.id)
    return EmailChange(request_id=request_id, old_email=old, new_email=normalized, changed=True)

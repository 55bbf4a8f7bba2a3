"""Reminders staff send now, from the batch page or the API: to the selected requests or to everyone not signed
(or not opened), refused too soon after the invitation or the previous reminder unless sent anyway, each mailed
exactly once."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from flask import current_app
from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from bulksign.batches.progress import BatchActionError, batch_for_action
from bulksign.batches.reminders import ReminderMails, recipient_has_signed
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.models import SigningRequest, User
from bulksign.models.status import WAITING_FOR_RECIPIENT, Status

logger = logging.getLogger(__name__)

#: A manual reminder is refused this soon after the invitation or the previous reminder...
MANUAL_COOLDOWN = timedelta(hours=1)
#: ... unless staff send it anyway; even then not twice within this (a double click).
FORCED_COOLDOWN = timedelta(minutes=1)
SELECTORS = ("not_signed", "not_opened")
#: Why a manual reminder was not sent to a request (the views word them for people).
SKIP_REASONS = (
    "signed",
    "declined",
    "invited_recently",
    "reminded_recently",
    "bounced",
    "expired",
    "cancelled",
    "not_sent",
    "not_found",
)
#: Skips that "send anyway" overrides.
COOLDOWN_REASONS = ("invited_recently", "reminded_recently")


@dataclass(frozen=True)
class ManualReminderResult:
    queued: int
    #: reason (a key of ``SKIP_REASONS``) → how many requests were skipped for it.
    skipped: dict[str, int]
    mail_ids: tuple[int, ...] = field(default=(), repr=False)


def _skip_reason(row, *, now: datetime, force: bool) -> str | None:
    """Why a manual reminder cannot go to this request now, or None when it can."""
    if row.recipient_signed:
        return "signed"  # the recipient of a document several sign, waiting for the others
    if row.status in WAITING_FOR_RECIPIENT:
        if row.expires_at is not None and row.expires_at <= now:
            return "expired"
        if force:
            recent = now - FORCED_COOLDOWN
            return "reminded_recently" if row.last_reminder_at and row.last_reminder_at > recent else None
        recent = now - MANUAL_COOLDOWN
        if row.last_reminder_at and row.last_reminder_at > recent:
            return "reminded_recently"
        if row.sent_at and row.sent_at > recent:
            return "invited_recently"
        return None
    if row.status in ("signed", "declined", "bounced", "expired", "cancelled"):
        return row.status
    return "not_sent"


def _selection_pages(
    session: Session, *, batch_id: int, request_ids: Iterable[int] | None, selector: str | None, page_size: int
):
    """Pages of (id, status, sent_at, last_reminder_at, expires_at, recipient_signed) of the chosen requests, and ids
    not found."""
    columns = (
        SigningRequest.id,
        SigningRequest.status,
        SigningRequest.sent_at,
        SigningRequest.last_reminder_at,
        SigningRequest.expires_at,
        recipient_has_signed().label("recipient_signed"),
    )
    if request_ids is not None:
        ids = sorted(set(request_ids))
        for start in range(0, len(ids), page_size):
            chunk = ids[start : start + page_size]
            rows = session.execute(
                select(*columns).where(SigningRequest.batch_id == batch_id, SigningRequest.id.in_(chunk))
            ).all()
            yield rows, len(chunk) - len(rows)
        return
    chosen = (
        SigningRequest.status != Status.SIGNED.value
        if selector == "not_signed"
        else SigningRequest.status.not_in([Status.OPENED.value, Status.SIGNED.value, Status.DECLINED.value])
    )
    after = 0
    while True:
        rows = session.execute(
            select(*columns)
            .where(SigningRequest.batch_id == batch_id, chosen, SigningRequest.id > after)
            .order_by(SigningRequest.id)
            .limit(page_size)
        ).all()
        if not rows:
            return
        after = rows[-1].id
        yield rows, 0


def send_manual_reminders(
    session: Session,
    *,
    batch_id: int,
    user: User,
    now: datetime,
    request_ids: Iterable[int] | None = None,
    selector: str | None = None,
    force: bool = False,
    page_size: int = 1000,
) -> ManualReminderResult:
    """Staff remind chosen requests (or all not signed / not opened) now; each skip is counted by reason.

    ``force`` ("send anyway") skips the hour after the invitation or the last reminder. The caller
    commits, then enqueues ``mail_ids``.
    """
    if (request_ids is None) == (selector is None):
        raise BatchActionError(N_("Choose the recipients to remind, or all who have not signed / not opened."))
    if selector is not None and selector not in SELECTORS:
        raise BatchActionError(
            N_("Unknown selection %(value)r; use one of: %(known)s.", value=selector, known=", ".join(SELECTORS))
        )
    batch = batch_for_action(session, batch_id=batch_id, user=user)
    mails = ReminderMails(session, batch, current_app._get_current_object())
    skipped: dict[str, int] = {}
    mail_ids: list[int] = []
    recent = now - (FORCED_COOLDOWN if force else MANUAL_COOLDOWN)
    cooled = [or_(SigningRequest.last_reminder_at.is_(None), SigningRequest.last_reminder_at <= recent)]
    if not force:
        cooled.append(SigningRequest.sent_at <= recent)
    for rows, missing in _selection_pages(
        session, batch_id=batch_id, request_ids=request_ids, selector=selector, page_size=page_size
    ):
        if missing:
            skipped["not_found"] = skipped.get("not_found", 0) + missing
        eligible = []
        for row in rows:
            reason = _skip_reason(row, now=now, force=force)
            if reason:
                skipped[reason] = skipped.get(reason, 0) + 1
            else:
                eligible.append(row.id)
        if not eligible:
            continue
        # The compare-and-set: a reminder (automatic or manual) that won meanwhile set last_reminder_at.
        won = session.execute(
            update(SigningRequest)
            .where(
                SigningRequest.id.in_(eligible),
                SigningRequest.status.in_(WAITING_FOR_RECIPIENT),
                *cooled,
                or_(SigningRequest.expires_at.is_(None), SigningRequest.expires_at > now),
                ~recipient_has_signed(),
            )
            .values(reminder_count=SigningRequest.reminder_count + 1, last_reminder_at=now)
            .returning(*mails.returning)
            .execution_options(synchronize_session=False)
        ).all()
        if len(won) < len(eligible):
            skipped["reminded_recently"] = skipped.get("reminded_recently", 0) + len(eligible) - len(won)
        mail_ids.extend(mails.queue(won, now=now, user=user))
    log(
        logger,
        logging.INFO,
        "manual reminders queued",
        batch_id=batch_id,
        user_id=user.id,
        queued=len(mail_ids),
        skipped=skipped,
        forced=force,
    )
    return ManualReminderResult(queued=len(mail_ids), skipped=skipped, mail_ids=tuple(mail_ids))

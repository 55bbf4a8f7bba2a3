"""Reminders staff send now, to the selected requests or to everyone not signed (or not opened): refused too soon
after the last mail unless sent anyway, each mailed exactly once."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from flask import current_app
from sqlalchemy import ColumnElement, Row, Select, false, func, or_, select, update
from sqlalchemy.orm import InstrumentedAttribute, Session

from bulksign.batches.progress import BatchActionError, batch_for_action
from bulksign.batches.reminder_mails import ReminderMails
from bulksign.batches.reminders import (
    parties_reminded_per_document,
    recipient_has_signed,
    recipient_not_invited,
)
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.core.slicing import slices
from bulksign.models import RECIPIENT_ROLE, Batch, Party, SigningRequest, User
from bulksign.models.parties import PartyStatus
from bulksign.models.status import WAITING_FOR_RECIPIENT, Status
from bulksign.signing import digests

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
    "not_started",
)
#: Skips that "send anyway" overrides.
COOLDOWN_REASONS = ("invited_recently", "reminded_recently")
#: Request states past reminding, each its own skip reason.
CLOSED = (Status.SIGNED, Status.DECLINED, Status.BOUNCED, Status.EXPIRED, Status.CANCELLED)


@dataclass(frozen=True)
class ManualReminderResult:
    queued: int
    #: reason (a key of ``SKIP_REASONS``) → how many requests were skipped for it.
    skipped: dict[str, int]
    mail_ids: tuple[int, ...] = field(default=(), repr=False)


def _skip_reason(row: Row[Any], *, now: datetime, force: bool) -> str | None:
    """Why a manual reminder cannot go to this request now, or None when it can."""
    if row.recipient_signed:
        return "signed"  # the recipient of a document several sign, waiting for the others
    if row.recipient_waiting and row.status in WAITING_FOR_RECIPIENT:
        return "not_started"  # the recipient signs after others, who have not all signed yet
    if row.status in WAITING_FOR_RECIPIENT:
        return _too_soon(row, now=now, force=force)
    return _closed(row.status)


def _party_skip_reason(row: Row[Any], *, now: datetime, force: bool) -> str | None:
    """Why a manual reminder cannot go to this party (not the recipient) now, or None when it can."""
    if row.status in (PartyStatus.SIGNED, PartyStatus.DECLINED):
        return cast(str, row.status)
    if row.request_status not in WAITING_FOR_RECIPIENT:
        return _closed(row.request_status)
    if row.status == PartyStatus.WAITING:
        return "not_started"  # its step has not started: it has no link to be reminded of
    return _too_soon(row, now=now, force=force)


def _closed(status: str) -> str:
    return status if status in CLOSED else "not_sent"


def _too_soon(row: Row[Any], *, now: datetime, force: bool) -> str | None:
    """The skip of a request or party still waiting: its deadline passed, or invited (``sent_at``) or reminded
    within the cooldown."""
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


@dataclass(frozen=True)
class _Target:
    """Whom a manual reminder goes to: the requests (their recipients) or one other role's parties."""

    #: The rows read for ``skip`` (each with ``id``, ``sent_at``, ``last_reminder_at``, ``expires_at``, and
    #: ``digest``: the row's party is served by its countersigner's digest, at ``address``).
    query: Select[Any]
    #: The request id of a row, to choose the listed requests; the row's own id, to page through the rest.
    request_column: InstrumentedAttribute[int]
    row_id: InstrumentedAttribute[int]
    #: The rows of ``not_signed`` and ``not_opened``.
    selectors: dict[str | None, ColumnElement[bool]]
    skip: Callable[..., str | None]
    #: The table whose counter the compare-and-set advances, and the conditions it re-checks.
    model: type[SigningRequest] | type[Party]
    guard: tuple[ColumnElement[bool], ...]
    queue: Callable[..., list[int]]
    returning: tuple[InstrumentedAttribute[Any], ...]


def _recipients(batch_id: int, mails: ReminderMails, *, now: datetime) -> _Target:
    return _Target(
        query=select(
            SigningRequest.id,
            SigningRequest.status,
            SigningRequest.sent_at,
            SigningRequest.last_reminder_at,
            SigningRequest.expires_at,
            recipient_has_signed().label("recipient_signed"),
            recipient_not_invited().label("recipient_waiting"),
            false().label("digest"),  # a recipient is never served by a countersigner's digest
        ).where(SigningRequest.batch_id == batch_id),
        request_column=SigningRequest.id,
        row_id=SigningRequest.id,
        selectors={
            "not_signed": SigningRequest.status != Status.SIGNED.value,
            "not_opened": SigningRequest.status.not_in(
                [Status.OPENED.value, Status.SIGNED.value, Status.DECLINED.value]
            ),
        },
        skip=_skip_reason,
        model=SigningRequest,
        guard=(
            SigningRequest.status.in_(WAITING_FOR_RECIPIENT),
            or_(SigningRequest.expires_at.is_(None), SigningRequest.expires_at > now),
            ~recipient_has_signed(),
            ~recipient_not_invited(),
        ),
        queue=mails.queue,
        returning=mails.returning,
    )


def _parties(batch_id: int, role: str, mails: ReminderMails, *, now: datetime) -> _Target:
    return _Target(
        query=select(
            Party.id,
            Party.status,
            Party.invited_at.label("sent_at"),
            Party.last_reminder_at,
            SigningRequest.status.label("request_status"),
            SigningRequest.expires_at,
            digests.served_by_digest().label("digest"),
            func.lower(Party.email).label("address"),
        )
        .join(SigningRequest, SigningRequest.id == Party.request_id)
        .where(Party.batch_id == batch_id, Party.role == role),
        request_column=Party.request_id,
        row_id=Party.id,
        selectors={
            "not_signed": Party.status != PartyStatus.SIGNED.value,
            "not_opened": Party.status.in_([PartyStatus.WAITING.value, PartyStatus.INVITED.value]),
        },
        skip=_party_skip_reason,
        model=Party,
        guard=(*parties_reminded_per_document(batch_id, now=now), Party.role == role),
        queue=mails.queue_parties,
        returning=(Party.id,),
    )


def _selection_pages(
    session: Session, target: _Target, *, request_ids: Iterable[int] | None, selector: str | None, page_size: int
) -> Iterator[tuple[Sequence[Row[Any]], int]]:
    """Pages of ``target``'s rows of the chosen requests (or of ``selector``'s), and how many ids were not found."""
    if request_ids is not None:
        for chunk in slices(sorted(set(request_ids)), page_size):
            rows = session.execute(target.query.where(target.request_column.in_(chunk))).all()
            yield rows, len(chunk) - len(rows)
        return
    after = 0
    while True:
        rows = session.execute(
            target.query.where(target.selectors[selector], target.row_id > after)
            .order_by(target.row_id)
            .limit(page_size)
        ).all()
        if not rows:
            return
        after = rows[-1].id
        yield rows, 0


def other_role(batch: Batch, role: str | None) -> str | None:
    """The role a staff action names, checked against the batch's: None for the recipient (the request's own
    reminders and link, as for a single-signer batch); BatchActionError for a role the batch does not have."""
    if role is None or role == RECIPIENT_ROLE:
        return None
    roles = batch.template_version.roles or [RECIPIENT_ROLE]
    if role not in roles:
        raise BatchActionError(
            N_("This batch has no party %(role)s; its parties: %(roles)s.", role=role[:40], roles=", ".join(roles)),
            422,
        )
    return role


def send_manual_reminders(
    session: Session,
    *,
    batch_id: int,
    user: User,
    now: datetime,
    request_ids: Iterable[int] | None = None,
    selector: str | None = None,
    force: bool = False,
    role: str | None = None,
    page_size: int = 1000,
) -> ManualReminderResult:
    """Staff remind chosen requests (or all not signed / not opened) now; each skip is counted by reason. ``role``:
    that party of each request instead (its digest when the countersigner's digest serves it); ``force``: send
    anyway within the hour. The caller commits, then enqueues ``mail_ids``."""
    if (request_ids is None) == (selector is None):
        raise BatchActionError(N_("Choose the recipients to remind, or all who have not signed / not opened."))
    if selector is not None and selector not in SELECTORS:
        raise BatchActionError(
            N_("Unknown selection %(value)r; use one of: %(known)s.", value=selector, known=", ".join(SELECTORS))
        )
    batch = batch_for_action(session, batch_id=batch_id, user=user)
    role = other_role(batch, role)
    mails = ReminderMails(session, batch, current_app._get_current_object())  # type: ignore[attr-defined]
    target = _recipients(batch_id, mails, now=now) if role is None else _parties(batch_id, role, mails, now=now)
    model = target.model
    skipped: dict[str, int] = {}
    mail_ids: list[int] = []
    #: Address → chosen rows whose party its digest serves.
    by_digest: dict[str, int] = {}
    recent = now - (FORCED_COOLDOWN if force else MANUAL_COOLDOWN)
    cooled = [or_(model.last_reminder_at.is_(None), model.last_reminder_at <= recent)]
    if not force:
        cooled.append((SigningRequest.sent_at if role is None else Party.invited_at) <= recent)
    for rows, missing in _selection_pages(
        session, target, request_ids=request_ids, selector=selector, page_size=page_size
    ):
        if missing:
            skipped["not_found"] = skipped.get("not_found", 0) + missing
        eligible = []
        for row in rows:
            reason = target.skip(row, now=now, force=force)
            if reason:
                skipped[reason] = skipped.get(reason, 0) + 1
            elif row.digest:
                by_digest[row.address] = by_digest.get(row.address, 0) + 1
            else:
                eligible.append(row.id)
        if not eligible:
            continue
        # The compare-and-set: a reminder (automatic or manual) that won meanwhile set last_reminder_at.
        won = session.execute(
            update(model)
            .where(model.id.in_(eligible), *target.guard, *cooled)
            .values(reminder_count=model.reminder_count + 1, last_reminder_at=now)
            .returning(*target.returning)
            .execution_options(synchronize_session=False)
        ).all()
        if len(won) < len(eligible):
            skipped["reminded_recently"] = skipped.get("reminded_recently", 0) + len(eligible) - len(won)
        mail_ids.extend(target.queue(won, now=now, user=user))
    if by_digest:
        sent = digests.remind_now(session, batch_id=batch_id, emails=by_digest, now=now, not_since=recent)
        mail_ids.extend(sent.mail_ids)
        if late := sum(by_digest[address] for address in sent.recent):
            skipped["reminded_recently"] = skipped.get("reminded_recently", 0) + late
    log(
        logger,
        logging.INFO,
        "manual reminders queued",
        batch_id=batch_id,
        user_id=user.id,
        role=role or RECIPIENT_ROLE,
        queued=len(mail_ids),
        skipped=skipped,
        forced=force,
    )
    return ManualReminderResult(queued=len(mail_ids), skipped=skipped, mail_ids=tuple(mail_ids))

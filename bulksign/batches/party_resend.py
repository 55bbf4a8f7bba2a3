"""New links for parties: the ``role`` party of documents several sign (``resend_to_party``), and the recipient of a
request another party's returned invitation keeps ``bounced`` (``resend_held``); what a resend returns."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flask import Flask, current_app
from sqlalchemy import select, update
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session

from bulksign.batches.address_changes import EMAIL_FROZEN, waiting_roles
from bulksign.batches.bounces import ReturnedInvitation, bounce_message, standing_bounces
from bulksign.batches.manual_reminders import other_role
from bulksign.batches.progress import REOPENABLE, batch_for_action, refresh_batch_statuses
from bulksign.batches.reminder_mails import KIND as REMINDER
from bulksign.batches.states import move_batches, transition
from bulksign.core.logs import log
from bulksign.mail.mailer import cancel_queued
from bulksign.models import RECIPIENT_ROLE, Batch, Party, SigningRequest, User
from bulksign.models.parties import PartyStatus
from bulksign.models.status import BatchStatus, Status
from bulksign.signing.digests import served_by_digest
from bulksign.signing.invitations import KIND as INVITATION
from bulksign.signing.invitations import deadline_for, extended_deadline
from bulksign.signing.parties import move_parties
from bulksign.signing.routing import invite_parties

logger = logging.getLogger(__name__)

#: Delivered (or tried) and not signed: these may get a new link (a declined recipient is invited again).
RESENDABLE = (Status.SENT.value, Status.OPENED.value, Status.EXPIRED.value, Status.BOUNCED.value, Status.DECLINED.value)
#: A party (of a document several sign) whose step is open and who has not acted: it may get a new link.
RESENDABLE_PARTY = (PartyStatus.INVITED.value, PartyStatus.OPENED.value)
#: The request states in which another party's step can be open.
PARTY_STEP_OPEN = (Status.SENT.value, Status.OPENED.value)


@dataclass(frozen=True)
class ResendResult:
    resent: int
    #: reason → how many requests were skipped for it (``signed``, ``declined``, ``cancelled``, ``not_sent``,
    #: ``not_found``, ``deadline_passed``, ``changed_meanwhile``, ``purged``, ``several_parties``,
    #: ``countersign_digest``, ``party_bounced``: another party's invitation bounced the request,
    #: ``address_change_pending``: a change of the address waits for approval, whose approval sends the new link).
    skipped: dict[str, int]
    mail_ids: tuple[int, ...] = field(default=(), repr=False)
    #: The earliest and latest new deadline given by extra days; None without extra days.
    deadlines: tuple[datetime, datetime] | None = None
    #: Of those resent, the requests that stay ``bounced``: another party's returned invitation still stands.
    still_bounced: int = 0


@dataclass(frozen=True)
class Held:
    #: The requests whose recipient was resent (each stays bounced).
    requests: tuple[int, ...]
    mail_ids: list[int]
    #: The new deadlines extra days gave.
    deadlines: list[datetime]


def resend_held(
    session: Session,
    rows: list[Row[Any]],
    *,
    standing: dict[int, list[ReturnedInvitation]],
    batches: dict[int, Batch],
    extend_days: int | None,
    user: User,
    now: datetime,
    app: Flask,
) -> Held:
    """New links for the recipients of bounced requests whose returned invitation stands beside another party's:
    resent as a party is (``invite_parties``), the request staying ``bounced``, its error naming only the parties
    still bounced, its deadline as the recipient's resend gives it."""
    ids = [row.id for row in rows]
    parties = list(
        session.scalars(select(Party).where(Party.request_id.in_(ids), Party.role == RECIPIENT_ROLE).order_by(Party.id))
    )
    won = move_parties(
        session,
        [p.id for p in parties],
        frm=RESENDABLE_PARTY,
        to=PartyStatus.WAITING,
        now=now,
        actor=f"user:{user.id}",
        details={"resend": True},
    ).won
    resent = [p for p in parties if p.id in won]
    kept = {
        k["id"]: k
        for k in kept_deadlines(
            {row.id: row for row in rows},
            [p.request_id for p in resent],
            batches=batches,
            extend_days=extend_days,
            now=now,
        )
    }
    for party in resent:
        session.refresh(party)
        request = party.request
        fresh = kept.get(request.id)
        if fresh:
            request.deadline_days = fresh.get("deadline_days", request.deadline_days)
        request.expires_at = fresh["expires_at"] if fresh else deadline_for(batches[request.batch_id], sent_at=now)
        request.reminder_count, request.last_reminder_at = 0, None
        request.error_message = still_bounced_error(standing[request.id], resent=RECIPIENT_ROLE)
    cancel_queued(session, request_ids=[p.request_id for p in resent], kinds=[INVITATION, REMINDER])
    mail_ids = invite_parties(session, resent, now=now, app=app)
    return Held(
        requests=tuple(p.request_id for p in resent),
        mail_ids=mail_ids,
        deadlines=[k["expires_at"] for k in kept.values() if extend_days],
    )


def still_bounced_error(bounces: list[ReturnedInvitation], *, resent: str) -> str:
    """The error of a request that stays bounced after ``resent``'s resend: the parties whose bounce still stands."""
    return bounce_message(returned=[b for b in bounces if b.role != resent])


def _party_skip_reason(
    row: Row[Any], party: Party | None, *, by_digest: bool, bounced: bool, now: datetime
) -> str | None:
    """Why ``party`` of the request ``row`` cannot get a new link now: its step is not open, it signed or declined,
    the request was purged, or its countersigner's digest serves it (``by_digest``); ``bounced``: its own returned
    invitation keeps the request bounced."""
    if party is None:
        return "not_found"  # the request has no such party
    if row.purged_at is not None:
        return "purged"
    if party.status in (PartyStatus.SIGNED, PartyStatus.DECLINED):
        return party.status
    own_bounce = row.status == Status.BOUNCED and bounced
    if row.status not in PARTY_STEP_OPEN and not own_bounce:
        return row.status if row.status in (*EMAIL_FROZEN, *RESENDABLE) else "not_sent"
    if own_bounce and row.expires_at is not None and row.expires_at <= now:
        return "expired"  # the request's deadline passed meanwhile: the new link would be dead on arrival
    if party.status == PartyStatus.WAITING:
        return "not_started"  # its step has not started: its invitation goes out then
    if by_digest:
        return "countersign_digest"
    return None


def _reopen_bounced(session: Session, parties: list[Party], *, user: User, now: datetime) -> set[int]:
    """Move the requests of ``parties`` (each bounced by that party's returned invitation alone) back to ``opened``
    (their recipient opened or signed) or ``sent`` by compare-and-set, and settle their batches again. The ids
    reopened; the caller commits."""
    if not parties:
        return set()
    ids = [p.request_id for p in parties]
    recipients: dict[int, str] = {
        request_id: status
        for request_id, status in session.execute(
            select(Party.request_id, Party.status).where(Party.request_id.in_(ids), Party.role == RECIPIENT_ROLE)
        )
    }
    opened = (PartyStatus.OPENED.value, PartyStatus.SIGNED.value)
    reopened: set[int] = set()
    for target in (Status.SENT, Status.OPENED):
        group = [i for i in ids if (recipients.get(i) in opened) == (target == Status.OPENED)]
        reopened.update(
            transition(
                session,
                group,
                frm=Status.BOUNCED,
                to=target,
                now=now,
                actor=f"user:{user.id}",
                details={"resend": True, "role": parties[0].role},
                error_message=None,
            ).won
        )
    if reopened:
        batch_ids = set(session.scalars(select(SigningRequest.batch_id).where(SigningRequest.id.in_(sorted(reopened)))))
        # Like a recipient's resend: the batch reopens, then settles where its requests now stand.
        move_batches(session, batch_ids, frm=REOPENABLE, to=BatchStatus.PROCESSING, finished_at=None, settled_at=None)
        refresh_batch_statuses(session, now=now, batch_ids=batch_ids)
    return reopened


def resend_to_party(
    session: Session, *, request_ids: Iterable[int], role: str, user: User, now: datetime
) -> ResendResult:
    """A new link and invitation for the ``role`` party of each request while its step is open: back to waiting by
    compare-and-set (its old link dies), then invited again. A request this party's returned invitation bounced
    reopens first, unless another's stands too. The caller commits, then enqueues ``mail_ids``."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    ids = sorted(set(request_ids))
    rows = {
        row.id: row
        for row in session.execute(
            select(
                SigningRequest.id,
                SigningRequest.status,
                SigningRequest.batch_id,
                SigningRequest.purged_at,
                SigningRequest.expires_at,
            ).where(SigningRequest.id.in_(ids))
        )
    }
    parties = {
        party.request_id: party
        for party in session.scalars(select(Party).where(Party.request_id.in_(ids), Party.role == role))
    }
    by_digest = set(
        session.scalars(select(Party.id).where(Party.request_id.in_(ids), Party.role == role, served_by_digest()))
    )
    standing = standing_bounces(
        session, request_ids=[i for i, row in rows.items() if row.status == Status.BOUNCED], lock=True
    )
    skipped: dict[str, int] = {"not_found": len(ids) - len(rows)} if len(rows) < len(ids) else {}
    changing = waiting_roles(session, request_ids=list(rows))
    chosen: list[Party] = []
    checked: set[int] = set()
    for request_id, row in rows.items():
        if row.batch_id not in checked:
            other_role(batch_for_action(session, batch_id=row.batch_id, user=user), role)
            checked.add(row.batch_id)
        party = parties.get(request_id)
        reason = _party_skip_reason(
            row,
            party,
            by_digest=party is not None and party.id in by_digest,
            bounced=role in {b.role for b in standing.get(request_id, ())},
            now=now,
        )
        if reason is None and (request_id, role) in changing:
            reason = "address_change_pending"
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
        else:
            chosen.append(parties[request_id])
    bounced = [p for p in chosen if rows[p.request_id].status == Status.BOUNCED]
    # Another party's returned invitation still stands beside this one's: the request stays bounced.
    held = {p.request_id for p in bounced if any(b.role != role for b in standing[p.request_id])}
    reopened = _reopen_bounced(session, [p for p in bounced if p.request_id not in held], user=user, now=now)
    lost = {p.request_id for p in bounced} - reopened - held
    chosen = [p for p in chosen if p.request_id not in lost]
    won = move_parties(
        session,
        [p.id for p in chosen],
        frm=RESENDABLE_PARTY,
        to=PartyStatus.WAITING,
        now=now,
        actor=f"user:{user.id}",
        details={"resend": True},
        token_hash=None,
        token_nonce=None,
        reminder_count=0,
        last_reminder_at=None,
    ).won
    missed = len(lost) + len(chosen) - len(won)
    if missed:
        skipped["changed_meanwhile"] = skipped.get("changed_meanwhile", 0) + missed
    resent = [p for p in chosen if p.id in won]
    still_bounced = sorted({p.request_id for p in resent} & held)
    if still_bounced:
        # Their rows are locked in ``bounced`` (``standing_bounces``): the error names who is left.
        session.execute(
            update(SigningRequest),
            [{"id": i, "error_message": still_bounced_error(standing[i], resent=role)} for i in still_bounced],
        )
    for party in resent:
        session.refresh(party)
    mail_ids = invite_parties(session, resent, now=now, app=app)
    log(
        logger,
        logging.INFO,
        "parties resent with new links",
        user_id=user.id,
        role=role,
        resent=len(mail_ids),
        reopened=len(reopened),
        still_bounced=len(still_bounced),
    )
    return ResendResult(
        resent=len(mail_ids), skipped=skipped, mail_ids=tuple(mail_ids), still_bounced=len(still_bounced)
    )


def kept_deadlines(
    rows: Mapping[int, Row[Any]],
    won: Iterable[int],
    *,
    batches: dict[int, Batch],
    extend_days: int | None,
    now: datetime,
) -> list[dict[str, Any]]:
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

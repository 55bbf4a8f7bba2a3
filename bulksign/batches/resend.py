"""Staff corrections after dispatch: resend with a new link (the old one dies at once), change an address.

A resend moves the request back to ``generated`` by compare-and-set, clearing its link in the same
UPDATE, and queues a fresh invitation (its key holds the new link's nonce, so it is a new mail).
The send job then sets ``sent_at`` and a new ``expires_at``. Extra days extend the request's deadline
(from the current one, or from now when it has passed), fixed here so that the mail can say the date.

A request bounced by the returned invitations of several parties (``bounces.standing_bounces``) stays ``bounced``
while any of them stands: each party resent gets its new link and invitation, the request's error then naming only
the parties still bounced; the last one's resend reopens it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from email_validator import EmailNotValidError, validate_email
from flask import Flask, current_app
from sqlalchemy import exists, select, update
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session, aliased

from bulksign.batches.bounces import ReturnedInvitation, bounce_message, standing_bounces
from bulksign.batches.manual_reminders import other_role
from bulksign.batches.progress import REOPENABLE, BatchActionError, batch_for_action, refresh_batch_statuses
from bulksign.batches.reminders import KIND as REMINDER
from bulksign.batches.states import move_batches, transition
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.doc_templates.errors import TemplateError
from bulksign.mail.mailer import cancel_queued
from bulksign.models import RECIPIENT_ROLE, Batch, Event, Party, SigningRequest, User
from bulksign.models.parties import PartyStatus
from bulksign.models.status import BatchStatus, Status
from bulksign.signing.digests import served_by_digest
from bulksign.signing.invitations import KIND as INVITATION
from bulksign.signing.invitations import deadline_for, extended_deadline, queue_invitations
from bulksign.signing.parties import move_parties
from bulksign.signing.routing import invite_parties

logger = logging.getLogger(__name__)

#: Delivered (or tried) and not signed: these may get a new link (a declined recipient is invited again).
RESENDABLE = (Status.SENT.value, Status.OPENED.value, Status.EXPIRED.value, Status.BOUNCED.value, Status.DECLINED.value)
#: A party (of a document several sign) whose step is open and who has not acted: it may get a new link.
RESENDABLE_PARTY = (PartyStatus.INVITED.value, PartyStatus.OPENED.value)
#: The request states in which another party's step can be open.
PARTY_STEP_OPEN = (Status.SENT.value, Status.OPENED.value)
#: The record is closed: the address is part of it.
EMAIL_FROZEN = (Status.SIGNED.value, Status.CANCELLED.value)
MAX_EXTEND_DAYS = 365


@dataclass(frozen=True)
class ResendResult:
    resent: int
    #: reason → how many requests were skipped for it (``signed``, ``declined``, ``cancelled``, ``not_sent``,
    #: ``not_found``, ``deadline_passed``, ``changed_meanwhile``, ``purged``, ``several_parties``,
    #: ``countersign_digest``, ``party_bounced``: another party's invitation bounced the request).
    skipped: dict[str, int]
    mail_ids: tuple[int, ...] = field(default=(), repr=False)
    #: The earliest and latest new deadline given by extra days; None without extra days.
    deadlines: tuple[datetime, datetime] | None = None
    #: Of those resent, the requests that stay ``bounced``: another party's returned invitation still stands.
    still_bounced: int = 0


@dataclass(frozen=True)
class EmailChange:
    request_id: int
    old_email: str
    new_email: str
    changed: bool
    role: str = RECIPIENT_ROLE


def _skip_reason(
    status: str,
    *,
    batch: Batch,
    extend_days: int | None,
    now: datetime,
    purged: bool = False,
    recipient: str | None = None,
) -> str | None:
    """Why the recipient of a request cannot get a new link now; ``recipient``: its party's state, when others sign
    the request too."""
    if purged:
        return "purged"  # no address is left to send to (retention or erasure)
    if status in EMAIL_FROZEN:
        return status
    if recipient is not None and (status == Status.DECLINED or recipient not in RESENDABLE_PARTY):
        if recipient == PartyStatus.SIGNED and status != Status.DECLINED:
            return "signed"  # the recipient signed; the others sign on their own links
        if recipient == PartyStatus.WAITING and status in PARTY_STEP_OPEN:
            return "not_started"  # the recipient signs after others: its link goes out when its step starts
        # A new link for the recipient alone would leave the other parties' declines as they were: the request
        # would read as sent again beside an employer's decline.
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
    role: str | None = None,
    chunk: int = 500,
) -> ResendResult:
    """New links and fresh invitations for these requests (sent, opened, expired or bounced). ``role``: for that
    party of each request instead of its recipient (``resend_to_party``). The caller commits, then enqueues
    ``mail_ids``."""
    if extend_days is not None and not (isinstance(extend_days, int) and 1 <= extend_days <= MAX_EXTEND_DAYS):
        raise BatchActionError(N_("Extra days must be a whole number from 1 to %(n)s.", n=MAX_EXTEND_DAYS))
    if role is not None and role != RECIPIENT_ROLE:
        if extend_days is not None:
            raise BatchActionError(N_("Extra days move the request's deadline: resend to the recipient for them."), 422)
        return resend_to_party(session, request_ids=request_ids, role=role, user=user, now=now)
    ids = sorted(set(request_ids))
    app = current_app._get_current_object()
    skipped: dict[str, int] = {}
    mail_ids: list[int] = []
    deadlines: list[datetime] = []
    batches: dict[int, Batch] = {}
    still_bounced = 0
    reopens = False
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
        # The recipient's party of each request others sign too (a single-signer request's follows the request).
        other = aliased(Party)
        others = exists().where(other.request_id == Party.request_id, other.role != RECIPIENT_ROLE)
        routed = dict(
            session.execute(
                select(Party.request_id, Party.status)
                .join(SigningRequest, SigningRequest.id == Party.request_id)
                .where(Party.request_id.in_(part), Party.role == RECIPIENT_ROLE, others)
            ).all()
        )
        eligible, held, by_id = [], [], {row.id: row for row in rows}
        # Another party's returned invitation is mended by a resend to that party: a new link for the recipient
        # would take the request out of ``bounced`` with that party's address still wrong. The recipient's own,
        # beside another's, gets its new link as a party's, the request staying bounced (``_resend_held``).
        standing = standing_bounces(
            session, request_ids=[r.id for r in rows if r.id in routed and r.status == Status.BOUNCED], lock=True
        )
        for row in rows:
            if row.batch_id not in batches:
                batches[row.batch_id] = batch_for_action(session, batch_id=row.batch_id, user=user)
            bounced = {b.role for b in standing.get(row.id, ())}
            reason = (
                "party_bounced"
                if bounced and RECIPIENT_ROLE not in bounced
                else _skip_reason(
                    row.status,
                    batch=batches[row.batch_id],
                    extend_days=extend_days,
                    now=now,
                    purged=row.purged_at is not None,
                    recipient=routed.get(row.id),
                )
            )
            if reason:
                skipped[reason] = skipped.get(reason, 0) + 1
            elif bounced - {RECIPIENT_ROLE}:
                held.append(row.id)
            else:
                eligible.append(row.id)
        if held:
            kept_bounced = _resend_held(
                session,
                [by_id[i] for i in held],
                standing=standing,
                batches=batches,
                extend_days=extend_days,
                user=user,
                now=now,
                app=app,
            )
            if len(kept_bounced.requests) < len(held):
                missed = len(held) - len(kept_bounced.requests)
                skipped["changed_meanwhile"] = skipped.get("changed_meanwhile", 0) + missed
            still_bounced += len(kept_bounced.requests)
            mail_ids += kept_bounced.mail_ids
            deadlines += kept_bounced.deadlines
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
        reopens = True
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
    # A request resent while another party's bounce stands stays bounced: its batch stays where it was.
    if reopens:
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
        still_bounced=still_bounced,
    )
    return ResendResult(
        resent=len(mail_ids),
        skipped=skipped,
        mail_ids=tuple(mail_ids),
        deadlines=(min(deadlines), max(deadlines)) if deadlines else None,
        still_bounced=still_bounced,
    )


@dataclass(frozen=True)
class _Held:
    #: The requests whose recipient was resent (each stays bounced).
    requests: tuple[int, ...]
    mail_ids: list[int]
    #: The new deadlines extra days gave.
    deadlines: list[datetime]


def _resend_held(
    session: Session,
    rows: list[Row],
    *,
    standing: dict[int, list[ReturnedInvitation]],
    batches: dict[int, Batch],
    extend_days: int | None,
    user: User,
    now: datetime,
    app: Flask,
) -> _Held:
    """New links for the recipients of these bounced requests, each of whose returned invitation stands beside
    another party's: resent as a party is (withdrawn to waiting by compare-and-set, then ``invite_parties``: the
    request's own new link, the old one dead, a fresh reminder series), the request staying ``bounced`` (rows locked
    by ``standing_bounces``), its error naming only the parties still bounced, its deadline as the recipient's
    resend gives it (extra days, an earlier extension, else the batch's from now)."""
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
        for k in _deadlines(
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
        request.error_message = _still_bounced(standing[request.id], resent=RECIPIENT_ROLE)
    cancel_queued(session, request_ids=[p.request_id for p in resent], kinds=[INVITATION, REMINDER])
    mail_ids = invite_parties(session, resent, now=now, app=app)
    return _Held(
        requests=tuple(p.request_id for p in resent),
        mail_ids=mail_ids,
        deadlines=[k["expires_at"] for k in kept.values() if extend_days],
    )


def _still_bounced(bounces: list[ReturnedInvitation], *, resent: str) -> str:
    """The error of a request that stays bounced after ``resent``'s resend: the parties whose bounce still stands."""
    return bounce_message(returned=[b for b in bounces if b.role != resent])


def _party_skip_reason(row, party: Party | None, *, by_digest: bool, bounced: bool, now: datetime) -> str | None:
    """Why ``party`` of the request ``row`` cannot get a new link now: only while its step is open and it has not
    signed or declined (a declined one declined the request: it is closed), or when its own returned invitation
    keeps the request bounced (``bounced``: it stands), and never when its countersigner's digest serves it
    (``by_digest``): its one link is for all its documents, and a remind sends it again."""
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
    """Move the bounced requests of ``parties`` (each bounced by that party's returned invitation alone) back to where
    their routing stands: ``opened`` when their recipient has opened or signed (the request's own open), else
    ``sent``; by compare-and-set, the bounce's error cleared. Their batches settle again (a batch closed by the
    bounce awaits signatures once more). The ids of the requests reopened; the caller commits."""
    if not parties:
        return set()
    ids = [p.request_id for p in parties]
    recipients = dict(
        session.execute(
            select(Party.request_id, Party.status).where(Party.request_id.in_(ids), Party.role == RECIPIENT_ROLE)
        ).all()
    )
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
    """A new link and invitation for the ``role`` party (not the recipient) of each request, while its step is
    open: the party goes back to waiting by compare-and-set, its old link dies with its token in the same UPDATE,
    and it is invited again (``routing.invite_parties``: a new link, a mail keyed by it, a fresh reminder series
    from the new invitation). A party the countersigner's digest serves is skipped (``countersign_digest``). The
    request's state is not touched, but for a request this party's returned invitation bounced: it goes back to
    where its routing stands first (``_reopen_bounced``; the other parties' links and signatures stay), unless
    another party's returned invitation stands too: it stays ``bounced``, its error naming the parties still
    bounced. The caller commits, then enqueues ``mail_ids``."""
    app = current_app._get_current_object()
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
            [{"id": i, "error_message": _still_bounced(standing[i], resent=role)} for i in still_bounced],
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


def change_email(
    session: Session, *, request_id: int, new_email: str, user: User, now: datetime, role: str = RECIPIENT_ROLE
) -> EmailChange:
    """Correct a party's address (e.g. after a bounce, before a resend), with an ``email.changed`` event naming the
    role, old → new: the recipient's is the request's own; another ``role``'s is its party's, refused once that
    party signed or declined. A party served by its countersigner's digest leaves it (and joins another address's,
    when the new one has a digest in the batch): the digest finds its documents by their current addresses. The
    link stays until a resend gives the new address one. The caller commits."""
    request = session.get(SigningRequest, request_id)
    if request is None:
        raise BatchActionError(N_("No such request."), 404)
    batch_for_action(session, batch_id=request.batch_id, user=user)
    # The recipient's party too: on a document several sign, a recipient who signed keeps the address it signed
    # with while the others sign (the request is still open).
    party = session.scalar(select(Party).where(Party.request_id == request_id, Party.role == role))
    if party is None and role != RECIPIENT_ROLE:
        raise BatchActionError(N_("This request has no %(role)s party.", role=str(role)[:40]), 404)
    if request.status in EMAIL_FROZEN:
        raise BatchActionError(
            N_("The request is %(status)s; its address can no longer change.", status=request.status), 409
        )
    if request.purged_at is not None:
        raise BatchActionError(N_("The request was deleted under the retention rules; it cannot be sent again."), 409)
    if party is not None and party.status == PartyStatus.SIGNED:
        raise BatchActionError(N_("The %(role)s has signed; their address is part of the record.", role=role), 409)
    # A recipient who declined alone may be invited again at a corrected address (a resend); another party's
    # decline closed the request.
    if party is not None and role != RECIPIENT_ROLE and party.status == PartyStatus.DECLINED:
        raise BatchActionError(N_("The %(role)s declined; their address is part of the record.", role=role), 409)
    try:
        normalized = validate_email((new_email or "").strip(), check_deliverability=False).normalized
    except EmailNotValidError as exc:
        raise BatchActionError(N_("Not a valid email address: %(reason)s", reason=str(exc))) from None
    old = request.email if role == RECIPIENT_ROLE else party.email
    if normalized == old:
        return EmailChange(request_id=request_id, old_email=old, new_email=normalized, changed=False, role=role)
    if role == RECIPIENT_ROLE:
        session.execute(
            update(SigningRequest)
            .where(SigningRequest.id == request_id)
            .values(email=normalized)
            .execution_options(synchronize_session="fetch")
        )
    else:
        # Guarded like a move: a party that signed meanwhile keeps the address it signed with.
        changed = session.execute(
            update(Party)
            .where(Party.id == party.id, Party.status.not_in([PartyStatus.SIGNED.value, PartyStatus.DECLINED.value]))
            .values(email=normalized)
            .execution_options(synchronize_session="fetch")
        ).rowcount
        if not changed:
            raise BatchActionError(
                N_("The %(role)s acted meanwhile; their address is part of the record.", role=role), 409
            )
    session.add(
        Event(
            request_id=request_id,
            batch_id=request.batch_id,
            type="email.changed",
            created_at=now,
            actor=f"user:{user.id}",
            details={"role": role, "old": old, "new": normalized},
        )
    )
    log(logger, logging.INFO, "party email changed", request_id=request_id, role=role, user_id=user.id)
    return EmailChange(request_id=request_id, old_email=old, new_email=normalized, changed=True, role=role)

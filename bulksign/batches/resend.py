"""Resend with a new link: the request goes back to ``generated`` by compare-and-set, its old link dead in the same
UPDATE, and a fresh invitation is queued; extra days extend its deadline. Parties' resends: ``party_resend``."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flask import Flask, current_app
from sqlalchemy import exists, select, update
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session, aliased

from bulksign.batches.address_changes import EMAIL_FROZEN, waiting_roles
from bulksign.batches.bounces import ReturnedInvitation, standing_bounces
from bulksign.batches.party_resend import (
    PARTY_STEP_OPEN,
    RESENDABLE,
    RESENDABLE_PARTY,
    ResendResult,
    kept_deadlines,
    resend_held,
    resend_to_party,
)
from bulksign.batches.progress import REOPENABLE, BatchActionError, batch_for_action
from bulksign.batches.reminder_mails import KIND as REMINDER
from bulksign.batches.states import move_batches, transition
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.core.slicing import slices
from bulksign.doc_templates.errors import TemplateError
from bulksign.mail.mailer import cancel_queued
from bulksign.models import RECIPIENT_ROLE, Batch, Party, SigningRequest, User
from bulksign.models.parties import PartyStatus
from bulksign.models.status import BatchStatus, Status
from bulksign.signing.invitations import KIND as INVITATION
from bulksign.signing.invitations import queue_invitations

logger = logging.getLogger(__name__)

MAX_EXTEND_DAYS = 365


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
    run = _Run(
        session=session,
        user=user,
        now=now,
        extend_days=extend_days,
        app=current_app._get_current_object(),  # type: ignore[attr-defined]
    )
    for part in slices(sorted(set(request_ids)), chunk):
        rows = _rows(session, part)
        run.skip("not_found", len(part) - len(rows))
        eligible, held, standing = _sort_out(run, rows)
        if held:
            _resend_beside_bounces(run, [row for row in rows if row.id in held], standing)
        won = _move_back(run, eligible)
        if won:
            _invite_again(run, rows, won)
    # A request resent while another party's bounce stands stays bounced: its batch stays where it was.
    if run.reopens:
        move_batches(session, run.batches, frm=REOPENABLE, to=BatchStatus.PROCESSING, finished_at=None, settled_at=None)
    log(
        logger,
        logging.INFO,
        "requests resent with new links",
        user_id=user.id,
        resent=len(run.mail_ids),
        skipped=run.skipped,
        extend_days=extend_days,
        still_bounced=run.still_bounced,
    )
    return ResendResult(
        resent=len(run.mail_ids),
        skipped=run.skipped,
        mail_ids=tuple(run.mail_ids),
        deadlines=(min(run.deadlines), max(run.deadlines)) if run.deadlines else None,
        still_bounced=run.still_bounced,
    )


@dataclass
class _Run:
    """One resend's inputs and what it has done so far, over its chunks."""

    session: Session
    user: User
    now: datetime
    extend_days: int | None
    app: Flask
    skipped: dict[str, int] = field(default_factory=dict)
    mail_ids: list[int] = field(default_factory=list)
    deadlines: list[datetime] = field(default_factory=list)
    batches: dict[int, Batch] = field(default_factory=dict)
    still_bounced: int = 0
    #: A request left ``bounced``/``expired``/... for ``generated``: its batch reopens.
    reopens: bool = False

    def skip(self, reason: str, count: int = 1) -> None:
        if count:
            self.skipped[reason] = self.skipped.get(reason, 0) + count

    def batch(self, batch_id: int) -> Batch:
        if batch_id not in self.batches:
            self.batches[batch_id] = batch_for_action(self.session, batch_id=batch_id, user=self.user)
        return self.batches[batch_id]


def _rows(session: Session, ids: list[int]) -> Sequence[Row[Any]]:
    return session.execute(
        select(
            SigningRequest.id,
            SigningRequest.status,
            SigningRequest.batch_id,
            SigningRequest.sent_at,
            SigningRequest.expires_at,
            SigningRequest.deadline_days,
            SigningRequest.purged_at,
        ).where(SigningRequest.id.in_(ids))
    ).all()


def _sort_out(run: _Run, rows: Sequence[Row[Any]]) -> tuple[list[int], list[int], dict[int, list[ReturnedInvitation]]]:
    """The requests whose recipient gets a new link (``eligible``), those among them another party's standing bounce
    keeps ``bounced`` (``held``), and the standing bounces; the rest are counted as skipped, with the reason."""
    session = run.session
    # The recipient's party of each request others sign too (a single-signer request's follows the request).
    other = aliased(Party)
    others = exists().where(other.request_id == Party.request_id, other.role != RECIPIENT_ROLE)
    routed: dict[int, str] = {
        request_id: status
        for request_id, status in session.execute(
            select(Party.request_id, Party.status)
            .join(SigningRequest, SigningRequest.id == Party.request_id)
            .where(Party.request_id.in_([r.id for r in rows]), Party.role == RECIPIENT_ROLE, others)
        )
    }
    # Another party's returned invitation is mended by a resend to that party: a new link for the recipient
    # would take the request out of ``bounced`` with that party's address still wrong. The recipient's own,
    # beside another's, gets its new link as a party's, the request staying bounced (``resend_held``).
    standing = standing_bounces(
        session, request_ids=[r.id for r in rows if r.id in routed and r.status == Status.BOUNCED], lock=True
    )
    changing = waiting_roles(session, request_ids=[r.id for r in rows])
    eligible: list[int] = []
    held: list[int] = []
    for row in rows:
        batch = run.batch(row.batch_id)
        bounced = {b.role for b in standing.get(row.id, ())}
        reason = (
            "party_bounced"
            if bounced and RECIPIENT_ROLE not in bounced
            else _skip_reason(
                row.status,
                batch=batch,
                extend_days=run.extend_days,
                now=run.now,
                purged=row.purged_at is not None,
                recipient=routed.get(row.id),
            )
        )
        if reason is None and (row.id, RECIPIENT_ROLE) in changing:
            reason = "address_change_pending"
        if reason:
            run.skip(reason)
        elif bounced - {RECIPIENT_ROLE}:
            held.append(row.id)
        else:
            eligible.append(row.id)
    return eligible, held, standing


def _resend_beside_bounces(run: _Run, rows: list[Row[Any]], standing: dict[int, list[ReturnedInvitation]]) -> None:
    """New links for recipients whose request another party's returned invitation keeps ``bounced``."""
    kept_bounced = resend_held(
        run.session,
        rows,
        standing=standing,
        batches=run.batches,
        extend_days=run.extend_days,
        user=run.user,
        now=run.now,
        app=run.app,
    )
    run.skip("changed_meanwhile", len(rows) - len(kept_bounced.requests))
    run.still_bounced += len(kept_bounced.requests)
    run.mail_ids += kept_bounced.mail_ids
    run.deadlines += kept_bounced.deadlines


def _move_back(run: _Run, eligible: list[int]) -> tuple[int, ...]:
    """Move the requests back to ``generated``: clearing the token kills the old link in the same compare-and-set,
    and a fresh reminder series follows. The ids that moved."""
    won = transition(
        run.session,
        eligible,
        frm=RESENDABLE,
        to=Status.GENERATED,
        now=run.now,
        actor=f"user:{run.user.id}",
        details={"resend": True, "extend_days": run.extend_days},
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
    run.skip("changed_meanwhile", len(eligible) - len(won))
    return won


def _invite_again(run: _Run, rows: Sequence[Row[Any]], won: tuple[int, ...]) -> None:
    """The moved requests' deadlines, then their fresh invitations (old ones still queued are cancelled)."""
    session = run.session
    run.reopens = True
    kept = kept_deadlines(
        {row.id: row for row in rows}, won, batches=run.batches, extend_days=run.extend_days, now=run.now
    )
    if kept:
        session.execute(update(SigningRequest), kept)
        run.deadlines += [k["expires_at"] for k in kept if run.extend_days]
    # Mails of the old link still waiting in the queue must not go out.
    cancel_queued(session, request_ids=list(won), kinds=[INVITATION, REMINDER])
    queued = queue_invitations(session, request_ids=won, now=run.now, app=run.app)
    if queued.errors:
        raise TemplateError(next(iter(queued.errors.values())))
    run.mail_ids += [queued.mail_ids[rid] for rid in won]

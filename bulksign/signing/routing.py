"""Routing: the parties of a request signed by several, invited step by step, and the request's status from theirs.

``request_follows_parties`` is the one writer of the request's status from its parties'; how the steps go is told
in docs/architecture/signing.md.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from flask import Flask
from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from bulksign.batches.states import transition
from bulksign.doc_templates.jinja_sandbox import render_text
from bulksign.doc_templates.mail_texts import mail_text
from bulksign.mail.mail_headers import one_line
from bulksign.mail.mailer import queue_mail, queue_mails
from bulksign.models import RECIPIENT_ROLE, Party, SigningRequest
from bulksign.models.mail import Channel, MailKind, TextReason
from bulksign.models.parties import PartyStatus
from bulksign.models.status import Status
from bulksign.signing import digests
from bulksign.signing.invitations import mail_context, mark_sent, request_deadline
from bulksign.signing.links import current_token, issue_link, signing_url
from bulksign.signing.parties import issue_party_link, move_parties, party_token

logger = logging.getLogger(__name__)

PARTY_INVITATION = MailKind.PARTY_INVITATION


def is_routed(session: Session, request_id: int) -> bool:
    """Whether the request is signed by other parties than its recipient."""
    return bool(session.scalar(select(exists().where(Party.request_id == request_id, Party.role != RECIPIENT_ROLE))))


def parties_in_order(session: Session, request_id: int) -> list[Party]:
    return list(session.scalars(select(Party).where(Party.request_id == request_id).order_by(Party.step, Party.role)))


def current_step(parties: Sequence[Party]) -> int | None:
    """The first step with a party that has not signed; None when every party has."""
    open_steps = [p.step for p in parties if p.status != PartyStatus.SIGNED]
    return min(open_steps) if open_steps else None


def party_person(party: Party) -> tuple[str, str]:
    """(address, name) of a party: the recipient's are the request's own."""
    if party.role == RECIPIENT_ROLE:
        return party.request.email, party.request.name or ""
    return party.email or "", party.name or ""


def party_phone(party: Party) -> str | None:
    """The phone of a party: the recipient's is the request's own."""
    return party.request.phone if party.role == RECIPIENT_ROLE else party.phone


def party_text(party: Party, *, key: str, kind: MailKind) -> dict[str, Any] | None:
    """``queue_mails`` keywords of a text with the party's link, for a party reached by text alone (its row named
    a phone and no address, as the batch's channel allowed); None when it has no phone."""
    phone = party_phone(party)
    if not phone:
        return None
    return {
        "key": f"text-{key}",
        "kind": kind,
        "to_email": "",
        "subject": "",
        "request_id": party.request_id,
        "batch_id": party.batch_id,
        "party_id": party.id,
        "channel": Channel.TEXT,
        "to_phone": phone,
        "text_reason": TextReason.NO_ADDRESS,
    }


# ---------------------------------------------------------------------------------------------
# The request's status from its parties' (its one writer)
# ---------------------------------------------------------------------------------------------


class Move(StrEnum):
    """What a party's move made of its request."""

    #: The last party signed: seal it.
    SIGNED = "signed"
    DECLINED = "declined"
    #: A step finished: invite the next.
    NEXT_STEP = "next_step"
    #: The step's other parties have yet to sign.
    WAITING = "waiting"
    #: The move did not happen (nothing is held): the same move happened before (a double click), the batch asks
    #: for a one-time code the signer has not given, or the request cannot be acted on.
    ALREADY_SIGNED = "already_signed"
    ALREADY_DECLINED = "already_declined"
    CODE_NEEDED = "code_needed"
    NOT_ALLOWED = "not_allowed"


@dataclass(frozen=True)
class Settled:
    status: Move
    request_id: int
    #: For ``NEXT_STEP``: the step to start and the document's version (its ``advance`` job is named by both).
    step: int | None = None
    version: int = 1


def lock_request(session: Session, request_id: int) -> SigningRequest | None:
    """The request, read fresh under its row lock until the transaction ends (``SELECT ... FOR UPDATE``): a party's
    move and the status derived from its parties' then take turns per request, and a cancel, an expiry or another
    party's sign waits for them or they for it. SQLite has no row locks; it lets one writer at a time."""
    return session.scalar(
        select(SigningRequest)
        .where(SigningRequest.id == request_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )


def request_follows_parties(
    session: Session, *, request_id: int, now: datetime, ip: str | None = None, actor: str = "recipient"
) -> Settled:
    """Write the request's status from its parties', after a party's move in the same transaction: ``signed``
    when every party signed, ``declined`` when one declined (with that party's reason). Read under the request's
    row lock (``lock_request``), so of two parties of one step signing at once the second sees the first signed.
    The caller commits."""
    request = lock_request(session, request_id)
    parties = parties_in_order(session, request_id)
    declined = next((p for p in parties if p.status == PartyStatus.DECLINED), None)
    if declined is not None:
        transition(
            session,
            request_id,
            frm=[Status.SENT, Status.OPENED],
            to=Status.DECLINED,
            now=now,
            actor=actor,
            ip=ip,
            details={"reason": declined.decline_reason, "role": declined.role},
            declined_at=now,
            decline_reason=declined.decline_reason,
        )
        return Settled(Move.DECLINED, request_id)
    step = current_step(parties)
    if step is None:
        recipient = next(p for p in parties if p.role == RECIPIENT_ROLE)
        moved = transition(
            session,
            request_id,
            frm=Status.OPENED,
            to=Status.SIGNED,
            now=now,
            actor=actor,
            ip=ip,
            signed_at=now,
            signer_name=recipient.signer_name,
            signer_ip=recipient.signer_ip,
        )
        # Not opened (the request ended meanwhile, or signed already): nothing to seal.
        return Settled(Move.SIGNED if moved else Move.WAITING, request_id)
    finished = [p for p in parties if p.step < step]
    if finished and any(p.step == step and p.status == PartyStatus.WAITING for p in parties):
        return Settled(Move.NEXT_STEP, request_id, step, request.document_version if request else 1)
    return Settled(Move.WAITING, request_id)


# ---------------------------------------------------------------------------------------------
# Inviting a step's parties
# ---------------------------------------------------------------------------------------------


def invite_parties(session: Session, parties: Sequence[Party], *, now: datetime, app: Flask) -> list[int]:
    """Move each waiting party to invited by compare-and-set and, for each win only, give it its link and invitation
    row in the same transaction; the ids of the rows to send. A recipient invited here gets the request's link
    and ``sent_at``; a party the digest serves gets the digest instead. The caller commits."""
    secret = app.config["SECRET_KEY"]
    mail_ids = []
    by_digest: dict[int, set[str]] = {}
    for party in parties:
        if party.status != PartyStatus.WAITING:
            continue
        email, _name = party_person(party)
        batch_digests = by_digest.get(party.batch_id)
        if batch_digests is None:
            emails = [p.email for p in parties if p.batch_id == party.batch_id and p.role != RECIPIENT_ROLE and p.email]
            batch_digests = digests.digest_addresses(session, batch_id=party.batch_id, emails=emails)
            by_digest[party.batch_id] = batch_digests
        if not move_parties(
            session, party.id, frm=PartyStatus.WAITING, to=PartyStatus.INVITED, now=now, details={"to": email}
        ):
            continue  # invited by another run: its link and mail stand
        if party.role != RECIPIENT_ROLE and email.lower() in batch_digests:
            continue
        request = party.request
        if party.role == RECIPIENT_ROLE:
            token = issue_link(session, request_id=request.id, secret=secret, now=now)
            request.sent_at = now
        else:
            token = issue_party_link(session, party=party, secret=secret, now=now)
        # The link's nonce in it: a new link is a new mail. Short: a long Message-ID is folded.
        key = f"party-invitation-{party.id}-{link_nonce(party)[:12]}"
        if not email:
            text = party_text(party, key=key, kind=PARTY_INVITATION)
            mail_ids += queue_mails(session, [text], now=now) if text else []
            continue
        mail = queue_mail(
            session,
            key=key,
            kind=PARTY_INVITATION,
            to_email=email,
            subject=one_line(text=_invitation_subject(request, party, token=token, app=app, now=now)),
            now=now,
            request_id=request.id,
            batch_id=request.batch_id,
            party_id=party.id,
        )
        mail_ids.append(mail.id)
    for batch_id, served in by_digest.items():
        mail_ids += digests.invited(session, batch_id=batch_id, emails=served, secret=secret, now=now)
    return mail_ids


def link_nonce(party: Party) -> str:
    """The nonce of the party's current link: the request's for the recipient, else the party's own."""
    return (party.request.token_nonce if party.role == RECIPIENT_ROLE else party.token_nonce) or ""


def party_link(party: Party, *, secret: str) -> str | None:
    """The token of the party's current link (the request's for the recipient); None when it has no live link."""
    if party.role == RECIPIENT_ROLE:
        return current_token(party.request, secret=secret) if party.request.token_hash else None
    return party_token(party, secret=secret) if party.token_hash else None


def party_context(request: SigningRequest, party: Party, *, token: str, app: Flask, now: datetime) -> dict[str, Any]:
    """The invitation's variables for a party: the row's, with the party's own name and address and link."""
    deadline = request.expires_at or request_deadline(request, sent_at=now)
    context = mail_context(request, token=token, app=app, deadline=deadline)
    email, name = party_person(party)
    return {
        **context,
        "name": name,
        "email": email,
        "signing_link": signing_url(app_url=app.config["APP_URL"], token=token),
    }


def _invitation_subject(request: SigningRequest, party: Party, *, token: str, app: Flask, now: datetime) -> str:
    batch = request.batch
    context = party_context(request, party, token=token, app=app, now=now)
    return render_text(mail_text(batch.template_version.email_subject, language=batch.language), context)


def invite_first_step(session: Session, *, request_ids: Sequence[int], now: datetime, app: Flask) -> list[int]:
    """The first step's other parties of these just-rendered requests, invited with the recipient's invitation (the
    render's own transaction: the document is ready); the ids of their invitation rows. The caller commits."""
    if not request_ids:
        return []
    parties = session.scalars(
        select(Party)
        .where(
            Party.request_id.in_(list(request_ids)),
            Party.role != RECIPIENT_ROLE,
            Party.status == PartyStatus.WAITING,
            Party.step == 0,
        )
        .order_by(Party.id)
    ).all()
    return invite_parties(session, parties, now=now, app=app)


def later_recipients(session: Session, request_ids: Sequence[int]) -> set[int]:
    """Of these requests, those whose recipient signs after other parties (its step is not the first)."""
    if not request_ids:
        return set()
    return set(
        session.scalars(
            select(Party.request_id).where(
                Party.request_id.in_(list(request_ids)), Party.role == RECIPIENT_ROLE, Party.step > 0
            )
        )
    )


def send_to_first_step(session: Session, *, request_ids: Sequence[int], now: datetime, app: Flask) -> list[int]:
    """Just-rendered requests whose recipient signs after others go out to their first step in the render's
    transaction: its parties invited, the request sent (its deadline from now) with no invitation of its own;
    its recipient is invited when its step starts. The invitation rows' ids; the caller commits."""
    for request in session.scalars(select(SigningRequest).where(SigningRequest.id.in_(list(request_ids)))):
        transition(session, request.id, frm=Status.GENERATED, to=Status.SENDING, now=now)
        mark_sent(session, request=request, sent_at=now, now=now, details={"first_step": True})
    return invite_first_step(session, request_ids=request_ids, now=now, app=app)

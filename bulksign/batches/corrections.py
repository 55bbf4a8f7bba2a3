"""Correct and resend: before a request is complete, staff change its row's values, a party's name or address, with
a note. The document is rendered again as a new version (the old one kept), signatures on the old version are void,
every party who saw it is told what changed, and the old links say they were replaced. In a team that requires
approval the correction waits for a manager or an admin. docs/architecture/corrections.md says how."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from email_validator import EmailNotValidError, validate_email
from redis.exceptions import RedisError
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from bulksign.batches.address_changes import MAX_NOTE, needs_approval
from bulksign.batches.approval import is_approver
from bulksign.batches.correction_notices import tell_corrected
from bulksign.batches.progress import REOPENABLE, BatchActionError, batch_for_action
from bulksign.batches.states import move_batches, transition
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.core.tokens import hash_token
from bulksign.mail.mailer import cancel_queued
from bulksign.models import (
    RECIPIENT_ROLE,
    Batch,
    Correction,
    Event,
    FieldValue,
    Party,
    ReplacedLink,
    SigningRequest,
    User,
)
from bulksign.models.corrections import CORRECTION_TRANSITIONS, CorrectionStatus
from bulksign.models.mail import MailKind
from bulksign.models.parties import PartyStatus
from bulksign.models.status import BatchStatus, IllegalTransition, Status
from bulksign.signing.parties import move_parties
from bulksign.signing.routing import lock_request
from bulksign.work.pipeline import enqueue_renders, enqueue_sends

logger = logging.getLogger(__name__)

#: A request that may be corrected: out to its parties and not complete (a decline, an expiry or a bounce included).
CORRECTABLE = (Status.SENT, Status.OPENED, Status.DECLINED, Status.EXPIRED, Status.BOUNCED)
#: The row's columns a correction does not set as values: who the recipient is has its own inputs.
OWN_COLUMNS = frozenset({"email", "name", "phone"})
#: The longest value a correction sets (a spreadsheet cell holds 32,767 characters; a contract's value far fewer).
MAX_VALUE = 2000
MAX_NAME = 300
#: Mails of the old version still waiting in the queue must not go out.
OLD_VERSION_MAILS = [
    MailKind.INVITATION,
    MailKind.REMINDER,
    MailKind.PARTY_INVITATION,
    MailKind.PARTY_REMINDER,
    MailKind.LINK_AGAIN,
]


#: What a signer's pass over the earlier version left, on the request and on each party: cleared by a correction.
SIGNER_CLEARED: Mapping[str, Any] = {
    "token_hash": None,
    "token_nonce": None,
    "opened_at": None,
    "declined_at": None,
    "decline_reason": None,
    "signer_name": None,
    "signer_ip": None,
    "signature_image": None,
    "reminder_count": 0,
    "last_reminder_at": None,
}


@dataclass(frozen=True)
class CorrectionAsked:
    """What staff asked to change: columns → new value, role → new name / new address, and why."""

    note: str
    values: Mapping[str, str] = field(default_factory=dict)
    names: Mapping[str, str] = field(default_factory=dict)
    emails: Mapping[str, str] = field(default_factory=dict)


class CorrectionOutcome(StrEnum):
    #: Made now: the request is rendered again as ``version``.
    APPLIED = "applied"
    #: Waiting for a manager of the team or an admin.
    HELD = "held"
    #: It asked for what the request already says.
    UNCHANGED = "unchanged"
    REJECTED = "rejected"


#: What staff read after asking.
CORRECTION_ANSWERS = {
    CorrectionOutcome.APPLIED: N_(
        "Corrected: the document is being prepared again as a new version, and every party who saw it is told."
    ),
    CorrectionOutcome.HELD: N_(
        "The correction waits for approval by a manager of the team or an admin: nothing changes until then."
    ),
    CorrectionOutcome.UNCHANGED: N_("Nothing to correct: every value is as it was."),
    CorrectionOutcome.REJECTED: N_("Rejected: the request stays as it was, and whoever asked reads your reason."),
}


@dataclass(frozen=True)
class CorrectionResult:
    outcome: CorrectionOutcome
    request_id: int
    correction_id: int | None = None
    version: int | None = None
    #: The notices to the parties who saw the old version (the caller enqueues them after the commit).
    mail_ids: tuple[int, ...] = ()


def correct_request(
    session: Session, *, request_id: int, asked: CorrectionAsked, user: User, now: datetime
) -> CorrectionResult:
    """Correct a request at once, or hold the correction for approval in a team that requires it (an approver's
    own is made at once). ``BatchActionError`` says why it cannot be. The caller commits, then queues the render
    (``queue_render``) and the notices."""
    request, batch = _open_request(session, request_id=request_id, user=user)
    note = " ".join((asked.note or "").split())
    if not note:
        raise BatchActionError(N_("Say what you corrected and why: every party reads it."), 422)
    if len(note) > MAX_NOTE:
        raise BatchActionError(N_("The note is longer than %(n)s characters.", n=MAX_NOTE), 422)
    changes = _changes(session, request, asked)
    if not changes:
        return CorrectionResult(CorrectionOutcome.UNCHANGED, request_id)
    # Asking again replaces a correction still waiting.
    _withdraw_waiting(session, request_id=request_id, now=now)
    correction = Correction(
        request_id=request.id,
        batch_id=request.batch_id,
        changes=changes,
        note=note,
        status=CorrectionStatus.PENDING.value,
        requested_by_id=user.id,
        requested_at=now,
    )
    session.add(correction)
    session.flush()
    if needs_approval(session, batch=batch) and not is_approver(session, team_id=batch.team_id, user=user):
        _record(session, correction, "correction.asked", actor=f"user:{user.id}", now=now)
        log(logger, logging.INFO, "correction held for approval", request_id=request_id, correction_id=correction.id)
        return CorrectionResult(CorrectionOutcome.HELD, request_id, correction.id)
    return _apply(session, correction, user=user, now=now)


def decide_correction(
    session: Session, *, batch_id: int, correction_id: int, user: User, now: datetime, approve: bool, reason: str = ""
) -> CorrectionResult:
    """A manager of the team or an admin, never whoever asked, approves a held correction (it is made now) or
    rejects it with a reason. The caller commits, then queues the render and the notices."""
    batch = batch_for_action(session, batch_id=batch_id, user=user)
    correction = session.get(Correction, correction_id)
    if correction is None or correction.batch_id != batch.id:
        raise BatchActionError(N_("No correction with this id in this batch."), 404)
    if correction.requested_by_id == user.id:
        raise BatchActionError(N_("You asked for this correction: someone else must approve or reject it."), 403)
    if not is_approver(session, team_id=batch.team_id, user=user):
        raise BatchActionError(N_("Only a manager of the batch's team or an admin can decide a correction."), 403)
    if correction.status != CorrectionStatus.PENDING:
        raise BatchActionError(N_("This correction is no longer waiting for approval."), 409)
    if approve:
        _open_request(session, request_id=correction.request_id, user=user)
        return _apply(session, correction, user=user, now=now)
    reason = " ".join((reason or "").split())
    if not reason or len(reason) > MAX_NOTE:
        raise BatchActionError(N_("Give a reason of at most %(n)s characters: the asker reads it.", n=MAX_NOTE), 422)
    _move(session, correction, to=CorrectionStatus.REJECTED, decided_by_id=user.id, decided_at=now, reason=reason)
    _record(session, correction, "correction.rejected", actor=f"user:{user.id}", now=now, reason=reason)
    return CorrectionResult(CorrectionOutcome.REJECTED, correction.request_id, correction.id)


def queue_follow_up(result: CorrectionResult) -> None:
    """After the commit: the new version's render and the notices (the reconciler queues them again if Redis lost
    them: the request is ``pending`` and the mails ``queued`` in the database)."""
    if result.outcome != CorrectionOutcome.APPLIED:
        return
    try:
        enqueue_renders([result.request_id])
        enqueue_sends(list(result.mail_ids))
    except RedisError as exc:
        log(logger, logging.ERROR, "correction queued late", request_id=result.request_id, error=str(exc))


def waiting_correction(session: Session, *, request_id: int) -> Correction | None:
    """The request's correction waiting for approval, if any (its panel shows it)."""
    return session.scalar(
        select(Correction).where(Correction.request_id == request_id, Correction.status == CorrectionStatus.PENDING)
    )


def corrections_of(session: Session, *, request_id: int) -> list[Correction]:
    """The request's corrections, newest first (its history)."""
    return list(
        session.scalars(select(Correction).where(Correction.request_id == request_id).order_by(Correction.id.desc()))
    )


def replaced_request(session: Session, *, token: str) -> SigningRequest | None:
    """The request whose earlier version's link ``token`` was, when a correction replaced it; None for any other."""
    if not token or len(token) > 128:
        return None
    return session.scalar(
        select(SigningRequest)
        .join(ReplacedLink, ReplacedLink.request_id == SigningRequest.id)
        .where(ReplacedLink.token_hash == hash_token(token))
    )


def _open_request(session: Session, *, request_id: int, user: User) -> tuple[SigningRequest, Batch]:
    request = session.get(SigningRequest, request_id)
    if request is None:
        raise BatchActionError(N_("No such request."), 404)
    batch = batch_for_action(session, batch_id=request.batch_id, user=user)
    if request.purged_at is not None:
        raise BatchActionError(N_("The request was deleted under the retention rules; it cannot be corrected."), 409)
    if batch.status == BatchStatus.CANCELLED or request.status == Status.CANCELLED:
        raise BatchActionError(N_("The request was cancelled; it cannot be corrected."), 409)
    if request.status == Status.SIGNED:
        raise BatchActionError(N_("Every party has signed: the document is complete and cannot be corrected."), 409)
    if request.status not in CORRECTABLE:
        raise BatchActionError(
            N_("The document is still being prepared or sent: correct it once it has reached its parties."), 409
        )
    return request, batch


def _changes(session: Session, request: SigningRequest, asked: CorrectionAsked) -> dict[str, Any]:
    """What the correction changes, as ``{"values": {column: [old, new]}, "names": {role: [old, new]}, "emails":
    {role: [old, new]}}`` without what stays the same; ``BatchActionError`` 422 names the first bad input."""
    data = request.data or {}
    values: dict[str, list[str]] = {}
    for column, new in asked.values.items():
        if column not in data or column in OWN_COLUMNS:
            raise BatchActionError(N_("The file has no column %(column)s to correct.", column=str(column)[:64]), 422)
        new = str(new).strip()
        if len(new) > MAX_VALUE:
            raise BatchActionError(
                N_("The value of %(column)s is longer than %(n)s characters.", column=column, n=MAX_VALUE), 422
            )
        old = "" if data[column] is None else str(data[column])
        if new != old:
            values[column] = [old, new]
    parties = {p.role: p for p in session.scalars(select(Party).where(Party.request_id == request.id))}
    names: dict[str, list[str]] = {}
    emails: dict[str, list[str]] = {}
    for role, new in asked.names.items():
        old = _who(request, parties, role, "name")
        new = " ".join(str(new).split())
        if not new or len(new) > MAX_NAME:
            raise BatchActionError(N_("A name must have 1 to %(n)s characters.", n=MAX_NAME), 422)
        if new != old:
            names[role] = [old, new]
    for role, new in asked.emails.items():
        old = _who(request, parties, role, "email")
        try:
            new = validate_email(str(new).strip(), check_deliverability=False).normalized
        except EmailNotValidError as exc:
            raise BatchActionError(N_("Not a valid email address: %(reason)s", reason=str(exc)), 422) from None
        if new.lower() != old.lower():
            emails[role] = [old, new]
    return {k: v for k, v in {"values": values, "names": names, "emails": emails}.items() if v}


def _who(request: SigningRequest, parties: Mapping[str, Party], role: str, what: str) -> str:
    """A party's current name or address: the recipient's is the request's own."""
    if role == RECIPIENT_ROLE:
        return str(getattr(request, what) or "")
    party = parties.get(role)
    if party is None:
        raise BatchActionError(N_("This request has no %(role)s party.", role=str(role)[:40]), 422)
    return str(getattr(party, what) or "")


def _apply(session: Session, correction: Correction, *, user: User, now: datetime) -> CorrectionResult:
    """Make the correction under the request's row lock: a party signing at this moment either finished first
    (and its signature is voided) or finds the request pending and is refused."""
    request = lock_request(session, correction.request_id)
    if request is None or request.status not in CORRECTABLE:
        _move(session, correction, to=CorrectionStatus.WITHDRAWN, decided_by_id=user.id, decided_at=now)
        raise BatchActionError(N_("The request changed meanwhile (signed or cancelled): nothing was corrected."), 409)
    parties = list(session.scalars(select(Party).where(Party.request_id == request.id).order_by(Party.step, Party.id)))
    version = request.document_version + 1
    _keep_replaced_links(session, request, parties, now=now)
    # Who saw the old version, at the address it went to: they are told (before the new addresses are set).
    told = tell_corrected(session, request=request, parties=parties, version=version, now=now)
    changes = correction.changes
    data = dict(request.data or {})
    for column, (_old, new) in changes.get("values", {}).items():
        data[column] = new
    # A party the row names (``employer_email``, ``employer_name``): its columns say what its party now does.
    for what in ("names", "emails"):
        for role, (_old, new) in changes.get(what, {}).items():
            column = f"{role}_{what[:-1]}"
            if role != RECIPIENT_ROLE and column in data:
                data[column] = new
    recipient_name = changes.get("names", {}).get(RECIPIENT_ROLE, [None, request.name])[1]
    recipient_email = changes.get("emails", {}).get(RECIPIENT_ROLE, [None, request.email])[1]
    moved = transition(
        session,
        request.id,
        frm=CORRECTABLE,
        to=Status.PENDING,
        now=now,
        actor=f"user:{user.id}",
        details={"correction": correction.id, "version": version, "changed": _changed_keys(changes)},
        data=data,
        name=recipient_name,
        email=recipient_email,
        document_version=version,
        attempts=0,
        error_message=None,
        email_opened_at=None,
        expires_at=None,
        **SIGNER_CLEARED,
    )
    if not moved:
        raise BatchActionError(N_("The request changed meanwhile (signed or cancelled): nothing was corrected."), 409)
    voided = _void_parties(session, parties, changes=changes, user=user, now=now)
    session.execute(delete(FieldValue).where(FieldValue.request_id == request.id))
    cancel_queued(session, request_ids=[request.id], kinds=OLD_VERSION_MAILS)
    _move(session, correction, to=CorrectionStatus.APPLIED, decided_by_id=user.id, decided_at=now, version=version)
    _record(session, correction, "correction.applied", actor=f"user:{user.id}", now=now, voided=voided)
    move_batches(
        session, request.batch_id, frm=REOPENABLE, to=BatchStatus.PROCESSING, finished_at=None, settled_at=None
    )
    log(
        logger,
        logging.INFO,
        "request corrected",
        request_id=request.id,
        correction_id=correction.id,
        version=version,
        voided=voided,
        told=len(told),
    )
    return CorrectionResult(CorrectionOutcome.APPLIED, request.id, correction.id, version, tuple(told))


def _keep_replaced_links(session: Session, request: SigningRequest, parties: list[Party], *, now: datetime) -> None:
    hashes = {h for h in [request.token_hash, *(p.token_hash for p in parties)] if h}
    known = set(session.scalars(select(ReplacedLink.token_hash).where(ReplacedLink.token_hash.in_(hashes))))
    session.add_all(
        ReplacedLink(token_hash=h, request_id=request.id, version=request.document_version, replaced_at=now)
        for h in sorted(hashes - known)
    )


def _void_parties(
    session: Session, parties: list[Party], *, changes: Mapping[str, Any], user: User, now: datetime
) -> list[str]:
    """Every party back to waiting for the new version, its link, signature and what it gave cleared; the new names
    and addresses set. The roles whose signature was voided."""
    cleared: dict[str, Any] = dict(invited_at=None, signed_at=None, **SIGNER_CLEARED)
    actor = f"user:{user.id}"
    signed = [p.id for p in parties if p.status == PartyStatus.SIGNED]
    # A voided signature moves on its own: the move checks the request is back to pending (``PARTY_LEAVE_NEEDS``).
    voided = move_parties(
        session, signed, frm=PartyStatus.SIGNED, to=PartyStatus.WAITING, now=now, actor=actor, **cleared
    )
    move_parties(
        session,
        [p.id for p in parties if p.status in (PartyStatus.INVITED, PartyStatus.OPENED, PartyStatus.DECLINED)],
        frm=[PartyStatus.INVITED, PartyStatus.OPENED, PartyStatus.DECLINED],
        to=PartyStatus.WAITING,
        now=now,
        actor=actor,
        **cleared,
    )
    session.execute(
        update(Party).where(Party.id.in_([p.id for p in parties if p.status == PartyStatus.WAITING])).values(**cleared)
    )
    for role, (_old, new) in changes.get("names", {}).items():
        if role != RECIPIENT_ROLE:
            session.execute(
                update(Party).where(Party.request_id == parties[0].request_id, Party.role == role).values(name=new)
            )
    for role, (_old, new) in changes.get("emails", {}).items():
        if role != RECIPIENT_ROLE:
            session.execute(
                update(Party).where(Party.request_id == parties[0].request_id, Party.role == role).values(email=new)
            )
    for party in parties:
        session.expire(party)
    return sorted(p.role for p in parties if p.id in set(voided.won))


def _changed_keys(changes: Mapping[str, Any]) -> dict[str, list[str]]:
    """What changed, without the values (events outlive the purge of a request's data only as their type)."""
    return {kind: sorted(changed) for kind, changed in changes.items()}


def _withdraw_waiting(session: Session, *, request_id: int, now: datetime) -> None:
    waiting = waiting_correction(session, request_id=request_id)
    if waiting is not None:
        _move(session, waiting, to=CorrectionStatus.WITHDRAWN, decided_at=now)
        session.flush()


def _move(session: Session, correction: Correction, *, to: CorrectionStatus, **fields: Any) -> None:
    """Compare-and-set of a correction's status; a second decider finds it decided already."""
    source = CorrectionStatus(correction.status)
    if to not in CORRECTION_TRANSITIONS[source]:
        raise IllegalTransition(f"CorrectionStatus {source} → {to} is not allowed")
    moved = session.execute(
        update(Correction)
        .where(Correction.id == correction.id, Correction.status == source.value)
        .values(status=to.value, **fields)
        .execution_options(synchronize_session=False)
    )
    session.expire(correction)
    if not moved.rowcount:  # type: ignore[attr-defined]
        raise BatchActionError(N_("This correction is no longer waiting for approval."), 409)


def _record(session: Session, correction: Correction, kind: str, *, actor: str, now: datetime, **details: Any) -> None:
    session.add(
        Event(
            request_id=correction.request_id,
            batch_id=correction.batch_id,
            type=kind,
            created_at=now,
            actor=actor,
            details={"correction": correction.id, "note": correction.note, **details},
        )
    )

"""Correcting where a request's document goes (its recipient's address or another party's): at once, or held for
approval when the batch's team requires it (``address_approval``). docs/architecture/batches.md."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, cast

from email_validator import EmailNotValidError, validate_email
from sqlalchemy import CursorResult, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bulksign.batches import versions
from bulksign.batches.approval import required_for
from bulksign.batches.progress import BatchActionError, batch_for_action
from bulksign.core.logs import log
from bulksign.core.messages import N_, N_plural
from bulksign.models import RECIPIENT_ROLE, AddressChange, Batch, Event, Party, SigningRequest, User
from bulksign.models.address_changes import ADDRESS_CHANGE_TRANSITIONS, AddressChangeStatus
from bulksign.models.parties import PartyStatus
from bulksign.models.status import BatchStatus, IllegalTransition, Status

logger = logging.getLogger(__name__)

#: The record is closed: the address is part of it.
EMAIL_FROZEN = (Status.SIGNED.value, Status.CANCELLED.value)
#: The longest note an asker leaves for the approver.
MAX_NOTE = 500


@dataclass(frozen=True)
class EmailChange:
    request_id: int
    old_email: str
    new_email: str
    #: The address changed now.
    changed: bool
    role: str = RECIPIENT_ROLE
    #: The change waiting for approval instead (held); None when made at once or nothing was to change.
    pending: AddressChange | None = None


@dataclass(frozen=True)
class CheckedChange:
    """A change that may be made: whose address, from what, to what."""

    request: SigningRequest
    #: The party whose address it is (the recipient's too, when the request has parties).
    party: Party | None
    role: str
    old: str
    new: str


def needs_approval(session: Session, *, batch: Batch) -> bool:
    """Whether a change of where this batch's documents go waits for a second look: its team requires approval and
    the batch is past its own (one still waiting is approved as it then is)."""
    return batch.status != BatchStatus.AWAITING_APPROVAL and required_for(session, team_id=batch.team_id)


def checked_change(session: Session, *, request_id: int, new_email: str, user: User, role: str) -> CheckedChange:
    """What a change of ``role``'s address of the request to ``new_email`` would do, once ``user`` may act on its
    batch, the party exists and has not signed or declined (a recipient who declined alone may be invited again),
    the request is still open and the address is one; ``BatchActionError`` with the reason otherwise."""
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
    if party is not None and role != RECIPIENT_ROLE and party.status == PartyStatus.DECLINED:
        raise BatchActionError(N_("The %(role)s declined; their address is part of the record.", role=role), 409)
    try:
        normalized = validate_email((new_email or "").strip(), check_deliverability=False).normalized
    except EmailNotValidError as exc:
        raise BatchActionError(N_("Not a valid email address: %(reason)s", reason=str(exc))) from None
    # A party other than the recipient has its own address; the recipient's is the request's.
    old = (party.email if party is not None and role != RECIPIENT_ROLE else None) or request.email
    return CheckedChange(request=request, party=party, role=role, old=old, new=normalized)


def change_email(
    session: Session,
    *,
    request_id: int,
    new_email: str,
    user: User,
    now: datetime,
    role: str = RECIPIENT_ROLE,
    note: str | None = None,
) -> EmailChange:
    """Correct a party's address (e.g. after a bounce, before a resend): made at once, or held for approval
    (``needs_approval``) with ``note`` for the approver. A party served by its countersigner's digest leaves it once
    the address changes (the digest finds its documents by their current addresses). The caller commits."""
    note = " ".join((note or "").split()) or None
    if note is not None and len(note) > MAX_NOTE:
        raise BatchActionError(
            N_plural(
                "The note is longer than %(num)s character.", "The note is longer than %(num)s characters.", MAX_NOTE
            ),
            422,
        )
    found = checked_change(session, request_id=request_id, new_email=new_email, user=user, role=role)
    if needs_approval(session, batch=found.request.batch):
        return _ask(session, found, note=note, user=user, now=now)
    if found.new == found.old:
        return EmailChange(request_id=request_id, old_email=found.old, new_email=found.new, changed=False, role=role)
    apply_change(session, found, actor=f"user:{user.id}", now=now)
    return EmailChange(request_id=request_id, old_email=found.old, new_email=found.new, changed=True, role=role)


def apply_change(
    session: Session, found: CheckedChange, *, actor: str, now: datetime, change_id: int | None = None
) -> None:
    """Write the new address and its ``email.changed`` event (``change_id``: the approved change it makes)."""
    request = found.request
    if found.role == RECIPIENT_ROLE:
        session.execute(
            update(SigningRequest)
            .where(SigningRequest.id == request.id)
            .values(email=found.new)
            .execution_options(synchronize_session="fetch")
        )
    else:
        assert found.party is not None  # checked_change found the party of a role other than the recipient
        # Guarded like a move: a party that signed meanwhile keeps the address it signed with.
        changed = session.execute(
            update(Party)
            .where(
                Party.id == found.party.id,
                Party.status.not_in([PartyStatus.SIGNED.value, PartyStatus.DECLINED.value]),
            )
            .values(email=found.new)
            .execution_options(synchronize_session="fetch")
        )
        if not cast(CursorResult[Any], changed).rowcount:
            raise BatchActionError(
                N_("The %(role)s acted meanwhile; their address is part of the record.", role=found.role), 409
            )
    details: dict[str, object] = {"role": found.role, "old": found.old, "new": found.new}
    if change_id is not None:
        details["change_id"] = change_id
    record(session, request, "email.changed", actor=actor, now=now, details=details)
    log(logger, logging.INFO, "party email changed", request_id=request.id, role=found.role, actor=actor)


def _ask(session: Session, found: CheckedChange, *, note: str | None, user: User, now: datetime) -> EmailChange:
    """Hold the change for approval: it replaces one of the same party's address still waiting (the same address
    asked again is that one), and asking for the address it has takes the waiting one back."""
    request, role = found.request, found.role
    waiting = list(
        session.scalars(
            select(AddressChange)
            .where(
                AddressChange.request_id == request.id,
                AddressChange.role == role,
                AddressChange.status == AddressChangeStatus.PENDING,
            )
            .with_for_update()
        )
    )
    same = next((c for c in waiting if c.new_email == found.new), None)
    result = EmailChange(request_id=request.id, old_email=found.old, new_email=found.new, changed=False, role=role)
    if same is not None:
        return replace(result, pending=same)
    for change in waiting:
        if move_change(session, change.id, to=AddressChangeStatus.WITHDRAWN, decided_by_id=user.id, decided_at=now):
            record(
                session,
                request,
                "address_change.withdrawn",
                actor=f"user:{user.id}",
                now=now,
                details={"role": role, "old": change.old_email, "new": change.new_email, "change_id": change.id},
            )
    if found.new == found.old:
        return result
    change = AddressChange(
        request_id=request.id,
        batch_id=request.batch_id,
        role=role,
        old_email=found.old,
        new_email=found.new,
        note=note,
        status=AddressChangeStatus.PENDING.value,
        requested_by_id=user.id,
        requested_at=now,
    )
    session.add(change)
    try:
        session.flush()
    except IntegrityError:
        # One waiting change per party (a unique index): another was asked for at the same moment.
        session.rollback()
        raise BatchActionError(
            N_("Another change of this address was asked for at the same moment: reload the page and look."), 409
        ) from None
    record(
        session,
        request,
        "address_change.requested",
        actor=f"user:{user.id}",
        now=now,
        details={"role": role, "old": found.old, "new": found.new, "note": note, "change_id": change.id},
    )
    log(logger, logging.INFO, "address change held for approval", request_id=request.id, role=role, user_id=user.id)
    return replace(result, pending=change)


def move_change(
    session: Session,
    change_id: int,
    *,
    to: AddressChangeStatus,
    frm: AddressChangeStatus = AddressChangeStatus.PENDING,
    **fields: Any,
) -> bool:
    """Move an address change from ``frm`` to ``to`` by compare-and-set (with ``fields``); False when it was no
    longer in ``frm`` (someone decided it a moment ago)."""
    if to not in ADDRESS_CHANGE_TRANSITIONS[frm]:
        raise IllegalTransition(f"address change {frm} -> {to}")
    moved = session.execute(
        update(AddressChange)
        .where(AddressChange.id == change_id, AddressChange.status == frm.value)
        .values(status=to.value, **fields)
        .execution_options(synchronize_session="fetch")
    )
    return bool(cast(CursorResult[Any], moved).rowcount)


def waiting_roles(session: Session, *, request_ids: Iterable[int]) -> set[tuple[int, str]]:
    """(request id, role) of every party of these requests whose address change waits for approval: a resend
    there would send a new link to the address being replaced."""
    ids = list(request_ids)
    if not ids:
        return set()
    return {
        (request_id, role)
        for request_id, role in session.execute(
            select(AddressChange.request_id, AddressChange.role).where(
                AddressChange.request_id.in_(ids), AddressChange.status == AddressChangeStatus.PENDING
            )
        )
    }


def record(
    session: Session, request: SigningRequest, type_: str, *, actor: str, now: datetime, details: dict[str, Any]
) -> None:
    """An event of the request's audit trail about its address (its batch's open pages show it: its version grows)."""
    versions.touch(session, [request.batch_id])
    session.add(
        Event(
            request_id=request.id,
            batch_id=request.batch_id,
            type=type_,
            created_at=now,
            actor=actor,
            details=details,
        )
    )

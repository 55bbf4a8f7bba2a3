"""Bounces and complaints reported after delivery, and mails refused at the SMTP exchange: the request is bounced
or flagged, naming the party whose address it was, and the address suppressed. docs/architecture/batches.md."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, String, func, insert, literal, select, update
from sqlalchemy.orm import Session

from bulksign.batches import texting
from bulksign.batches.bounce_reports import BounceKind, BounceReport
from bulksign.batches.progress import refresh_batch_statuses
from bulksign.batches.states import transition
from bulksign.core.logs import log
from bulksign.core.slicing import slices
from bulksign.mail.mailer import cancel_queued
from bulksign.models import RECIPIENT_ROLE, Event, OutgoingMail, Party, SigningRequest, UTCDateTime
from bulksign.models.mail import MailKind, MailStatus
from bulksign.models.parties import PartyStatus
from bulksign.models.status import DISPATCHED, Status
from bulksign.recipients.suppressions import suppress
from bulksign.signing.digests import served_by_digest

logger = logging.getLogger(__name__)

#: A bounce can arrive while the send is being recorded, or after the recipient opened the link.
BOUNCEABLE = (Status.SENDING, Status.SENT, Status.OPENED)
#: The event of a party's returned invitation on a request another party's already bounced: the request does not
#: move (no ``status.`` event), and this names the role and address that came back too (details as a bounce's).
BOUNCED_TOO = "email.bounced"
#: The event of a bounce that closed the request (``states.transition``'s).
BOUNCED = f"status.{Status.BOUNCED.value}"
#: A party's link withdrawn for a new one (``signing.parties.move_parties`` to waiting: a staff resend).
RESENT = "party.waiting"


@dataclass(frozen=True)
class BounceResult:
    #: Requests moved to ``bounced`` by this report.
    bounced: tuple[int, ...]
    #: Requests flagged as complained by this report.
    complained: tuple[int, ...] = ()
    #: Requests already ``bounced`` by another party's returned invitation whose party this report adds.
    bounced_too: tuple[int, ...] = ()
    #: Texts queued with the link of requests whose mail bounced (``texting.texts_after_reports``): to send.
    texts: tuple[int, ...] = ()


@dataclass(frozen=True)
class ReturnedInvitation:
    """A party's invitation its mail server returned: the role, the address it went to (lower-cased) and why."""

    role: str
    email: str
    reason: str
    #: The whole error as recorded, when it came back in words of its own (the mail worker's SMTP refusal).
    said: str | None = None


@dataclass(frozen=True)
class _Returned:
    """A request a report is about, and the address its returned mail went to (lower-cased)."""

    request_id: int
    email: str


def _reported(session: Session, report: BounceReport, *, statuses: Iterable[Status]) -> list[_Returned]:
    """The requests a report is about: the one its Message-ID names (with the address that mail went to: another
    party's, when it was that party's invitation), else those in ``statuses`` whose recipient, or another party
    invited and not served by a digest, has the address."""
    if report.message_id:
        mid = report.message_id if report.message_id.startswith("<") else f"<{report.message_id}>"
        rows = session.execute(
            select(OutgoingMail.request_id, OutgoingMail.to_email).where(
                OutgoingMail.request_id.is_not(None), OutgoingMail.message_id == mid
            )
        )
        return [_Returned(request_id, (email or report.email or "").lower()) for request_id, email in rows]
    # Providers report the address in their own case (often lowered); the stored one is as the file spelt it.
    wanted = [s.value for s in statuses]
    own = select(SigningRequest.id).where(
        func.lower(SigningRequest.email) == report.email, SigningRequest.status.in_(wanted)
    )
    # Another party invited at the address (a line manager of some rows). Not a countersigner's: its digest is the
    # batch's mail, not one document's, and one dead address would bounce every document it waits on.
    others = (
        select(Party.request_id)
        .join(SigningRequest, SigningRequest.id == Party.request_id)
        .where(
            func.lower(Party.email) == report.email,
            Party.role != RECIPIENT_ROLE,
            Party.status.in_([PartyStatus.INVITED.value, PartyStatus.OPENED.value]),
            ~served_by_digest(),
            SigningRequest.status.in_(wanted),
        )
    )
    # Without a Message-ID a report names the address (``bounce_reports``).
    return [_Returned(request_id, report.email or "") for request_id in session.scalars(own.union(others))]


def _returned_roles(session: Session, returned: list[_Returned]) -> dict[int, str | None]:
    """Request → the role whose address the returned mail went to: ``recipient`` when it is the request's own, else
    the other party's of that address (a line manager's, an employer's); None when no party has it any more (a late
    bounce of an address corrected since)."""
    if not returned:
        return {}
    ids = [r.request_id for r in returned]
    own: dict[int, str] = {
        request_id: email
        for request_id, email in session.execute(
            select(SigningRequest.id, func.lower(SigningRequest.email)).where(SigningRequest.id.in_(ids))
        )
    }
    others = {
        (request_id, email): role
        for request_id, email, role in session.execute(
            select(Party.request_id, func.lower(Party.email), Party.role).where(
                Party.request_id.in_(ids), Party.role != RECIPIENT_ROLE, Party.email.is_not(None)
            )
        )
    }
    return {
        r.request_id: RECIPIENT_ROLE if own.get(r.request_id) == r.email else others.get((r.request_id, r.email))
        for r in returned
    }


def _suppress_reported(
    session: Session, report: BounceReport, returned: list[_Returned], *, source: str, now: datetime
) -> None:
    """Put the report's address (or, given only a Message-ID, the addresses its mails went to) on the suppression
    list: a line manager's returned invitation suppresses the manager's address, not the employee's."""
    # The requests first: their entries name the batch and request the news came from.
    batches: dict[int, int] = (
        {
            request_id: batch_id
            for request_id, batch_id in session.execute(
                select(SigningRequest.id, SigningRequest.batch_id).where(
                    SigningRequest.id.in_([r.request_id for r in returned])
                )
            )
        }
        if returned
        else {}
    )
    targets: list[tuple[str, int | None, int | None]] = [
        (r.email, batches.get(r.request_id), r.request_id) for r in returned if r.email
    ]
    if report.email:
        targets.append((report.email, None, None))
    seen = set()
    for email, batch_id, request_id in targets:
        if email.lower() not in seen:
            seen.add(email.lower())
            suppress(
                session,
                email=email,
                source=source,
                reason=report.reason,
                now=now,
                batch_id=batch_id,
                request_id=request_id,
            )


def record_report(session: Session, *, report: BounceReport, now: datetime) -> BounceResult:
    """Act on one bounce or complaint report. The caller commits."""
    if report.kind == BounceKind.COMPLAINT:
        return record_complaint(session, report=report, now=now)
    return record_bounce(session, report=report, now=now)


def record_complaint(session: Session, *, report: BounceReport, now: datetime) -> BounceResult:
    """Flag the requests a spam complaint is about, stop their reminders and suppress the address. The caller commits."""
    returned = _reported(session, report, statuses=DISPATCHED)
    ids = [r.request_id for r in returned]
    flagged = list(
        session.scalars(
            update(SigningRequest)
            .where(SigningRequest.id.in_(ids), SigningRequest.complained_at.is_(None))
            .values(complained_at=now)
            .returning(SigningRequest.id)
        )
    )
    if flagged:
        _system_events(
            session,
            flagged,
            kind="email.complained",
            details={"reason": report.reason[:500], "source": "webhook"},
            now=now,
        )
        cancel_queued(session, request_ids=flagged, kinds=[MailKind.REMINDER])
    _suppress_reported(session, report, returned, source="complaint", now=now)
    log(logger, logging.INFO, "complaint reported", request_ids=flagged, matched=len(ids))
    return BounceResult(bounced=(), complained=tuple(flagged))


def bounce_message(*, returned: Sequence[ReturnedInvitation]) -> str:
    """The request's error for its returned invitations, naming each party whose address it was, in the order they
    came back (kept in English like every stored error; the request's panel explains it in the reader's language)."""
    clauses = [
        r.said
        or (
            f"The recipient's mail server returned the invitation: {r.reason}"
            if r.role == RECIPIENT_ROLE
            else f"The {r.role}'s mail server returned the invitation to {r.email}: {r.reason}"
        )
        for r in returned
    ]
    return "; ".join(clauses[:1] + [clause[:1].lower() + clause[1:] for clause in clauses[1:]])


def standing_bounces(
    session: Session, *, request_ids: Iterable[int], lock: bool = False
) -> dict[int, list[ReturnedInvitation]]:
    """Each ``bounced`` request among ``request_ids`` → the returned invitations that keep it bounced, in the order
    they came back (the one that bounced it, then other parties' ``email.bounced``), less each party resent since.
    ``lock``: the requests' rows are locked first, so a bounce recorded and a resend deciding on it take turns."""
    ids = sorted(set(request_ids))
    own: dict[int, tuple[str, str | None]] = {}
    for part in slices(ids):
        query = select(SigningRequest.id, SigningRequest.email, SigningRequest.error_message).where(
            SigningRequest.id.in_(part), SigningRequest.status == Status.BOUNCED.value
        )
        rows = session.execute(query.order_by(SigningRequest.id).with_for_update() if lock else query)
        own.update((request_id, (email, error)) for request_id, email, error in rows)
    standing: dict[int, dict[str, ReturnedInvitation]] = {}
    for part in slices(sorted(own)):
        for request_id, kind, details in session.execute(
            select(Event.request_id, Event.type, Event.details)
            .where(Event.request_id.in_(part), Event.type.in_([BOUNCED, BOUNCED_TOO, RESENT]))
            .order_by(Event.id)
        ):
            details = details or {}
            role = details.get("role") or RECIPIENT_ROLE
            if kind == BOUNCED:
                standing[request_id] = {}  # bounced anew: what stood before was mended when it reopened
            if kind == RESENT:
                standing.get(request_id, {}).pop(role, None)
            elif request_id in standing:
                standing[request_id][role] = ReturnedInvitation(
                    role=role,
                    email=details.get("email") or (own[request_id][0] if role == RECIPIENT_ROLE else ""),
                    reason=details.get("reason") or details.get("error") or "",
                    # A bounce the mail worker saw at the SMTP exchange kept its whole error.
                    said=None if "reason" in details else details.get("error"),
                )
    # A request bounced before its moves were events: its recipient's, as it always was.
    fallback = {
        request_id: [ReturnedInvitation(role=RECIPIENT_ROLE, email=email, reason="", said=error)]
        for request_id, (email, error) in own.items()
    }
    return {**fallback, **{rid: list(found.values()) for rid, found in standing.items()}}


def _bounced_too(
    session: Session, request_ids: list[int], *, returned: ReturnedInvitation, details: dict[str, Any], now: datetime
) -> list[int]:
    """Record ``returned`` on the requests among ``request_ids`` another party's returned invitation bounced already:
    an ``email.bounced`` event naming the role and address, and the error naming every party whose bounce stands
    (a bounce told twice is left). The ids of the requests it was recorded on."""
    standing = standing_bounces(session, request_ids=request_ids, lock=True)
    added = {
        request_id: [*bounces, returned]
        for request_id, bounces in standing.items()
        if returned.role not in {b.role for b in bounces}
    }
    if not added:
        return []
    # Locked in ``bounced`` above: the errors follow the events, and no move needs their compare-and-set.
    session.execute(
        update(SigningRequest),
        [{"id": request_id, "error_message": bounce_message(returned=b)} for request_id, b in added.items()],
    )
    _system_events(session, sorted(added), kind=BOUNCED_TOO, details=details, now=now)
    return sorted(added)


def _system_events(
    session: Session, request_ids: Sequence[int], *, kind: str, details: dict[str, Any], now: datetime
) -> None:
    """One event of ``kind`` by the system on each of the requests, in statements of a bounded size."""
    for part in slices(request_ids):
        session.execute(
            insert(Event).from_select(
                ["request_id", "batch_id", "type", "created_at", "actor", "details"],
                select(
                    SigningRequest.id,
                    SigningRequest.batch_id,
                    literal(kind, String),
                    literal(now, UTCDateTime),
                    literal("system", String),
                    literal(details, JSON),
                ).where(SigningRequest.id.in_(part)),
            )
        )


def record_refused(session: Session, *, request_id: int, email: str, reason: str, kind: str, now: datetime) -> str:
    """A mail of the request refused for good at the SMTP exchange: the request bounces as a provider's report would
    bounce it (from ``BOUNCEABLE``), naming the party whose address it was. Returns the error, in the mail worker's
    words, for the mail's row; the caller suppresses the address and commits."""
    email = email.lower()
    role = _returned_roles(session, [_Returned(request_id, email)])[request_id]
    named = role or RECIPIENT_ROLE
    said = (
        f"The recipient's mail server refused the address: {reason}"
        if named == RECIPIENT_ROLE
        else f"The {named}'s mail server refused the address {email}: {reason}"
    )[:2000]
    details = {"error": said[:500], "kind": kind, "role": named, "email": email}
    returned = ReturnedInvitation(role=named, email=email, reason=reason[:500], said=said[:500])
    _bounce(
        session, [request_id], returned=returned, error=said, details=details, party_known=role is not None, now=now
    )
    return said


def _bounce(
    session: Session,
    request_ids: Sequence[int],
    *,
    returned: ReturnedInvitation,
    error: str,
    details: dict[str, Any],
    party_known: bool,
    now: datetime,
) -> tuple[tuple[int, ...], list[int]]:
    """Bounce the requests for ``returned`` by compare-and-set (``error`` and ``details`` on the move); those another
    party's returned invitation bounced already name this one too (``_bounced_too``), when a party has the address
    (``party_known``). The requests moved, and those it was added to."""
    moved = transition(
        session, request_ids, frm=BOUNCEABLE, to=Status.BOUNCED, now=now, error_message=error, details=details
    ).won
    rest = sorted(set(request_ids) - set(moved))
    also = _bounced_too(session, rest, returned=returned, details=details, now=now) if party_known and rest else []
    return moved, also


def _mark_returned(session: Session, request_ids: Sequence[int], *, email: str, error: str) -> None:
    """The requests' mails sent to ``email`` came back: marked ``bounced`` with ``error``."""
    for part in slices(sorted(request_ids)):
        session.execute(
            update(OutgoingMail)
            .where(
                OutgoingMail.request_id.in_(part),
                OutgoingMail.status == MailStatus.SENT,
                func.lower(OutgoingMail.to_email) == email,
            )
            .values(status=MailStatus.BOUNCED, error=error)
        )


def record_bounce(session: Session, *, report: BounceReport, now: datetime) -> BounceResult:
    """Mark the request the bounced mail was for (by Message-ID, else every waiting request of the address), its
    error and event naming the party whose address it was; one bounced already by another party's stays so, this
    party named too. The caller commits."""
    returned = _reported(session, report, statuses=(*BOUNCEABLE, Status.BOUNCED))
    if report.permanent:
        _suppress_reported(session, report, returned, source="bounce", now=now)
    # Where the batch texts on a bounce, the recipient's link goes by text instead: those requests do not bounce.
    texts: dict[int, int] = {}
    for email in {r.email for r in returned}:
        fell = texting.texts_after_reports(
            session,
            request_ids=[r.request_id for r in returned if r.email == email],
            email=email,
            reason=report.reason,
            now=now,
        )
        _mark_returned(session, list(fell), email=email, error=f"Bounced: {report.reason}"[:2000])
        texts.update(fell)
    returned = [r for r in returned if r.request_id not in texts]
    roles = _returned_roles(session, returned)
    # Grouped by the party and address returned: each group's requests get its error in one move.
    groups: dict[tuple[str | None, str], list[int]] = {}
    for r in returned:
        groups.setdefault((roles[r.request_id], r.email), []).append(r.request_id)
    won: list[int] = []
    too: list[int] = []
    batch_ids: set[int] = set()
    for (role, email), ids in groups.items():
        # An address no party has any more still bounces a waiting request as its recipient's (as it always did);
        # on a bounced one it names nobody whose bounce could stand.
        named = ReturnedInvitation(role=role or RECIPIENT_ROLE, email=email, reason=report.reason)
        reason = bounce_message(returned=[named])
        details = {"reason": report.reason[:500], "source": "webhook", "role": named.role, "email": email}
        moved, also = _bounce(
            session, ids, returned=named, error=reason, details=details, party_known=role is not None, now=now
        )
        _mark_returned(session, [*moved, *also], email=email, error=reason)
        for part in slices(moved):
            batch_ids.update(session.scalars(select(SigningRequest.batch_id).where(SigningRequest.id.in_(part))))
        won += moved
        too += also
    if won:
        # A batch awaiting signatures with a late bounce did not fully succeed after all (or has nobody left).
        refresh_batch_statuses(session, now=now, batch_ids=batch_ids)
    log(logger, logging.INFO, "bounce reported", request_ids=won, bounced_too=too, matched=len(returned))
    return BounceResult(bounced=tuple(won), bounced_too=tuple(too), texts=tuple(texts.values()))

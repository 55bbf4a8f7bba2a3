"""A request's timeline on the dashboard: its events and mails, oldest first, in words, with what went wrong and what
to do about it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flask_babel import lazy_gettext as _l
from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.batches.bounces import BOUNCED_TOO, standing_bounces
from bulksign.batches.dashboard import STATUS_LABELS
from bulksign.batches.field_values import GivenValue, request_values
from bulksign.batches.party_progress import role_label
from bulksign.models import RECIPIENT_ROLE, Event, OutgoingMail, Party, SigningRequest
from bulksign.models.status import Status
from bulksign.signing.digests import served_by_digest
from bulksign.signing.parties import PartyView, parties_of

#: Words for timeline entries (event types and mail kinds); unknown ones show as they are.
EVENT_LABELS = {
    **{f"status.{k}": v for k, v in STATUS_LABELS.items()},
    "email.opened": _l("invitation mail opened"),
    "page.opened": _l("signing page opened"),
    "email.changed": _l("email address changed"),
    "address_change.requested": _l("address change asked for, waiting for approval"),
    "address_change.approved": _l("address change approved"),
    "address_change.rejected": _l("address change rejected"),
    "address_change.withdrawn": _l("address change withdrawn"),
    "correction.asked": _l("correction asked for, waiting for approval"),
    "correction.applied": _l("corrected: a new version of the document"),
    "correction.rejected": _l("correction rejected"),
    "mail.correction_notice": _l("correction notice mail"),
    BOUNCED_TOO: _l("party's invitation bounced"),
    "link.issued": _l("new signing link issued"),
    "mail.invitation": _l("invitation mail"),
    "mail.reminder": _l("reminder mail"),
    "mail.confirmation": _l("confirmation mail"),
    "mail.decline_notice": _l("decline notice mail"),
    "data.purged": _l("documents and personal data deleted (retention or erasure)"),
    "party.invited": _l("party invited"),
    "party.opened": _l("party opened the document"),
    "party.signed": _l("party signed"),
    "party.declined": _l("party declined"),
    "party.waiting": _l("party's link withdrawn"),
}

#: What went wrong and what to do, per state that needs a person.
ADVICE: dict[str, object] = {
    Status.FAILED: _l(
        "The document could not be prepared or the invitation could not be sent. "
        "Retry it; if it fails again, check the recipient's data and the template."
    ),
    Status.BOUNCED: _l(
        "The invitation could not be delivered to this address. Fix the email address, then resend with a new link."
    ),
    Status.EXPIRED: _l("The deadline passed before the recipient signed. Resend with a new link to give more time."),
    Status.DECLINED: _l(
        'The document was declined. Contact whoever declined; if something in it was wrong, use "Correct and '
        'resend" below: every party signs the corrected version. If nothing needs changing, resend with a new link.'
    ),
}


@dataclass(frozen=True)
class TimelineEntry:
    at: datetime
    kind: str  # "event" or "mail"
    title: str
    actor: str = ""
    detail: str = ""


@dataclass(frozen=True)
class Timeline:
    request: SigningRequest
    entries: tuple[TimelineEntry, ...]
    #: The error in plain words, when the request is stuck; None otherwise.
    problem: str | None
    #: What the user can do about it.
    advice: object | None
    mails: tuple[OutgoingMail, ...] = field(default_factory=tuple)
    #: Who signs it, by step, when anyone besides the recipient does; () for a single-signer request.
    parties: tuple[PartyView, ...] = field(default_factory=tuple)
    #: What its signers filled in, in the template's order.
    given: tuple[GivenValue, ...] = field(default_factory=tuple)
    #: The roles whose party its countersigner's digest serves: reminded by the digest, with no link of its own.
    by_digest: frozenset[str] = frozenset()
    #: The parties of a request several sign whose returned invitation keeps it bounced (``standing_bounces``), in
    #: the order they came back: each is resent to (another role from its party's line, the recipient below).
    bounced_roles: tuple[str, ...] = ()

    @property
    def party_bounced(self) -> bool:
        """Only other parties' bounces stand: a new link for the recipient would mend nothing."""
        return bool(self.bounced_roles) and RECIPIENT_ROLE not in self.bounced_roles


def timeline(session: Session, *, batch_id: int, request_id: int, language: str | None = None) -> Timeline | None:
    """A request's events and mails, oldest first, with the error and advice, its parties when it has several (and
    which its countersigner's digest serves, and whose bounce stands) and what its signers filled in (5 queries, 7
    with values, one more with several parties, two more when bounced), or None; values formatted in ``language``
    (the reader's; default: the batch's)."""
    req = session.scalar(
        select(SigningRequest).where(SigningRequest.id == request_id, SigningRequest.batch_id == batch_id)
    )
    if req is None:
        return None
    events = session.scalars(
        select(Event).where(Event.request_id == request_id).order_by(Event.created_at, Event.id).limit(500)
    ).all()
    mails = session.scalars(
        select(OutgoingMail)
        .where(OutgoingMail.request_id == request_id)
        .order_by(OutgoingMail.created_at, OutgoingMail.id)
        .limit(200)
    ).all()
    entries = [
        TimelineEntry(at=e.created_at, kind="event", title=e.type, actor=e.actor, detail=_event_detail(e.details))
        for e in events
    ]
    entries += [
        TimelineEntry(
            at=m.created_at,
            kind="mail",
            title=f"mail.{m.kind}",
            detail=f"{m.status}" + (f": {m.error}" if m.error else ""),
        )
        for m in mails
    ]
    entries.sort(key=lambda entry: entry.at)
    problem = None
    if req.status in ADVICE:
        failed_mail = next((m for m in reversed(mails) if m.error), None)
        problem = req.error_message or (failed_mail.error if failed_mail else None) or req.decline_reason
    parties = parties_of(session, req)
    multiple = [p.role for p in parties] not in ([], [RECIPIENT_ROLE])
    bounced_roles: tuple[str, ...] = ()
    if multiple and req.status == Status.BOUNCED:
        bounced_roles = tuple(b.role for b in standing_bounces(session, request_ids=[req.id]).get(req.id, ()))
    advice = None if req.purged_at else ADVICE.get(req.status)
    if advice is not None and len(bounced_roles) > 1:
        advice = _l(
            "The invitations to %(roles)s could not be delivered. Fix each one's address, then resend to each: the "
            "request stays bounced until the last of them is resent, then goes on where it stood, the other "
            "signatures kept.",
            roles=", ".join(str(role_label(role, version=req.batch.template_version)) for role in bounced_roles),
        )
    elif advice is not None and bounced_roles and bounced_roles != (RECIPIENT_ROLE,):
        advice = _l(
            "The invitation to the %(role)s could not be delivered. Fix that party's address under Parties, then "
            "resend to them: the request goes on where it stood, the other signatures kept.",
            role=role_label(bounced_roles[0], version=req.batch.template_version),
        )
    return Timeline(
        request=req,
        entries=tuple(entries),
        problem=problem,
        advice=advice,
        bounced_roles=bounced_roles,
        mails=tuple(mails),
        parties=tuple(parties) if multiple else (),
        given=request_values(session, batch_id=batch_id, request_id=request_id, language=language),
        by_digest=frozenset(
            session.scalars(select(Party.role).where(Party.request_id == request_id, served_by_digest()))
            if multiple
            else ()
        ),
    )


def _event_detail(details: dict[str, Any] | None) -> str:
    # Details are written by the app, never secrets; still, anything that looks like a link or token stays out.
    if not details:
        return ""
    secret_words = ("token", "nonce", "link", "url", "secret")
    return ", ".join(f"{k}: {v}" for k, v in details.items() if not any(word in k.lower() for word in secret_words))[
        :500
    ]

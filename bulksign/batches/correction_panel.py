"""What a request's panel shows of corrections: the form's current values and people, a correction waiting for
approval (and whether this user decides it), and the versions made so far."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.batches.address_changes import needs_approval
from bulksign.batches.approval import is_approver
from bulksign.batches.correction_notices import changed_lines
from bulksign.batches.corrections import CORRECTABLE, OWN_COLUMNS, corrections_of
from bulksign.doc_templates.template_parties import party_label
from bulksign.models import RECIPIENT_ROLE, Batch, Correction, Party, SigningRequest, User
from bulksign.models.corrections import CorrectionStatus
from bulksign.models.status import BatchStatus


@dataclass(frozen=True)
class Person:
    """A party as the form shows it: its label, name and address."""

    role: str
    label: str
    name: str
    email: str


@dataclass(frozen=True)
class Made:
    """A correction as the panel lists it."""

    correction: Correction
    asked_by: str
    changed: tuple[str, ...]


@dataclass(frozen=True)
class CorrectionPanel:
    #: The request may be corrected now (out to its parties, not complete, not purged).
    correctable: bool
    #: A correction by this user waits for approval (the form says so and asks for the same note).
    held: bool
    values: tuple[tuple[str, str], ...]
    people: tuple[Person, ...]
    waiting: Made | None
    #: This user may approve or reject the waiting one (an approver who did not ask for it).
    may_decide: bool
    history: tuple[Made, ...]


def correction_panel(session: Session, *, request: SigningRequest, user: User) -> CorrectionPanel:
    batch = request.batch
    language = batch.language or "en"
    made = corrections_of(session, request_id=request.id)
    shown = [_made(c, batch) for c in made if c.status in (CorrectionStatus.PENDING, CorrectionStatus.APPLIED)]
    waiting = next((m for m in shown if m.correction.status == CorrectionStatus.PENDING), None)
    approver = is_approver(session, team_id=batch.team_id, user=user)
    parties = session.scalars(select(Party).where(Party.request_id == request.id).order_by(Party.step, Party.role))
    people = [
        Person(
            role=p.role,
            label=party_label(batch.template_version, role=p.role, language=language),
            name=(request.name if p.role == RECIPIENT_ROLE else p.name) or "",
            email=(request.email if p.role == RECIPIENT_ROLE else p.email) or "",
        )
        for p in parties
    ]
    if not people:
        label = party_label(batch.template_version, role=RECIPIENT_ROLE, language=language)
        people = [Person(RECIPIENT_ROLE, label, request.name or "", request.email or "")]
    data = request.data or {}
    party_columns = {f"{p.role}_{what}" for p in people if p.role != RECIPIENT_ROLE for what in ("email", "name")}
    return CorrectionPanel(
        correctable=request.status in CORRECTABLE
        and request.purged_at is None
        and batch.status != BatchStatus.CANCELLED,
        held=needs_approval(session, batch=batch) and not approver,
        values=tuple((k, "" if v is None else str(v)) for k, v in data.items() if k not in OWN_COLUMNS | party_columns),
        people=tuple(people),
        waiting=waiting,
        may_decide=waiting is not None and approver and waiting.correction.requested_by_id != user.id,
        history=tuple(m for m in shown if m.correction.status == CorrectionStatus.APPLIED),
    )


def _made(correction: Correction, batch: Batch) -> Made:
    who = correction.requested_by.shown_name if correction.requested_by is not None else "—"
    return Made(correction, who, tuple(changed_lines(batch, correction.changes)))

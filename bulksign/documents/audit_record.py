"""What a signed document's audit certificate records: the document's facts, its request's events in words and
the values signers filled, read once from the database, in the recipient's language and time zone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.core.localtime import zone_of
from bulksign.core.messages import N_
from bulksign.documents.signature_box import SignatureBox
from bulksign.models import Batch, Document, Event, SigningRequest


@dataclass(frozen=True)
class AuditLine:
    at: datetime
    #: Translated when printed (``N_``), or an unknown event type as it is.
    label: N_ | str
    ip: str
    user_agent: str


@dataclass(frozen=True)
class AuditRecord:
    """Everything the signature block and the audit certificate print (never the batch's internal name)."""

    document_name: str
    batch_id: int
    request_id: int
    recipient_name: str
    recipient_email: str
    signer_name: str
    signer_ip: str
    signed_at: datetime
    original_sha256: str
    lines: tuple[AuditLine, ...]
    #: The recipient's language and time zone (the batch's): the record speaks to them.
    language: str = "en"
    timezone: str = "UTC"
    #: How the signer proved who they are beyond the link (a confirmed one-time code); None: only the link.
    identity: N_ | None = None
    #: The same for each other party of a document several sign that confirmed a code: role → its identity check.
    identities: dict[str, N_] = field(default_factory=dict)
    #: A document signed by several parties (``signing.routing``): each of them, in the order they signed; empty
    #: for a single-signer document, whose signer is the fields above.
    parties: tuple[PartyFacts, ...] = ()
    #: What the signers filled in, in the document's order (``FilledField``).
    fields: tuple[FilledField, ...] = ()
    #: The boxes of fields the signers gave no value for (``signing.steps.struck_boxes``): struck through.
    struck: tuple[SignatureBox, ...] = ()
    #: Each party's role → the party as the record's reader calls it (its label in ``language``).
    role_labels: Mapping[str, str] = field(default_factory=dict)

    def party(self, role: str) -> str:
        """A party as the certificate names it: its label, never its key."""
        return self.role_labels.get(role, role)


@dataclass(frozen=True)
class PartyFacts:
    """One party of a document signed by several, as its audit certificate lists it."""

    role: str
    name: str
    email: str
    signer_name: str
    signed_at: datetime | None
    signer_ip: str
    #: How the party proved who they are beyond the link; None: only the link.
    identity: N_ | None = None


@dataclass(frozen=True)
class FilledField:
    """A value a signer gave for one of the document's fields: stamped in its box before the seal and
    listed on the audit certificate."""

    label: str
    #: As printed (``doc_templates.fields.shown_value``): a checkbox's translated when printed; "" when left empty.
    text: N_ | str
    #: A checkbox's value, drawn as a ticked or an empty box; None for every other type.
    ticked: bool | None
    #: Where the document shows the field; None: its mark was under a condition the row skipped (listed only).
    box: SignatureBox | None
    #: Who gave it (the party's role, name and address), when and from where.
    role: str
    name: str
    email: str
    entered_at: datetime
    entered_ip: str
    #: An attachment's sha256 and size in bytes; None for every other type.
    sha256: str | None = None
    size: int | None = None
    #: An attachment's sha256 as the signer gave it, when its active content was taken out; None otherwise.
    original_sha256: str | None = None


#: Event type → label on the audit certificate; other types print as they are.
EVENT_LABELS = {
    "request.created": N_("Created"),
    "status.generating": N_("Document generation started"),
    "status.generated": N_("Document generated"),
    "status.sending": N_("Invitation being sent"),
    "status.sent": N_("Sent"),
    "email.opened": N_("Email opened"),
    "status.opened": N_("Page opened"),
    "page.opened": N_("Page opened again"),
    "status.signed": N_("Signed"),
    # A party of a document several sign (``signing.routing``): ``%(role)s`` from the event's details.
    "party.invited": N_("Invitation sent to %(role)s"),
    "party.opened": N_("Page opened by %(role)s"),
    "party.signed": N_("Signed by %(role)s"),
    "party.declined": N_("Declined by %(role)s"),
    "link.issued": N_("Signing link issued"),
    # One-time codes (``one_time_codes``): ``%(…)s`` are filled from the event's details.
    "code.sent.email": N_("One-time code sent by email to %(to)s"),
    "code.sent.sms": N_("One-time code sent by SMS to %(to)s"),
    "code.failed": N_("Wrong one-time code (%(tries_left)s tries left)"),
    "code.verified": N_("One-time code confirmed"),
    # A countersigner's code, confirmed once for all their documents (``link_proofs.proof_event``).
    "code.verified.countersign.email": N_("One-time code sent by email to %(to)s confirmed on the countersigning page"),
    "code.verified.countersign.sms": N_("One-time code sent by SMS to %(to)s confirmed on the countersigning page"),
    "code.locked": N_("One-time code locked: too many wrong tries"),
}


def _label(event: Event, *, role_labels: Mapping[str, str]) -> N_ | str:
    """The event's line on the certificate (a party named by its label); a one-time code's lines say where it went
    and the tries left."""
    details = event.details or {}
    if event.type.startswith("party.") and event.type in EVENT_LABELS:
        role = details.get("role", "")
        return N_(EVENT_LABELS[event.type].msgid, role=role_labels.get(role, role))
    if not event.type.startswith("code."):
        return EVENT_LABELS.get(event.type, event.type)
    key = event.type
    if event.type == "code.sent":
        key = f"code.sent.{details.get('channel')}"
    elif event.type == "code.verified" and details.get("countersign"):
        key = f"code.verified.countersign.{details.get('channel')}"
    label = EVENT_LABELS.get(key)
    return N_(label.msgid, **details) if label is not None else event.type


def local_time(at: datetime, zone: str, *, short: bool = False) -> str:
    """A moment in the recipient's time zone, with its UTC offset so that it is exact anywhere
    (``short``: the offset without the zone's name, for the narrow signature block)."""
    local = at.astimezone(ZoneInfo(zone))
    if zone == "UTC":
        return f"{local:%Y-%m-%d %H:%M:%S} UTC"
    offset = local.strftime("%z")
    offset = f"UTC{offset[:3]}:{offset[3:]}"
    return f"{local:%Y-%m-%d %H:%M:%S} {offset}" if short else f"{local:%Y-%m-%d %H:%M:%S} {zone} ({offset})"


def audit_record(
    session: Session, request: SigningRequest, original: Document, *, role_labels: Mapping[str, str] | None = None
) -> AuditRecord:
    """The facts and events of ``request`` as the audit certificate prints them; ``role_labels``: each party's role
    → its label in the batch's language (the domain's ``party_labels``)."""
    role_labels = dict(role_labels or {})
    batch: Batch = request.batch
    events = session.scalars(
        select(Event).where(Event.request_id == request.id).order_by(Event.created_at, Event.id)
    ).all()
    lines = [
        AuditLine(
            at=e.created_at, label=_label(e, role_labels=role_labels), ip=e.ip or "", user_agent=e.user_agent or ""
        )
        for e in events
    ]
    types = {e.type for e in events}
    if "request.created" not in types:
        lines.insert(0, AuditLine(at=request.created_at, label=EVENT_LABELS["request.created"], ip="", user_agent=""))
    if request.email_opened_at and "email.opened" not in types:
        lines.append(AuditLine(at=request.email_opened_at, label=EVENT_LABELS["email.opened"], ip="", user_agent=""))
    lines.sort(key=lambda line: line.at)
    verified_roles = {r for e in events if e.type == "code.verified" and (r := e.details.get("role")) is not None}
    if request.signed_at is None:
        raise ValueError(f"request {request.id} is not signed: it has no audit record yet")
    return AuditRecord(
        document_name=document_title(batch),
        batch_id=batch.id,
        request_id=request.id,
        recipient_name=request.name or "",
        recipient_email=request.email,
        signer_name=request.signer_name or request.name or "",
        signer_ip=request.signer_ip or "",
        signed_at=request.signed_at,
        original_sha256=original.sha256,
        lines=tuple(lines),
        language=batch.language or "en",
        timezone=zone_of(batch).key,
        identity=_identity(events, zone=zone_of(batch).key),
        identities={
            role: found
            for role in verified_roles
            if (found := _identity(events, zone=zone_of(batch).key, role=role)) is not None
        },
        role_labels=role_labels,
    )


def _identity(events: Sequence[Event], *, zone: str, role: str | None = None) -> N_ | None:
    """The last one-time code the recipient (or the party ``role``) confirmed before signing: where it went and
    when it was confirmed."""
    verified = [e for e in events if e.type == "code.verified" and (e.details or {}).get("role") == role]
    if not verified:
        return None
    facts = verified[-1].details
    if "to" not in facts:
        # A request's own code, issued before it could be confirmed: its ``code.sent`` is in the same trail. (A
        # countersigner's says where it went itself: its ``code.sent`` is the link's.)
        code_id = facts.get("code_id")
        facts = next(e.details for e in events if e.type == "code.sent" and e.details.get("code_id") == code_id)
    when = local_time(verified[-1].created_at, zone)
    if facts.get("channel") == "sms":
        return N_("One-time code sent by SMS to %(to)s, confirmed %(when)s", to=facts.get("to"), when=when)
    return N_("One-time code sent by email to %(to)s, confirmed %(when)s", to=facts.get("to"), when=when)


def document_title(batch: Batch) -> str:
    """What recipients call the document: its template's name, never the batch's internal name."""
    template = batch.template_version.template if batch.template_version else None
    return template.name if template else ""

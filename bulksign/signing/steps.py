"""A request's steps: the document with the signatures of the steps finished so far, and the ``advance`` job that
stores it and invites the next step's parties."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from flask import Flask
from sqlalchemy import and_, exists, select
from sqlalchemy.orm import Session, aliased

from bulksign.core.localtime import zone_of
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.doc_templates.fields import FieldSettings, shown_value, template_fields
from bulksign.doc_templates.roles import pdf_role_places
from bulksign.doc_templates.template_parties import party_labels
from bulksign.documents.audit_record import AuditRecord, FilledField, PartyFacts, document_title
from bulksign.documents.signature_box import SIGNATURE_VARIABLE, SignatureBox, find_signature_boxes, mark_indexes
from bulksign.documents.signed_pdf import PartyBlock, stamp_parties
from bulksign.documents.storage import Storage
from bulksign.models import RECIPIENT_ROLE, Batch, Document, FieldValue, Party, SigningRequest
from bulksign.models.parties import PartyStatus
from bulksign.models.requests import version_suffix
from bulksign.models.status import Status
from bulksign.signing.parties import step_not_started
from bulksign.signing.routing import (
    current_step,
    invite_parties,
    lock_request,
    parties_in_order,
    party_person,
)

logger = logging.getLogger(__name__)

#: The kind of a document version holding the signatures of the steps finished so far (unsealed).
STEP_KIND = "step"


def step_key(request: SigningRequest, step: int) -> str:
    return f"batches/{request.batch_id}/requests/{request.id}/step-{step}{version_suffix(request.document_version)}.pdf"


def current_document(session: Session, request_id: int) -> Document | None:
    """What the next party reads: the newest version with the earlier steps' signatures, else the original."""
    return session.scalar(
        select(Document)
        .where(Document.request_id == request_id, Document.kind.in_([STEP_KIND, "original"]))
        .order_by(Document.id.desc())
        .limit(1)
    )


def party_boxes(*, request: SigningRequest, original: Document, pdf: bytes) -> dict[str, SignatureBox]:
    """Each role's place in the rendered document: the recipient's as stored at render, the others' found by their
    mark's shade (``signature_box.mark_indexes``); a role missing here signs on the signature page."""
    version = request.batch.template_version
    if version.kind == "pdf":  # its fields and placed boxes say where, the same for every document
        return {**pdf_role_places(version), **_stored_recipient_box(original)}
    indexes = mark_indexes(version.variables or ())
    found = find_signature_boxes(pdf, count=max(indexes.values()) + 1) if len(indexes) > 1 else ()
    boxes: dict[str, SignatureBox] = {}
    for variable, index in indexes.items():
        box = found[index] if index < len(found) else None
        if variable == SIGNATURE_VARIABLE or box is None:
            continue
        boxes[variable.removeprefix("signature_")] = box
    return {**boxes, **_stored_recipient_box(original)}


def _stored_recipient_box(original: Document) -> dict[str, SignatureBox]:
    """The recipient's place as the render stored it with the original (none: the signature page)."""
    recipient = SignatureBox.from_json(original.signature_box)
    return {RECIPIENT_ROLE: recipient} if recipient is not None else {}


def party_blocks(
    parties: Sequence[Party], boxes: dict[str, SignatureBox], *, labels: Mapping[str, str]
) -> list[PartyBlock]:
    """The signed parties' blocks, in the order they signed, each under its label (``labels``: role → label)."""
    signed = [(p, p.signed_at) for p in parties if p.status == PartyStatus.SIGNED and p.signed_at is not None]
    return [
        PartyBlock(
            label=labels.get(p.role, p.role),
            signer_name=p.signer_name or "",
            signed_at=signed_at,
            signer_ip=p.signer_ip or "",
            image_png=p.signature_image,
            box=boxes.get(p.role),
        )
        for p, signed_at in sorted(signed, key=lambda pair: (pair[1], pair[0].step, pair[0].role))
    ]


def party_facts(parties: Sequence[Party], *, identities: Mapping[str, N_] | None = None) -> tuple[PartyFacts, ...]:
    """Every party for the audit certificate, by step, in the order they signed; ``identities``: role → the
    identity check of each party that confirmed a one-time code (``AuditRecord.identities``)."""
    ordered = sorted(parties, key=lambda p: (p.step, p.signed_at or datetime.max.replace(tzinfo=None), p.role))
    facts = []
    for p in ordered:
        email, name = party_person(p)
        facts.append(
            PartyFacts(
                role=p.role,
                name=name,
                email=email,
                signer_name=p.signer_name or "",
                signed_at=p.signed_at,
                signer_ip=p.signer_ip or "",
                identity=(identities or {}).get(p.role),
            )
        )
    return tuple(facts)


def filled_fields(
    session: Session, *, request: SigningRequest, original: Document, parties: Sequence[Party]
) -> tuple[FilledField, ...]:
    """Every value given for the request's fields (``FieldValue``), in the document's order, as its signed PDF stamps
    and lists them: shown in the batch's language (``fields.shown_value``), at the box the original keeps for it,
    with the party who gave it."""
    batch = request.batch
    settings = {f.name: f for f in template_fields(batch.template_version)}
    order = {name: i for i, name in enumerate(settings)}
    values = session.scalars(select(FieldValue).where(FieldValue.request_id == request.id)).all()
    boxes = original.field_boxes or {}
    # The recipient is the request's own person, with or without a party row (requests made before parties had none).
    people = {RECIPIENT_ROLE: (request.email, request.name or ""), **{p.role: party_person(p) for p in parties}}
    filled = []
    for value in sorted(values, key=lambda v: (order.get(v.name, len(order)), v.name)):
        field = settings.get(value.name) or FieldSettings(name=value.name)
        email, name = people.get(value.role, ("", ""))
        filled.append(
            FilledField(
                label=field.shown_label,
                text=shown_value(field, value.value, language=batch.language or "en"),
                ticked=value.value == "true" if field.type == "checkbox" else None,
                box=SignatureBox.from_json(boxes.get(value.name)),
                role=value.role,
                name=name,
                email=email,
                entered_at=value.entered_at,
                entered_ip=value.entered_ip or "",
                sha256=value.sha256,
                size=value.size,
                original_sha256=value.original_sha256,
            )
        )
    return tuple(filled)


def struck_boxes(
    session: Session, *, request: SigningRequest, original: Document, parties: Sequence[Party]
) -> tuple[SignatureBox, ...]:
    """The boxes the document shows for fields of parties who signed that hold no value (left empty, or under a
    condition that did not hold): struck through, so nothing can be written in them once signed. A checkbox left
    unticked is an answer (its empty square) and is not struck; a later party's fields wait for them."""
    signed = {p.role for p in parties if p.signed_at is not None}
    if request.signed_at is not None and not parties:
        signed.add(RECIPIENT_ROLE)
    settings = {f.name: f for f in template_fields(request.batch.template_version)}
    rows = session.execute(
        select(FieldValue.name, FieldValue.value, FieldValue.sha256).where(FieldValue.request_id == request.id)
    )
    given = {name for name, value, sha256 in rows if value or sha256}
    struck = []
    for name, stored in sorted((original.field_boxes or {}).items()):
        field = settings.get(name) or FieldSettings(name=name)
        if name in given or field.type == "checkbox" or field.role not in signed:
            continue
        if (box := SignatureBox.from_json(stored)) is not None:
            struck.append(box)
    return tuple(struck)


def store_step_version(
    session: Session, *, request: SigningRequest, parties: Sequence[Party], step: int, storage: Storage, now: datetime
) -> Document | None:
    """The document with the signatures of every step before ``step``, stored as a new version (once: a repeat
    finds it); the original stays as rendered. None before the first step. The caller commits."""
    if step == 0:
        return None
    key = step_key(request, step)
    existing = session.scalar(select(Document).where(Document.request_id == request.id, Document.storage_key == key))
    if existing is not None:
        return existing
    original = _original(session, request.id)
    stamped = stamped_so_far(
        session,
        request=request,
        original=original,
        parties=parties,
        signers=[p for p in parties if p.step < step],
        storage=storage,
    )
    storage.put(key, stamped, content_type="application/pdf")
    document = Document(
        request_id=request.id,
        kind=STEP_KIND,
        storage_key=key,
        sha256=hashlib.sha256(stamped).hexdigest(),
        size=len(stamped),
        content_type="application/pdf",
        created_at=now,
        signature_box=original.signature_box,
        field_boxes=original.field_boxes,
    )
    session.add(document)
    session.flush()
    return document


def _original(session: Session, request_id: int) -> Document:
    return session.scalars(
        select(Document)
        .where(Document.request_id == request_id, Document.kind == "original")
        .order_by(Document.id.desc())
        .limit(1)
    ).one()


def stamped_so_far(
    session: Session,
    *,
    request: SigningRequest,
    parties: Sequence[Party],
    signers: Sequence[Party],
    storage: Storage,
    original: Document | None = None,
) -> bytes:
    """The original with the blocks of ``signers`` and the values given so far (unsealed): a step's version, or a
    party's own copy while others still sign."""
    original = original or _original(session, request.id)
    data = storage.get(original.storage_key)
    batch = request.batch
    return stamp_parties(
        data,
        party_blocks(
            signers, party_boxes(request=request, original=original, pdf=data), labels=batch_party_labels(batch)
        ),
        document_name=document_title(batch),
        language=batch.language or "en",
        zone=zone_of(batch).key,
        # What the parties who signed filled in: only they have given values yet.
        fields=filled_fields(session, request=request, original=original, parties=parties),
        struck=struck_boxes(session, request=request, original=original, parties=signers),
    )


def batch_party_labels(batch: Batch) -> dict[str, str]:
    """Each party of the batch's template → its label in the batch's language, as its documents name it."""
    return party_labels(batch.template_version, language=batch.language or "en")


def with_parties(record: AuditRecord, parties: Sequence[Party]) -> AuditRecord:
    """The audit record of a request several signed, listing every party."""
    # The recipient's codes are the request's (its ``identity``); each other party's carry its role.
    identities = {**record.identities, **({RECIPIENT_ROLE: record.identity} if record.identity else {})}
    return replace(record, parties=party_facts(parties, identities=identities))


class Advance(StrEnum):
    #: The next step's parties were invited.
    INVITED = "invited"
    #: No step to start: a repeat, or the request is not open.
    NOTHING = "nothing"


@dataclass(frozen=True)
class Advanced:
    status: Advance
    request_id: int
    mail_ids: tuple[int, ...] = ()


def advance(session: Session, *, request_id: int, now: datetime, storage: Storage, app: Flask) -> Advanced:
    """The ``advance`` job's one step: for an open request whose step finished, store the document with every
    signature so far as a new version (once per step), then invite the next step's parties. Commits; safe to
    repeat (the request's row lock makes two runs take turns, and a party invited already is left alone)."""
    request = lock_request(session, request_id)
    if request is None or request.status not in (Status.SENT, Status.OPENED):
        session.rollback()
        return Advanced(Advance.NOTHING, request_id)
    parties = parties_in_order(session, request_id)
    step = current_step(parties)
    if step is None or any(p.status == PartyStatus.DECLINED for p in parties):
        session.rollback()
        return Advanced(Advance.NOTHING, request_id)
    waiting = [p for p in parties if p.step == step and p.status == PartyStatus.WAITING]
    if not waiting:
        session.rollback()
        return Advanced(Advance.NOTHING, request_id)
    store_step_version(session, request=request, parties=parties, step=step, storage=storage, now=now)
    mail_ids = invite_parties(session, waiting, now=now, app=app)
    session.commit()
    log(logger, logging.INFO, "next step invited", request_id=request_id, step=step, parties=len(mail_ids))
    return Advanced(Advance.INVITED, request_id, tuple(mail_ids))


def stalled(
    session: Session, *, now: datetime, grace: timedelta = timedelta(minutes=5), limit: int = 1000
) -> dict[int, tuple[int, int]]:
    """Open requests whose current step (after the first) has a waiting party for ``grace`` after every earlier
    party signed: their ``advance`` job was lost. For the reconciler: request id → (the step to start, the
    document's version)."""
    waiting, before = aliased(Party), aliased(Party)
    recent = exists().where(
        before.request_id == waiting.request_id, before.step < waiting.step, before.signed_at > now - grace
    )
    return {
        request_id: (step, version)
        for request_id, step, version in session.execute(
            select(waiting.request_id, waiting.step, SigningRequest.document_version)
            .join(SigningRequest, SigningRequest.id == waiting.request_id)
            .where(
                waiting.status == PartyStatus.WAITING,
                waiting.step > 0,
                SigningRequest.status.in_([Status.SENT.value, Status.OPENED.value]),
                and_(~step_not_started(waiting), ~recent),
            )
            .distinct()
            .order_by(waiting.request_id)
            .limit(limit)
        )
    }

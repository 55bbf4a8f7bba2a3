"""The seal step of a signed request: its record drawn with every party who signed, sealed and stored, and the
mails that carry the sealed PDF to the recipient and the other parties.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import cast

from flask import Flask
from flask_babel import force_locale
from flask_babel import gettext as _
from flask_mail import Message
from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.core.logs import log
from bulksign.documents.audit_record import audit_record, document_title
from bulksign.documents.seal_keys import SealKey
from bulksign.documents.sealing import (
    TimeStamping,
    latest_document,
    seal_and_store,
    signed_filename,
    signed_storage_key,
)
from bulksign.documents.signature_box import SignatureBox
from bulksign.documents.signed_pdf import build_parties_pdf, build_signed_pdf
from bulksign.documents.storage import Storage
from bulksign.mail.mailer import builder, queue_mail
from bulksign.models import Document, Event, SigningRequest
from bulksign.models.mail import MailKind, OutgoingMail
from bulksign.models.status import Status
from bulksign.signing import party_mails, routing, steps
from bulksign.work.pipeline import enqueue_sends

logger = logging.getLogger(__name__)


class SealStatus(StrEnum):
    SEALED = "sealed"
    ALREADY_SEALED = "already_sealed"
    NOT_SIGNED = "not_signed"
    NO_ORIGINAL = "no_original"


@dataclass(frozen=True)
class SealOutcome:
    status: SealStatus
    request_id: int
    document_id: int | None = None
    mail_id: int | None = None


def seal_request(
    session: Session, *, request_id: int, now: datetime, storage: Storage, key: SealKey, tsa: TimeStamping | None = None
) -> SealOutcome:
    """Build, seal and store the signed PDF of a signed request, and queue its confirmation mail; commits.

    Idempotent: a request that already has its signed document is left alone. The row lock
    makes two concurrent runs for one request take turns.
    """

    request = session.scalar(select(SigningRequest).where(SigningRequest.id == request_id).with_for_update())
    if request is None or request.status != Status.SIGNED:
        session.rollback()
        return SealOutcome(status=SealStatus.NOT_SIGNED, request_id=request_id)
    existing = latest_document(session, request_id, "signed")
    if existing is not None:
        session.rollback()
        return SealOutcome(status=SealStatus.ALREADY_SEALED, request_id=request_id, document_id=existing.id)
    original = latest_document(session, request_id, "original")
    if original is None:
        session.rollback()
        log(logger, logging.ERROR, "signed request has no original document", request_id=request_id)
        return SealOutcome(status=SealStatus.NO_ORIGINAL, request_id=request_id)
    unsealed = _signed_record(session, request, original, storage.get(original.storage_key))
    sealed = seal_and_store(
        session, unsealed, storage_key=signed_storage_key(request), storage=storage, key=key, now=now, tsa=tsa
    )
    document = Document(
        request_id=request.id,
        kind="signed",
        storage_key=sealed.storage_key,
        sha256=sealed.sha256,
        size=sealed.size,
        content_type="application/pdf",
        created_at=now,
        seal_fingerprint=key.fingerprint,
    )
    session.add(document)
    session.add(
        Event(
            request_id=request.id,
            batch_id=request.batch_id,
            type="document.sealed",
            created_at=now,
            details={"sha256": sealed.sha256, "seal": key.fingerprint[:16]},
        )
    )
    attachment = {"key": sealed.storage_key, "filename": signed_filename(request), "content_type": "application/pdf"}
    # A recipient reached by text alone has no mailbox for the signed copy: the signing page offers it.
    mail = (
        queue_mail(
            session,
            key=f"confirmation-{request.id}",
            kind=MailKind.CONFIRMATION,
            to_email=request.email,
            subject=_confirmation_subject(request),
            now=now,
            request_id=request.id,
            batch_id=request.batch_id,
            attachments=[attachment],
        )
        if request.email
        else None
    )
    # Every other party gets the completed PDF now, not before.
    others = party_mails.completed_mails(
        session, request=request, attachment=attachment, subject=_confirmation_subject(request), now=now
    )
    session.flush()
    outcome = SealOutcome(
        status=SealStatus.SEALED, request_id=request.id, document_id=document.id, mail_id=mail.id if mail else None
    )
    session.commit()
    enqueue_sends([*([mail.id] if mail else []), *others])
    log(
        logger,
        logging.INFO,
        "signed document sealed",
        request_id=request_id,
        document_id=outcome.document_id,
        size=sealed.size,
    )
    return outcome


def _signed_record(session: Session, request: SigningRequest, original: Document, data: bytes) -> bytes:
    """The original ``data`` with every signature and filled field stamped and the audit certificate appended."""
    parties = routing.parties_in_order(session, request.id)
    fields = steps.filled_fields(session, request=request, original=original, parties=parties)
    labels = steps.batch_party_labels(request.batch)
    struck = steps.struck_boxes(session, request=request, original=original, parties=parties)
    record = replace(audit_record(session, request, original, role_labels=labels), fields=fields, struck=struck)
    if len(parties) > 1:
        # Signed by several: every party's block at its mark (or on the one signature page), every party listed.
        boxes = steps.party_boxes(request=request, original=original, pdf=data)
        blocks = steps.party_blocks(parties, boxes, labels=labels)
        return build_parties_pdf(data, steps.with_parties(record, parties), blocks=blocks)
    return build_signed_pdf(
        data, record, image_png=request.signature_image, box=SignatureBox.from_json(original.signature_box)
    )


def unsealed_requests(
    session: Session,
    *,
    now: datetime,
    grace: timedelta = timedelta(minutes=5),
    window: timedelta = timedelta(days=7),
    limit: int = 1000,
) -> list[int]:
    """Requests signed between ``window`` and ``grace`` ago that still have no signed document."""
    has_signed = select(Document.id).where(Document.request_id == SigningRequest.id, Document.kind == "signed")
    return list(
        session.scalars(
            select(SigningRequest.id)
            .where(
                SigningRequest.status == Status.SIGNED,
                SigningRequest.signed_at <= now - grace,
                SigningRequest.signed_at >= now - window,
                ~has_signed.exists(),
            )
            .order_by(SigningRequest.signed_at)
            .limit(limit)
        )
    )


def _confirmation_subject(request: SigningRequest) -> str:
    with force_locale(request.batch.language):
        return cast(str, _("Signed: %(name)s", name=document_title(request.batch)))


@builder(MailKind.CONFIRMATION)
def build_confirmation(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """The recipient's confirmation with the signed PDF attached (the mail job attaches the files)."""
    from flask import render_template
    from flask_babel import force_locale

    request = session.get_one(SigningRequest, mail.request_id)
    with force_locale(request.batch.language):
        body = render_template(
            "emails/signing_confirmation.txt",
            request=request,
            batch=request.batch,
            document_name=document_title(request.batch),
        )
    message = Message(
        subject=mail.subject, recipients=[mail.to_email], body=body, reply_to=request.batch.reply_to or None
    )
    message.msgId = mail.message_id
    return message

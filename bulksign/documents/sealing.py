"""The signed record sealed with PAdES, the check of a seal, and the seal step of a signed request.

B-B by default; with ``TSA_URL`` every seal carries an RFC 3161 time-stamp (B-T), and with the
TSA's CA (``TSA_CA_CERT_PATH``) the validation data too (B-LT), so the seal can be checked long
after the certificates expire.

The record is built by ``signed_pdf``; the key comes from ``seal_keys``. The seal step also queues
the recipient's confirmation mail with the sealed file, and builds it when the mail job sends it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from io import BytesIO
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.core.logs import log
from bulksign.documents.seal_keys import SealError, SealKey, remember_certificate
from bulksign.documents.signature_box import SignatureBox
from bulksign.documents.signed_pdf import audit_record, build_parties_pdf, build_signed_pdf, document_title
from bulksign.mail.mailer import builder, queue_mail
from bulksign.models import Document, Event, SigningRequest
from bulksign.models.status import Status
from bulksign.signing import routing
from bulksign.work.pipeline import enqueue_sends

logger = logging.getLogger(__name__)

SEAL_FIELD = "BulksignSeal"


# ---------------------------------------------------------------------------------------------
# Sealing, with a time-stamp when configured
# ---------------------------------------------------------------------------------------------


def _outside_event_loop(func, *args, **kwargs):
    """Call one of pyHanko's sync functions: they use asyncio.run(), which fails inside a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return func(*args, **kwargs)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(func, *args, **kwargs).result()


@dataclass(frozen=True)
class TimeStamping:
    """Where seals get their RFC 3161 time-stamp, and which roots vouch for the authority."""

    url: str
    auth: tuple[str, str] | None
    timeout_seconds: int
    #: The TSA's CA certificates (asn1crypto): with them the seal embeds its validation data (B-LT).
    trust_roots: tuple = ()


def timestamping(config) -> TimeStamping | None:
    """The time-stamping settings (``TSA_URL`` …), or None when seals carry no time-stamp."""
    url = config.get("TSA_URL") or ""
    if not url:
        return None
    roots: tuple = ()
    if config.get("TSA_CA_CERT_PATH"):
        from asn1crypto import pem, x509

        try:
            raw = Path(config["TSA_CA_CERT_PATH"]).read_bytes()
        except OSError as exc:
            raise SealError(f"TSA_CA_CERT_PATH cannot be read ({exc.strerror}).") from exc
        roots = (
            tuple(x509.Certificate.load(der) for _, _, der in pem.unarmor(raw, multiple=True))
            if pem.detect(raw)
            else (x509.Certificate.load(raw),)
        )
    username = config.get("TSA_USERNAME") or ""
    return TimeStamping(
        url=url,
        auth=(username, config.get("TSA_PASSWORD") or "") if username else None,
        timeout_seconds=int(config.get("TSA_TIMEOUT_SECONDS") or 10),
        trust_roots=roots,
    )


def apply_seal(pdf: bytes, key: SealKey, *, tsa: TimeStamping | None = None) -> bytes:
    """Seal the whole file with a PAdES signature (an invisible field): B-B, or B-T/B-LT with a time-stamp."""
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
    from pyhanko.sign import fields, signers
    from pyhanko.sign.timestamps import TimestampRequestError
    from pyhanko.sign.timestamps.requests_client import HTTPTimeStamper
    from pyhanko_certvalidator import ValidationContext

    def sign(**extra) -> bytes:
        meta = signers.PdfSignatureMetadata(
            field_name=SEAL_FIELD,
            md_algorithm="sha256",
            subfilter=fields.SigSeedSubFilter.PADES,
            reason="Document sealed by Bulksign",
            **extra,
        )
        writer = IncrementalPdfFileWriter(BytesIO(pdf), strict=False)
        return _outside_event_loop(signers.sign_pdf, writer, meta, signer=key.signer, timestamper=stamper).getvalue()

    if tsa is None:
        stamper = None
        return sign()
    stamper = HTTPTimeStamper(tsa.url, timeout=tsa.timeout_seconds, auth=tsa.auth)
    try:
        if tsa.trust_roots:
            try:
                context = ValidationContext(trust_roots=[key.certificate, *tsa.trust_roots], allow_fetching=True)
                return sign(embed_validation_info=True, validation_context=context)
            except TimestampRequestError:
                raise
            except Exception as exc:  # a chain pyHanko cannot complete: the time-stamp alone still holds
                log(
                    logger,
                    logging.WARNING,
                    "seal validation data not embedded; sealing with a time-stamp only",
                    error=repr(exc)[:300],
                )
        return sign()
    except TimestampRequestError as exc:
        raise SealError(f"The time-stamp authority {tsa.url} did not answer ({exc}).") from exc


# ---------------------------------------------------------------------------------------------
# Checking a seal
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SealCheck:
    """What a PDF's seal says. ``readable`` False: not a PDF we can parse."""

    readable: bool
    sealed: bool = False
    #: The signed bytes are unchanged and the signature verifies.
    intact: bool = False
    #: The signature covers the whole file (nothing appended after sealing but its own validation data).
    whole_file: bool = False
    #: Signed by this installation's seal certificate, or one it used before.
    ours: bool = False
    signer: str = ""
    signed_at: datetime | None = None
    #: When a trusted time-stamp authority vouched the seal existed (PAdES B-T); None: no trusted time-stamp.
    timestamped_at: datetime | None = None
    #: The seal carries its validation data (PAdES B-LT).
    long_term: bool = False

    @property
    def valid(self) -> bool:
        return self.intact and self.whole_file and self.ours


def check_seal(pdf: bytes, key: SealKey, *, past: Sequence = (), tsa_roots: Sequence = ()) -> SealCheck:
    """Validate the seal of ``pdf`` against our certificate and the ``past`` ones; never raises on bad input."""
    from pyhanko.pdf_utils.reader import PdfFileReader
    from pyhanko.sign.diff_analysis import ModificationLevel
    from pyhanko.sign.validation import validate_pdf_signature
    from pyhanko.sign.validation.status import SignatureCoverageLevel
    from pyhanko_certvalidator import ValidationContext

    try:
        reader = PdfFileReader(BytesIO(pdf), strict=False)
        signatures = reader.embedded_signatures
    except Exception:  # pyHanko raises many kinds on garbage; any of them means "not a readable PDF"
        return SealCheck(readable=False)
    if not signatures:
        return SealCheck(readable=True)
    sig = signatures[-1]
    try:
        roots = [key.certificate, *past, *tsa_roots]
        status = _outside_event_loop(
            validate_pdf_signature,
            sig,
            ValidationContext(trust_roots=roots, allow_fetching=False),
            ts_validation_context=ValidationContext(trust_roots=roots, allow_fetching=False),
        )
    except Exception as exc:
        log(logger, logging.INFO, "seal validation failed", error=repr(exc)[:300])
        return SealCheck(readable=True, sealed=True)
    cert = status.signing_cert
    fingerprint = hashlib.sha256(cert.dump()).hexdigest() if cert is not None else ""
    ours = {key.fingerprint, *(hashlib.sha256(c.dump()).hexdigest() for c in past)}
    stamp = status.timestamp_validity
    try:
        long_term = "/DSS" in reader.root
    except Exception:
        long_term = False
    return SealCheck(
        readable=True,
        sealed=True,
        intact=bool(status.intact and status.valid),
        whole_file=status.coverage == SignatureCoverageLevel.ENTIRE_FILE
        or (
            # B-LT appends its validation data after the signature: the only addition allowed.
            status.coverage == SignatureCoverageLevel.ENTIRE_REVISION
            and status.modification_level == ModificationLevel.LTA_UPDATES
        ),
        ours=fingerprint in ours,
        signer=cert.subject.human_friendly if cert is not None else "",
        signed_at=status.signer_reported_dt,
        timestamped_at=stamp.timestamp
        if stamp is not None and stamp.intact and stamp.valid and stamp.trusted
        else None,
        long_term=long_term,
    )


# ---------------------------------------------------------------------------------------------
# The seal step of a request
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SealOutcome:
    #: ``sealed``, ``already_sealed``, ``not_signed`` or ``no_original``.
    status: str
    request_id: int
    document_id: int | None = None
    mail_id: int | None = None


def signed_storage_key(request: SigningRequest) -> str:
    return f"batches/{request.batch_id}/requests/{request.id}/signed.pdf"


def signed_filename(request: SigningRequest) -> str:
    return f"signed-{request.id}.pdf"


def latest_document(session: Session, request_id: int, kind: str) -> Document | None:
    return session.scalar(
        select(Document)
        .where(Document.request_id == request_id, Document.kind == kind)
        .order_by(Document.id.desc())
        .limit(1)
    )


def seal_request(
    session: Session, *, request_id: int, now: datetime, storage, key: SealKey, tsa: TimeStamping | None = None
) -> SealOutcome:
    """Build, seal and store the signed PDF of a signed request, and queue its confirmation mail; commits.

    Idempotent: a request that already has its signed document is left alone. The row lock
    makes two concurrent runs for one request take turns.
    """

    request = session.scalar(select(SigningRequest).where(SigningRequest.id == request_id).with_for_update())
    if request is None or request.status != Status.SIGNED:
        session.rollback()
        return SealOutcome(status="not_signed", request_id=request_id)
    existing = latest_document(session, request_id, "signed")
    if existing is not None:
        session.rollback()
        return SealOutcome(status="already_sealed", request_id=request_id, document_id=existing.id)
    original = latest_document(session, request_id, "original")
    if original is None:
        session.rollback()
        log(logger, logging.ERROR, "signed request has no original document", request_id=request_id)
        return SealOutcome(status="no_original", request_id=request_id)
    data = storage.get(original.storage_key)
    parties = routing.parties_in_order(session, request_id)
    fields = routing.filled_fields(session, request=request, original=original, parties=parties)
    record = replace(audit_record(session, request, original), fields=fields)
    if len(parties) > 1:
        # Signed by several: every party's block at its mark (or on the one signature page), every party listed.
        boxes = routing.party_boxes(request=request, original=original, pdf=data)
        unsealed = build_parties_pdf(
            data, routing.with_parties(record, parties), blocks=routing.party_blocks(parties, boxes)
        )
    else:
        unsealed = build_signed_pdf(
            data, record, image_png=request.signature_image, box=SignatureBox.from_json(original.signature_box)
        )
    sealed = apply_seal(unsealed, key, tsa=tsa)
    storage_key = signed_storage_key(request)
    storage.put(storage_key, sealed, content_type="application/pdf")
    digest = hashlib.sha256(sealed).hexdigest()
    remember_certificate(session, key, now=now)
    document = Document(
        request_id=request.id,
        kind="signed",
        storage_key=storage_key,
        sha256=digest,
        size=len(sealed),
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
            details={"sha256": digest, "seal": key.fingerprint[:16]},
        )
    )
    attachment = {"key": storage_key, "filename": signed_filename(request), "content_type": "application/pdf"}
    mail = queue_mail(
        session,
        key=f"confirmation-{request.id}",
        kind="confirmation",
        to_email=request.email,
        subject=_confirmation_subject(request),
        now=now,
        request_id=request.id,
        batch_id=request.batch_id,
        attachments=[attachment],
    )
    # Every other party gets the completed PDF now, not before.
    others = routing.completed_mails(
        session, request=request, attachment=attachment, subject=_confirmation_subject(request), now=now
    )
    session.flush()
    outcome = SealOutcome(status="sealed", request_id=request.id, document_id=document.id, mail_id=mail.id)
    session.commit()
    enqueue_sends([outcome.mail_id, *others])
    log(
        logger,
        logging.INFO,
        "signed document sealed",
        request_id=request_id,
        document_id=outcome.document_id,
        size=len(sealed),
    )
    return outcome


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
    from flask_babel import force_locale
    from flask_babel import gettext as _

    with force_locale(request.batch.language):
        return _("Signed: %(name)s", name=document_title(request.batch))


@builder("confirmation")
def build_confirmation(session: Session, mail, app):
    """The recipient's confirmation with the signed PDF attached (the mail job attaches the files)."""
    from flask import render_template
    from flask_babel import force_locale
    from flask_mail import Message

    request = session.get(SigningRequest, mail.request_id)
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

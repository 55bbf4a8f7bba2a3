"""A signed record sealed with PAdES and stored, the check of a seal, and where a request's documents are kept.
More in docs/architecture/documents.md."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from io import BytesIO
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.core.logs import log
from bulksign.documents.seal_keys import SealError, SealKey, remember_certificate
from bulksign.models import Document, SigningRequest

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
# Storing a sealed record, and where a request's documents are
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sealed:
    """A sealed PDF as stored."""

    storage_key: str
    sha256: str
    size: int


def seal_and_store(
    session: Session, pdf: bytes, *, storage_key: str, storage, key: SealKey, now: datetime, tsa: TimeStamping | None
) -> Sealed:
    """Seal ``pdf``, store it at ``storage_key`` and remember the certificate that sealed it (the caller commits)."""
    sealed = apply_seal(pdf, key, tsa=tsa)
    storage.put(storage_key, sealed, content_type="application/pdf")
    remember_certificate(session, key, now=now)
    return Sealed(storage_key, hashlib.sha256(sealed).hexdigest(), len(sealed))


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

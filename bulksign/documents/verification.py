"""Public verification: is this PDF (or this sha256) a document issued here, and is its seal intact?
More in docs/architecture/documents.md."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from flask_babel import lazy_gettext as _l
from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.core.errors import BulksignError
from bulksign.documents.seal_keys import SealKey, past_certificates
from bulksign.documents.sealing import SealCheck, check_seal
from bulksign.models import RECIPIENT_ROLE, Document, Party, SigningRequest

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Signer:
    """One party who signed: their role (``recipient``: the row's person), the name they signed with, when."""

    role: str
    name: str
    signed_at: datetime | None


@dataclass(frozen=True)
class Verdict:
    #: ``signed`` (a signed copy we issued), ``original``, ``tampered`` (our seal, broken or extended),
    #: ``sealed_unknown`` (our intact seal, no record), ``unknown`` or ``not_pdf``.
    outcome: str
    sha256: str
    seal: SealCheck | None = None
    issued_at: datetime | None = None
    #: Only for file uploads: whose document it is.
    recipient_name: str = ""
    document_name: str = ""
    signed_at: datetime | None = None
    #: Only for file uploads of a signed copy: every party who signed it, in signing order.
    signers: tuple[Signer, ...] = ()
    #: The signers' names were deleted under the retention rules (the record of the signing is kept).
    names_removed: bool = False


def _issued(session: Session, sha256: str) -> Document | None:
    return session.scalar(select(Document).where(Document.sha256 == sha256).order_by(Document.id).limit(1))


def verify_file(session: Session, *, data: bytes, key: SealKey, tsa_roots: Sequence = ()) -> Verdict:
    """Check an uploaded file: our record by its sha256, and its PAdES seal against our certificates, past and present."""
    digest = hashlib.sha256(data).hexdigest()
    if not data.lstrip()[:5] == b"%PDF-":
        return Verdict(outcome="not_pdf", sha256=digest)
    seal = check_seal(data, key, past=past_certificates(session, current=key), tsa_roots=tsa_roots)
    if not seal.readable:
        return Verdict(outcome="not_pdf", sha256=digest)
    document = _issued(session, digest)
    if document is None:
        if seal.sealed and seal.ours and seal.intact and seal.whole_file:
            return Verdict(outcome="sealed_unknown", sha256=digest, seal=seal)
        return Verdict(outcome="tampered" if seal.sealed else "unknown", sha256=digest, seal=seal)
    request = session.get_one(SigningRequest, document.request_id)
    template = request.batch.template_version.template if request.batch.template_version else None
    signed = document.kind == "signed"
    return Verdict(
        outcome="signed" if signed else "original",
        sha256=digest,
        seal=seal,
        issued_at=document.created_at,
        recipient_name=request.signer_name or request.name or request.email or "",
        document_name=template.name if template else request.batch.name,
        signed_at=request.signed_at if signed else None,
        signers=_signers(session, request) if signed else (),
        names_removed=request.purged_at is not None,
    )


def _signers(session: Session, request: SigningRequest) -> tuple[Signer, ...]:
    """Who signed: each party in signing order, or the recipient alone for a single-signer request."""
    parties = session.scalars(
        select(Party)
        .where(Party.request_id == request.id, Party.signed_at.is_not(None))
        .order_by(Party.step, Party.signed_at, Party.id)
    ).all()
    if not parties:
        return (Signer(RECIPIENT_ROLE, request.signer_name or request.name or "", request.signed_at),)
    return tuple(
        Signer(
            p.role,
            (request.signer_name or request.name or "")
            if p.role == RECIPIENT_ROLE
            else (p.signer_name or p.name or ""),
            p.signed_at,
        )
        for p in parties
    )


class InvalidFingerprint(BulksignError):
    """Not a sha256 in hex."""


def verify_fingerprint(session: Session, *, sha256: str) -> Verdict:
    """Look up a bare sha256: issued or not, which kind, when; never for whom."""
    digest = (sha256 or "").strip().lower()
    if not _SHA256.match(digest):
        raise InvalidFingerprint(_l("A sha256 fingerprint is 64 characters 0-9 and a-f."))
    document = _issued(session, digest)
    if document is None:
        return Verdict(outcome="unknown", sha256=digest)
    return Verdict(
        outcome="signed" if document.kind == "signed" else "original", sha256=digest, issued_at=document.created_at
    )

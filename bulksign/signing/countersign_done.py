"""What became of a countersigner's documents: signed and sealed (their copy to download) or declined, and by whom."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, aliased

from bulksign.doc_templates.template_parties import party_label
from bulksign.documents.sealing import latest_document
from bulksign.models import RECIPIENT_ROLE, Batch, CountersignLink, Document, Party, SigningRequest
from bulksign.models.parties import PartyStatus
from bulksign.models.status import Status

#: Finished documents a page of the list shows.
PER_PAGE = 50
#: Request states whose document will not change again: its sealed copy, or a decline.
FINISHED = (Status.SIGNED.value, Status.DECLINED.value)


class Finished(StrEnum):
    #: Its sealed copy can be downloaded.
    SIGNED = "signed"
    #: Signed by all, its copy not sealed yet.
    SEALING = "sealing"
    DECLINED = "declined"


@dataclass(frozen=True)
class FinishedDocument:
    party_id: int
    #: Whose document it is: the row's person.
    name: str
    email: str
    outcome: Finished
    #: Of a declined document: the role that declined (``recipient``: the row's person), its label in the batch's
    #: language, and why.
    declined_by: str | None
    declined_label: str | None
    reason: str
    finished_at: datetime | None


def _outcome(status: str, *, sealed: bool) -> Finished:
    if status == Status.DECLINED:
        return Finished.DECLINED
    return Finished.SIGNED if sealed else Finished.SEALING


@dataclass(frozen=True)
class FinishedPage:
    documents: tuple[FinishedDocument, ...]
    total: int
    page: int
    pages: int


def _finished(link: CountersignLink) -> Select[tuple[int]]:
    return (
        select(Party.id)
        .join(SigningRequest, SigningRequest.id == Party.request_id)
        .where(
            Party.batch_id == link.batch_id,
            func.lower(Party.email) == link.email,
            Party.role != RECIPIENT_ROLE,
            # Its step had started: a document declined before it reached the countersigner was never theirs to see.
            Party.status != PartyStatus.WAITING.value,
            SigningRequest.status.in_(FINISHED),
            SigningRequest.purged_at.is_(None),
        )
    )


def finished_page(session: Session, *, link: CountersignLink, page: int) -> FinishedPage:
    """One page of the link's finished documents, the newest first."""
    total = session.scalar(select(func.count()).select_from(_finished(link).subquery())) or 0
    pages = max(1, -(-total // PER_PAGE))
    page = min(max(page, 1), pages)
    decliner = aliased(Party)
    sealed = select(Document.id).where(Document.request_id == SigningRequest.id, Document.kind == "signed").exists()
    rows = session.execute(
        _finished(link)
        .add_columns(
            SigningRequest.name,
            SigningRequest.email,
            SigningRequest.status,
            SigningRequest.status_changed_at,
            sealed,
            decliner.role,
            decliner.decline_reason,
        )
        .outerjoin(
            decliner,
            (decliner.request_id == SigningRequest.id) & (decliner.status == PartyStatus.DECLINED.value),
        )
        .order_by(SigningRequest.status_changed_at.desc(), Party.id.desc())
        .offset((page - 1) * PER_PAGE)
        .limit(PER_PAGE)
    ).all()
    batch = session.get_one(Batch, link.batch_id)
    version, language = batch.template_version, batch.language or "en"
    documents = tuple(
        FinishedDocument(
            party_id=party_id,
            name=name or "",
            email=email,
            outcome=_outcome(status, sealed=is_sealed),
            declined_by=role if status == Status.DECLINED.value else None,
            declined_label=party_label(version, role=role, language=language)
            if status == Status.DECLINED.value
            else None,
            reason=reason or "",
            finished_at=changed_at,
        )
        for party_id, name, email, status, changed_at, is_sealed, role, reason in rows
    )
    return FinishedPage(documents, total, page, pages)


@dataclass(frozen=True)
class SignedCopy:
    document: Document
    request: SigningRequest

    def filename(self, *, title: str) -> str:
        """``<recipient name> – <document title>.pdf``, with nothing a file system or a header would misread."""
        return f"{safe_name(f'{self.request.name or self.request.email} – {title}')}.pdf"


#: What a file name must not hold: path separators, characters file systems refuse, control characters.
_UNSAFE = re.compile(r'[\\/:*?"<>|\x00-\x1f\x7f]+')


def safe_name(text: str, *, limit: int = 150) -> str:
    """``text`` as a file name's stem: unsafe characters as "_", trimmed of dots and spaces, at most ``limit``."""
    cleaned = _UNSAFE.sub("_", text).strip(" .")[:limit].strip(" .")
    return cleaned or "document"


def signed_copies(session: Session, *, link: CountersignLink, limit: int) -> list[SignedCopy]:
    """The sealed copies of the link's signed documents (its "download all"), the newest first, at most ``limit``."""
    rows = session.execute(
        _finished(link)
        .with_only_columns(SigningRequest, Document)
        .join(Document, (Document.request_id == SigningRequest.id) & (Document.kind == "signed"))
        .where(SigningRequest.status == Status.SIGNED.value)
        .order_by(SigningRequest.status_changed_at.desc(), Document.id.desc())
        .limit(limit)
    ).all()
    seen: set[int] = set()
    copies = []
    for request, document in rows:  # a request sealed twice (a repair) gives its newest copy once
        if request.id not in seen:
            seen.add(request.id)
            copies.append(SignedCopy(document, request))
    return copies


def signed_copy(session: Session, *, link: CountersignLink, party_id: int) -> SignedCopy | None:
    """The sealed copy of one of the link's signed documents; None when the party is not the link's, its request
    is not signed or was purged, or its copy is not sealed yet."""
    request = session.scalar(
        select(SigningRequest)
        .join(Party, Party.request_id == SigningRequest.id)
        .where(
            Party.id == party_id,
            Party.batch_id == link.batch_id,
            func.lower(Party.email) == link.email,
            Party.role != RECIPIENT_ROLE,
            SigningRequest.status == Status.SIGNED.value,
            SigningRequest.purged_at.is_(None),
        )
    )
    if request is None:
        return None
    document = latest_document(session, request.id, "signed")
    return SignedCopy(document, request) if document is not None else None

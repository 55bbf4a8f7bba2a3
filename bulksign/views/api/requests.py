"""JSON API for one signing request: its status and times, what its signers filled in, and its files (the rendered
original, the sealed signed PDF, the audit certificate, the signers' attachments)."""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import datetime

from flask import Blueprint, g
from pydantic import BaseModel, Field

from bulksign.batches.address_approval import waiting_for
from bulksign.batches.field_values import attachment_of, request_values
from bulksign.batches.texting import text_states
from bulksign.core.extensions import db
from bulksign.core.logs import log
from bulksign.doc_templates.fields import ATTACHMENT_TYPES
from bulksign.documents.audit_certificate import certificate_pages
from bulksign.documents.sealing import latest_document, signed_filename
from bulksign.documents.signature_box import SignatureBox
from bulksign.documents.storage import StorageError, get_storage
from bulksign.models import Document, SigningRequest
from bulksign.models.status import Status
from bulksign.people import access
from bulksign.signing.parties import parties_of
from bulksign.views._downloads import attachment, signer_attachment
from bulksign.views.api.approval import AddressChangeOut, change_out
from bulksign.views.api.common import ApiError, absolute_url, answer, operation
from bulksign.views.api.dashboard import SigningRequestOut, _request_out

bp = Blueprint("api_requests", __name__, url_prefix="/api/v1")
logger = logging.getLogger(__name__)

#: Seconds a client should wait before asking again for a document still being rendered or sealed.
RETRY_AFTER = 5
PDF = "application/pdf"


class DocumentOut(BaseModel):
    sha256: str = Field(description="Of the file's bytes: compare it with what you downloaded.")
    size: int = Field(description="Bytes.")
    created_at: datetime


class BatchRefOut(BaseModel):
    id: int
    name: str


class RequestLinks(BaseModel):
    """Where to fetch the request and its files (absolute URLs under the server's `APP_URL`)."""

    request: str = Field(description="This request (`GET /requests/{request_id}`).")
    batch: str = Field(description="Its batch with the counts per status.")
    document: str = Field(description="The rendered original PDF, once `document` is not null.")
    signed: str = Field(description="The sealed signed PDF (with its audit certificate), once `signed_document` is.")
    certificate: str = Field(description="The audit certificate pages of the signed PDF alone.")


class PartyOut(BaseModel):
    role: str = Field(
        description="`recipient` (the row's own person) or the `<role>` of a `{{ signature_<role> }}` mark."
    )
    step: int = Field(description="Its step in the routing, from 0; the parties of one step sign in parallel.")
    email: str | None = Field(description="Null once purged.")
    name: str | None
    status: str = Field(description="`waiting` (its step has not started), `invited`, `opened`, `signed`, `declined`.")
    invited_at: datetime | None
    signed_at: datetime | None
    declined_at: datetime | None


class RequestOut(SigningRequestOut):
    """One recipient's request with its batch, its documents and the links to download them; never its signing link."""

    batch: BatchRefOut
    parties: list[PartyOut] = Field(description="Who signs the document, by step; a single-signer one: its recipient.")
    pending_address_changes: list[AddressChangeOut] = Field(
        description="Changes of a party's address waiting for approval (its team requires it): until one is "
        "approved the party keeps its address and no new link goes out."
    )
    document: DocumentOut | None = Field(description="The rendered original; null until the workers rendered it.")
    signed_document: DocumentOut | None = Field(
        description="The sealed PDF; null until signed and sealed (a few seconds after `signed_at`)."
    )
    links: RequestLinks


def _document_out(document: Document | None) -> DocumentOut | None:
    if document is None:
        return None
    return DocumentOut(sha256=document.sha256, size=document.size, created_at=document.created_at)


def _request(request_id: int) -> SigningRequest:
    return access.request_for_read(db.session, request_id=request_id, user=g.api_user)


def _with_files(request_id: int) -> SigningRequest:
    """The request, for a download of its files: 410 once they were purged (retention or erasure)."""
    row = _request(request_id)
    if row.purged_at is not None:
        raise ApiError(
            f"The request's documents were purged on {row.purged_at:%Y-%m-%d} (retention or erasure); its record "
            "and the documents' sha256 stay, so /verify still recognises a kept copy.",
            410,
            code="purged",
        )
    return row


@bp.get("/requests/<int:request_id>")
@operation(
    "One request: status, recipient, times, documents", tag="Requests", responses={200: RequestOut}, errors=(404,)
)
def get_request(request_id: int):
    """What a `request.*` webhook is about: poll it, or follow its `links` to the documents."""
    row = _request(request_id)
    original = latest_document(db.session, row.id, "original")
    signed = latest_document(db.session, row.id, "signed")
    return answer(
        RequestOut(
            **_request_out(
                row,
                request_values(db.session, batch_id=row.batch_id, request_id=row.id),
                text_states(db.session, request_ids=[row.id]).get(row.id),
            ).model_dump(),
            batch=BatchRefOut(id=row.batch.id, name=row.batch.name),
            parties=[PartyOut(**asdict(p)) for p in parties_of(db.session, row)],
            pending_address_changes=[change_out(c) for c in waiting_for(db.session, request_id=row.id)],
            document=_document_out(original),
            signed_document=_document_out(signed),
            links=RequestLinks(
                request=absolute_url(".get_request", request_id=row.id),
                batch=absolute_url("api_dashboard.get_batch", batch_id=row.batch_id),
                document=absolute_url(".document", request_id=row.id),
                signed=absolute_url(".signed", request_id=row.id),
                certificate=absolute_url(".certificate", request_id=row.id),
            ),
        )
    )


def _not_ready(message: str) -> ApiError:
    return ApiError(message, 409, code="not_ready", headers={"Retry-After": str(RETRY_AFTER)})


def _stored(key: str, **about) -> bytes:
    """A file in storage (``about``: which, for the log); 503 when storage cannot give it."""
    try:
        return get_storage().get(key)
    except StorageError as exc:
        log(logger, logging.ERROR, "file missing from storage", **about, error=str(exc))
        raise ApiError(
            "The document cannot be read from storage right now; try again later.", 503, code="storage_unavailable"
        ) from None


def _stored_document(document: Document) -> bytes:
    return _stored(document.storage_key, document_id=document.id)


def _signed(row: SigningRequest) -> Document:
    """The sealed document of a signed request; 409 while it is not signed or not sealed yet."""
    if row.status != Status.SIGNED:
        raise ApiError(
            f"The request is not signed (its status is {row.status}): a signed PDF exists only once the recipient "
            "has signed.",
            409,
            code="not_signed",
        )
    document = latest_document(db.session, row.id, "signed")
    if document is None:
        raise _not_ready(f"Signed; the sealed PDF is being made. Ask again in {RETRY_AFTER} seconds.")
    return document


@bp.get("/requests/<int:request_id>/document")
@operation("Download the rendered original PDF", tag="Requests", responses={200: PDF}, errors=(404, 409, 410, 503))
def document(request_id: int):
    """The document as the recipient sees it before signing. 409 (with `Retry-After`) until the workers rendered it."""
    row = _with_files(request_id)
    original = latest_document(db.session, row.id, "original")
    if original is None:
        raise _not_ready(f"The document is not rendered yet (status {row.status}). Ask again in {RETRY_AFTER} seconds.")
    return attachment(_stored_document(original), mimetype=PDF, filename=f"document-{row.id}.pdf")


@bp.get("/requests/<int:request_id>/signed")
@operation("Download the sealed signed PDF", tag="Requests", responses={200: PDF}, errors=(404, 409, 410, 503))
def signed(request_id: int):
    """The file the recipient receives: the document with the signature, then the audit certificate, under one
    PAdES seal (check it at /verify or with any PDF validator).

    409 `not_signed` while the request is not signed; 409 `not_ready` (with `Retry-After`) for the few seconds
    between signing (the `request.signed` webhook) and the seal.
    """
    row = _with_files(request_id)
    return attachment(_stored_document(_signed(row)), mimetype=PDF, filename=signed_filename(row))


@bp.get("/requests/<int:request_id>/certificate")
@operation("Download the audit certificate", tag="Requests", responses={200: PDF}, errors=(404, 409, 410, 503))
def certificate(request_id: int):
    """The audit certificate pages of the signed PDF on their own (who signed, when, from where, every event).

    They are a copy for filing: the seal covers the whole signed PDF, so the proof is `/requests/{request_id}/signed`,
    whose last pages these are. 409 as for the signed PDF.
    """
    row = _with_files(request_id)
    sealed = _stored_document(_signed(row))
    original = latest_document(db.session, row.id, "original")
    assert original is not None  # a sealed document was rendered first
    pages = certificate_pages(
        sealed, original=_stored_document(original), box=SignatureBox.from_json(original.signature_box)
    )
    return attachment(pages, mimetype=PDF, filename=f"audit-certificate-{row.id}.pdf")


#: What an attachment may be: the types the signing page accepts (checked by the file's content).
@bp.get("/requests/<int:request_id>/attachments/<name>")
@operation(
    "Download a file a signer attached",
    tag="Requests",
    responses={200: tuple(ATTACHMENT_TYPES)},
    errors=(404, 410, 503),
)
def attachment_download(request_id: int, name: str):
    """The file of the `attachment` field `name` (the request's `attachments[].url`), as the signer gave it:
    `Content-Disposition: attachment` with its file name, its checked type, `X-Content-Type-Options: nosniff`.

    404 for a request of a batch the key's user does not see, or a field without a file; 410 once the request
    was purged (its `attachments` keep each file's sha256)."""
    row = _with_files(request_id)
    found = attachment_of(db.session, batch_id=row.batch_id, request_id=row.id, name=name)
    if found is None:
        raise ApiError(f"The request has no attachment named “{name[:64]}”.", 404)
    return signer_attachment(found, _stored(found.storage_key, request_id=row.id, field=found.name))

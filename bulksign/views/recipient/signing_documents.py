"""The signer's document, its page images and its signed copy, each behind the signing page's code step."""

from __future__ import annotations

import logging
from datetime import datetime
from io import BytesIO

from flask import request, send_file
from flask_babel import gettext as _

from bulksign.core.extensions import db, get_redis
from bulksign.core.logs import log
from bulksign.documents.document_pages import page_image as stored_page_image
from bulksign.documents.poppler import PopplerError
from bulksign.documents.sealing import latest_document, signed_filename
from bulksign.documents.storage import StorageError, get_storage
from bulksign.models import Document, SigningRequest, utcnow
from bulksign.people.auth import public
from bulksign.signing import one_time_codes, party_copies
from bulksign.signing.page_states import PageState
from bulksign.views.recipient import signing as signing_page
from bulksign.views.recipient.recipient_headers import DOCUMENT_CSP
from bulksign.views.recipient.signing import (
    DOCUMENT_STATES,
    again,
    by_token,
    page_image_limit,
    readable,
    recipient_limit,
    render_page,
    signer_code_party,
    signer_party_of_link,
    state_of,
    verified_code,
)

logger = logging.getLogger(__name__)


def _send_pdf(row: SigningRequest, token: str, *, document: Document | None, filename: str):
    if document is None:
        return again(
            row,
            token,
            status=404,
            error=_(
                "Your signed copy is being prepared. Reload this page in a "
                "minute; it will also be sent to you by email."
            ),
        )
    try:
        data = get_storage().get(document.storage_key)
    except StorageError as exc:
        log(
            logger,
            logging.ERROR,
            "document missing from storage",
            request_id=row.id,
            document_id=document.id,
            error=str(exc),
        )
        return again(row, token, status=503, error=_("The document cannot be shown right now. Please try again later."))
    response = send_file(
        BytesIO(data),
        mimetype="application/pdf",
        download_name=filename,
        as_attachment=request.args.get("download") == "1",
        max_age=0,
        etag=False,
    )
    # Its own headers: the PDF is shown in our page's iframe, which the page headers would forbid.
    response.headers["Content-Security-Policy"] = DOCUMENT_CSP
    response.headers["X-Frame-Options"] = "SAMEORIGIN"
    return response


@signing_page.bp.get("/<token>/document")
@public
@recipient_limit
@by_token
def document(token: str, row: SigningRequest):
    refused = _document_refused(row, token, now=utcnow())
    return refused or _send_pdf(row, token, document=readable(row), filename=f"document-{row.id}.pdf")


def _document_refused(row: SigningRequest, token: str, *, now: datetime):
    """The page to answer instead of the document, its page images or its signed copy: 410 when it can no longer
    be read, 403 (the page, with its code step) while the batch asks for a one-time code this browser has not
    confirmed, signed or not; None when it may be shown."""
    state = state_of(row, now=now)
    if state not in DOCUMENT_STATES:
        return render_page(row, token, state=state, status=410)
    if not one_time_codes.may_act(
        db.session, request=row, code_id=verified_code(row), now=now, party=signer_code_party()
    ):
        return render_page(row, token, state=state, status=403)
    return None


@signing_page.bp.get("/<token>/pages/<int:number>")
@public
@page_image_limit
@by_token
def page_image(token: str, row: SigningRequest, number: int):
    """One page of the document as an image, for the page's document view (phones show no PDF in a frame)."""
    refused = _document_refused(row, token, now=utcnow())
    if refused is not None:
        return refused
    original = readable(row)
    try:
        data = (
            stored_page_image(storage=get_storage(), redis=get_redis(), document=original, number=number)
            if original is not None
            else None
        )
    except (StorageError, PopplerError) as exc:
        log(logger, logging.ERROR, "page image unavailable", request_id=row.id, page=number, error=str(exc))
        return again(row, token, status=503, error=_("The document cannot be shown right now. Please try again later."))
    if data is None:
        return render_page(row, token, state=state_of(row, now=utcnow()), status=404)
    return send_file(BytesIO(data), mimetype="image/webp", max_age=0, etag=False)


@signing_page.bp.get("/<token>/signed")
@public
@recipient_limit
@by_token
def signed_copy(token: str, row: SigningRequest):
    now = utcnow()
    # The code first, as for the document: a browser without one gets the code step, signed or not.
    refused = _document_refused(row, token, now=now)
    if refused is not None:
        return refused
    state = state_of(row, now=now)
    if state != PageState.SIGNED:
        return render_page(row, token, state=state, status=409)
    return _send_pdf(row, token, document=latest_document(db.session, row.id, "signed"), filename=signed_filename(row))


@signing_page.bp.get("/<token>/my-copy")
@public
@recipient_limit
@by_token
def party_copy(token: str, row: SigningRequest):
    """What this link's party signed, marked as waiting for the others: 404 for a link whose party has not signed
    (or a single-signer request, whose signed copy is ``signed_copy``)."""
    now = utcnow()
    party = signer_party_of_link()
    if party is None or state_of(row, now=now) != PageState.PARTY_SIGNED:
        return render_page(row, token, state=state_of(row, now=now), status=404)
    if not one_time_codes.may_act(
        db.session, request=row, code_id=verified_code(row), now=now, party=signer_code_party()
    ):
        return render_page(row, token, state=state_of(row, now=now), status=403)
    try:
        copy = party_copies.party_copy(db.session, request=row, party=party, storage=get_storage())
    except StorageError as exc:
        log(logger, logging.ERROR, "party copy unavailable", request_id=row.id, error=str(exc))
        return again(row, token, status=503, error=_("The document cannot be shown right now. Please try again later."))
    if copy is None:
        return render_page(row, token, state=state_of(row, now=now), status=404)
    response = send_file(
        BytesIO(copy.data),
        mimetype="application/pdf",
        download_name=copy.filename,
        as_attachment=True,
        max_age=0,
        etag=False,
    )
    response.headers["Content-Security-Policy"] = DOCUMENT_CSP
    response.headers["Cache-Control"] = "no-store"
    return response

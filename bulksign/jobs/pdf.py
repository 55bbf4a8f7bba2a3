"""Queue ``pdf``: render one request's document, store it, record it, hand the request to the mail step."""
from __future__ import annotations

import hashlib
import logging

from flask import current_app

from ..batches import close_if_done, mark_batch_started
from ..doc_templates import TemplateError, render_html
from ..extensions import db
from ..invitations import load_request, queue_invitation
from ..logs import log
from ..models import Document, SigningRequest, utcnow
from ..pdf import RenderError, render_pdf
from ..pipeline import enqueue_sends
from ..states import Status, transition
from ..storage import StorageError, get_storage

logger = logging.getLogger(__name__)


class TransientFailure(RuntimeError):
    """Raised after the request was put back in ``pending``: RQ re-runs the job after a backoff."""


def original_key(request: SigningRequest) -> str:
    return f"batches/{request.batch_id}/requests/{request.id}/original.pdf"


def document_context(request: SigningRequest) -> dict:
    """The variables a document sees: the row's columns, then the built-in ones."""
    return {**(request.data or {}), "email": request.email, "name": request.name, "phone": request.phone or ""}


def render(request_id: int) -> str:
    """pending → generating → generated, then queue the invitation. Returns what happened, for the job result."""
    session = db.session
    now = utcnow()
    if not transition(session, request_id, frm=Status.PENDING, to=Status.GENERATING, now=now,
                      attempts=SigningRequest.attempts + 1):
        session.rollback()
        return "skipped: not pending"
    request = load_request(db.session, request_id)
    if request.batch.status == "pending":
        mark_batch_started(session, batch_id=request.batch_id, now=now)
    session.commit()
    limit = current_app.config["RENDER_MAX_ATTEMPTS"]
    if request.attempts > limit:
        # Restarted by the reconciler again and again: the worker dies on this document.
        return _fail(request, f"The document could not be rendered after {limit} attempts "
                              "(the renderer stopped each time).", detail="")

    version = request.batch.template_version
    try:
        html = render_html(version.html, document_context(request))
        data = render_pdf(html, timeout=current_app.config["PDF_TIMEOUT_SECONDS"])
        key = original_key(request)
        get_storage().put(key, data, content_type="application/pdf")
    except TemplateError as exc:
        return _fail(request, f"The template could not be filled in: {exc}", detail="")
    except RenderError as exc:
        if exc.transient:
            return _retry_or_fail(request, exc.message, detail=exc.detail)
        return _fail(request, exc.message, detail=exc.detail)
    except StorageError as exc:
        return _retry_or_fail(request, str(exc), detail=repr(exc.__cause__))

    session.add(Document(request_id=request.id, kind="original", storage_key=key,
                         sha256=hashlib.sha256(data).hexdigest(), size=len(data), created_at=utcnow()))
    if not transition(session, request.id, frm=Status.GENERATING, to=Status.GENERATED, now=utcnow(),
                      attempts=0, error_message=None):
        # Cancelled (or reconciled) while rendering: the stored file is simply unused.
        session.rollback()
        return "skipped: no longer generating"
    # The invitation row is written in the same transaction: a generated request always has one.
    try:
        mail = queue_invitation(session, request_id=request_id, now=utcnow(), app=current_app._get_current_object())
    except TemplateError as exc:
        session.rollback()  # back in generating, without the document row
        return _fail(load_request(db.session, request_id), f"The invitation mail could not be filled in: {exc}", detail="")
    mail_id = mail.id
    session.commit()
    log(logger, logging.INFO, "document rendered", request_id=request_id, size=len(data))
    enqueue_sends([mail_id])
    return "generated"


def _retry_or_fail(request: SigningRequest, message: str, *, detail: str) -> str:
    session = db.session
    if request.attempts >= current_app.config["RENDER_MAX_ATTEMPTS"]:
        return _fail(request, f"{message} (gave up after {request.attempts} attempts)", detail=detail)
    transition(session, request.id, frm=Status.GENERATING, to=Status.PENDING, now=utcnow(),
               error_message=message, details={"retry": request.attempts})
    session.commit()
    log(logger, logging.WARNING, "render failed, will retry", request_id=request.id, attempt=request.attempts,
        error=message, detail=detail)
    raise TransientFailure(message)


def _fail(request: SigningRequest, message: str, *, detail: str) -> str:
    session = db.session
    request_id, batch_id = request.id, request.batch_id
    transition(session, request_id, frm=Status.GENERATING, to=Status.FAILED, now=utcnow(),
               error_message=message[:2000], details={"error": message[:500]})
    close_if_done(session, batch_id=batch_id, now=utcnow())
    session.commit()
    log(logger, logging.ERROR, "render failed", request_id=request_id, batch_id=batch_id, error=message,
        detail=detail)
    return "failed"

"""The recipient's page: ``/sign/<token>`` — view the document, sign or decline. No account, token only."""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Mapping
from datetime import datetime
from functools import wraps
from io import BytesIO

from flask import Blueprint, Flask, current_app, g, redirect, render_template, request, send_file, session, url_for
from flask_babel import gettext as _
from flask_babel import ngettext
from flask_wtf.csrf import CSRFError

from bulksign.core.extensions import db, get_redis, limiter, seconds_until_limit_resets
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.documents.document_pages import DocumentPages, document_pages
from bulksign.documents.document_pages import page_image as stored_page_image
from bulksign.documents.poppler import PopplerError
from bulksign.documents.seal_keys import seal_status
from bulksign.documents.sealing import latest_document, signed_filename
from bulksign.documents.storage import StorageError, get_storage
from bulksign.models import RECIPIENT_ROLE, Document, Party, SigningRequest, utcnow
from bulksign.people.auth import public
from bulksign.signing import one_time_codes, routing
from bulksign.signing.field_entry import FilledForm, Upload, form_fields
from bulksign.signing.links import find_by_token
from bulksign.signing.parties import find_party
from bulksign.signing.recipient_actions import (
    MAX_SIGNATURE_BYTES,
    contact_of,
    deadline_of,
    decline,
    open_party,
    open_request,
    sign,
    signer_party,
    signer_state,
)
from bulksign.views._forms import client_ip
from bulksign.views.recipient.recipient_headers import DOCUMENT_CSP

logger = logging.getLogger(__name__)

bp = Blueprint("signing", __name__, url_prefix="/sign")

#: One budget per visitor IP for every recipient-facing page (signing and /verify).
recipient_limit = limiter.shared_limit(
    lambda: current_app.config["SIGNING_RATE_LIMIT"], scope="recipient-pages", key_func=client_ip
)
#: The page images of a document: one page view fetches one per page (a 40-page contract, 40 at once), so they
#: have their own, larger budget; each still needs the token, and a guess costs as much as a page view.
page_image_limit = limiter.shared_limit(
    lambda: current_app.config["SIGNING_PAGE_IMAGE_RATE_LIMIT"], scope="recipient-page-images", key_func=client_ip
)

SIGNATURE_PREFIX = "data:image/png;base64,"
STATUS_CODES = {"unknown": 404, "expired": 410, "cancelled": 410, "unavailable": 404}
#: The states whose page shows the document or its signed copy: in these a batch that asks for a one-time code
#: asks this browser for one first (a forwarded link, before or after signing), and only these can serve a PDF.
DOCUMENT_STATES = ("waiting", "signed")
#: The form's name of a field's input: ``field-<name>``.
FIELD_INPUT = "field-"
#: Session key: request id (``<id>:<role>`` for another party) → the one-time code this browser verified for it
#: (the signed cookie keeps it).
VERIFIED_CODES = "verified_codes"


def _find(token: str) -> SigningRequest | None:
    """The request of the link, and in ``g.party`` the party whose link it is: another role's own link, the
    recipient's party for the request's own link of a request several sign, None for a single-signer request."""
    g.party = None  # never a party found for an earlier link in the same application context
    found = find_by_token(db.session, token)
    party = find_party(db.session, token) if found is None else None
    if party is not None:
        found = party.request
    if found is not None:
        g.party = signer_party(db.session, found, party)
        # The page speaks the batch's language, whatever the browser prefers.
        g.locale = found.batch.language
    return found


def _party() -> Party | None:
    return g.get("party")


def _state(row: SigningRequest, *, now: datetime) -> str:
    return signer_state(row, _party(), now=now)


def _other_party() -> bool:
    """The link is that of a party other than the recipient."""
    return _code_party() is not None


def _code_party() -> Party | None:
    """The party whose own one-time codes this link's are: another role's; None for the recipient's link."""
    return one_time_codes.code_party(_party())


def _code_key(row: SigningRequest) -> str:
    party = _code_party()
    return str(row.id) if party is None else f"{row.id}:{party.role}"


def _verified_code(row: SigningRequest) -> int | None:
    return session.get(VERIFIED_CODES, {}).get(_code_key(row))


def _code_status(row: SigningRequest, state: str) -> one_time_codes.CodeStatus | None:
    """Where the signer stands with one-time codes, when the batch asks for one and the page could show it."""
    if state not in DOCUMENT_STATES or not one_time_codes.required(row):
        return None
    return one_time_codes.status(
        db.session, request=row, code_id=_verified_code(row), now=utcnow(), party=_code_party()
    )


def _render(
    row: SigningRequest | None,
    token: str,
    *,
    state: str,
    error: str | None = None,
    form: dict | None = None,
    status: int | None = None,
    field_errors: Mapping[str, N_] | None = None,
):
    batch = row.batch if row is not None else None
    template = batch.template_version.template if batch is not None and batch.template_version else None
    code = _code_status(row, state) if row is not None else None
    # The document's pages (and their text) and the signed copy only once a code asked for is confirmed.
    shown = code is None or code.state == "verified"
    signed_document = latest_document(db.session, row.id, "signed") if state == "signed" and shown else None
    party = _party()
    pages = _pages(row) if state == "waiting" and shown else None
    fields = (
        form_fields(
            row,
            role=party.role if party is not None else RECIPIENT_ROLE,
            document=latest_document(db.session, row.id, "original"),
            pages=pages,
            typed=(form or {}).get("fields"),
            chosen=(form or {}).get("files"),
            errors=field_errors,
        )
        if state == "waiting" and shown
        else ()
    )
    declined_by = None
    if party is not None and state == "declined":
        declined_by = next((p for p in routing.parties_in_order(db.session, row.id) if p.status == "declined"), None)
    html = render_template(
        "signing/page.html",
        state=state,
        row=row,
        batch=batch,
        token=token,
        error=error,
        form=form or {},
        document_name=(template.name if template else batch.name) if batch is not None else "",
        contact=contact_of(batch) if batch is not None else None,
        deadline=deadline_of(row) if row is not None else None,
        signed_document=signed_document,
        code=code,
        pages=pages,
        fields=fields,
        field_errors=field_errors or {},
        # Who this link is for, and what they did: the party of a document several sign, else the request.
        me=party if party is not None else row,
        who=routing.party_person(party) if party is not None else (row.email, row.name or "") if row else ("", ""),
        role=party.role if party is not None and party.role != RECIPIENT_ROLE else None,
        declined_by=declined_by,
        declined_by_name=(routing.party_person(declined_by)[1] or routing.party_person(declined_by)[0])
        if declined_by is not None
        else None,
    )
    return html, status or (422 if error else STATUS_CODES.get(state, 200))


def _pages(row: SigningRequest) -> DocumentPages | None:
    """The document's pages and text for the page (with the earlier parties' signatures on it, for a document several
    sign); None when they cannot be read (Download still works)."""
    original = _readable(row)
    if original is None:
        return None
    try:
        return document_pages(storage=get_storage(), document=original)
    except (StorageError, PopplerError) as exc:
        log(
            logger,
            logging.ERROR,
            "document pages unavailable",
            request_id=row.id,
            document_id=original.id,
            error=str(exc),
        )
        return None


def _client() -> dict:
    return {"ip": client_ip(), "user_agent": request.user_agent.string}


def _again(
    row: SigningRequest,
    token: str,
    *,
    error: str,
    form: dict | None = None,
    status: int | None = None,
    field_errors: Mapping[str, N_] | None = None,
):
    """The page as it stands now (the row re-read), with a message for the recipient."""
    row = db.session.get(SigningRequest, row.id)
    if _party() is not None:
        db.session.refresh(_party())
    return _render(
        row, token, state=_state(row, now=utcnow()), error=error, form=form, status=status, field_errors=field_errors
    )


def _by_token(view):
    """Look the token up first: an unknown token gets the same "not valid" page on every route."""

    @wraps(view)
    def wrapped(token: str, **kwargs):
        row = _find(token)
        if row is None:
            return _render(None, token, state="unknown")
        if row.purged_at is not None:  # its files and personal data are gone: only the record of it is left
            return _recipient_error(
                _("This document is no longer available: it was deleted under the sender's retention rules."), 410
            )
        return view(token, row, **kwargs)

    return wrapped


@bp.get("/<token>")
@public
@recipient_limit
@_by_token
def page(token: str, row: SigningRequest):
    now = utcnow()
    if _other_party():
        open_party(db.session, party=_party(), now=now, **_client())
    else:
        open_request(db.session, request_id=row.id, now=now, **_client())
    row = db.session.get(SigningRequest, row.id)
    return _render(row, token, state=_state(row, now=now))


def signature_bytes(raw: str) -> bytes | None:
    """The drawn signature from the form's data URL; the domain checks that it is a real PNG."""
    raw = (raw or "").strip()
    if not raw:
        return None
    if not raw.startswith(SIGNATURE_PREFIX) or len(raw) > len(SIGNATURE_PREFIX) + MAX_SIGNATURE_BYTES * 4 // 3 + 4:
        raise ValueError(_("The drawn signature could not be read. Clear it and draw it again."))
    try:
        return base64.b64decode(raw[len(SIGNATURE_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(_("The drawn signature could not be read. Clear it and draw it again.")) from None


def _uploads() -> dict[str, Upload]:
    """The files chosen for attachment fields, by field name: each read to one byte past the limit at most (a
    bigger one is refused by its size without holding all of it)."""
    limit = current_app.config["ATTACHMENT_MAX_MB"] * 1024 * 1024
    return {
        key.removeprefix(FIELD_INPUT): Upload(filename=file.filename or "", data=file.stream.read(limit + 1))
        for key, file in request.files.items()
        if key.startswith(FIELD_INPUT) and file.filename
    }


@bp.post("/<token>/sign")
@public
@recipient_limit
@_by_token
def sign_document(token: str, row: SigningRequest):
    uploads = _uploads()
    form = {
        "name": request.form.get("name", ""),
        "consent": request.form.get("consent") == "yes",
        # What a refused try shows again: the values typed, the names of the files (chosen again).
        "fields": {k.removeprefix(FIELD_INPUT): v for k, v in request.form.items() if k.startswith(FIELD_INPUT)},
        "files": {name: upload.filename or name for name, upload in uploads.items()},
    }
    try:
        image = signature_bytes(request.form.get("signature", ""))
    except ValueError as exc:
        return _again(row, token, error=str(exc), form=form)
    outcome = sign(
        db.session,
        request_id=row.id,
        now=utcnow(),
        signer_name=form["name"],
        signature_png=image,
        consent=form["consent"],
        code_id=_verified_code(row),
        party=_party(),
        filled=FilledForm(
            typed=form["fields"],
            files=uploads,
            attachment_max_bytes=current_app.config["ATTACHMENT_MAX_MB"] * 1024 * 1024,
            storage=get_storage(),
        ),
        **_client(),
    )
    if outcome.status == "invalid":
        return _again(row, token, error=str(outcome.message), form=form, field_errors=outcome.field_errors)
    # Signed, signed already (a double click), a code needed first or no longer possible: the page shows which.
    return redirect(url_for(".page", token=token), 303)


@bp.post("/<token>/decline")
@public
@recipient_limit
@_by_token
def decline_document(token: str, row: SigningRequest):
    reason = request.form.get("reason", "")
    outcome = decline(
        db.session,
        request_id=row.id,
        now=utcnow(),
        reason=reason,
        code_id=_verified_code(row),
        party=_party(),
        **_client(),
    )
    if outcome.status == "invalid":
        return _again(row, token, error=str(outcome.message), form={"reason": reason, "declining": True})
    return redirect(url_for(".page", token=token), 303)


def _code_step(view):
    """A one-time code route: only while the page could show the document or its signed copy and the batch asks
    for a code; else the page."""

    @wraps(view)
    def wrapped(token: str, row: SigningRequest):
        if _state(row, now=utcnow()) not in DOCUMENT_STATES or not one_time_codes.required(row):
            return redirect(url_for(".page", token=token), 303)
        return view(token, row)

    return wrapped


@bp.post("/<token>/code")
@public
@recipient_limit
@_by_token
@_code_step
def send_code(token: str, row: SigningRequest):
    """Send a (new) one-time code to the signer's phone or mailbox."""
    now = utcnow()
    sent = one_time_codes.send_code(
        db.session,
        request_id=row.id,
        secret=current_app.config["SECRET_KEY"],
        now=now,
        party=_code_party(),
        **_client(),
    )
    refused = not_sent_error(sent, now=now)
    if refused:
        return _again(row, token, status=429, error=refused)
    one_time_codes.dispatch(sent)
    return redirect(url_for(".page", token=token), 303)


def not_sent_error(sent: one_time_codes.CodeSent, *, now: datetime) -> str | None:
    """Why no code was sent, for the page (None: it was)."""
    if sent.status == "too_soon":
        seconds = max(int((sent.retry_at - now).total_seconds()), 1)
        return _("A code was sent a moment ago. You can ask for a new one in %(seconds)s seconds.", seconds=seconds)
    if sent.status == "too_many":
        return _("Too many codes were asked for today. Try again tomorrow, or contact the sender.")
    return None


def code_error(check: one_time_codes.CodeCheck) -> str:
    """What the recipient reads after a code that did not work."""
    if check.status == "wrong":
        return ngettext(
            "The code is not right. You have %(num)s more try.",
            "The code is not right. You have %(num)s more tries.",
            check.tries_left,
        )
    return {
        "locked": _("That was the last try for this code. Ask for a new code."),
        "expired": _("This code has expired. Ask for a new code."),
        "used": _("This code has been used already. Ask for a new code."),
        "no_code": _("Ask for a code first."),
    }.get(check.status) or str(check.message)


@bp.post("/<token>/code/verify")
@public
@recipient_limit
@_by_token
@_code_step
def verify_code(token: str, row: SigningRequest):
    """Check the typed one-time code; the right one lets this browser see and sign the document."""
    check = one_time_codes.verify_code(
        db.session,
        request_id=row.id,
        code=request.form.get("code", ""),
        secret=current_app.config["SECRET_KEY"],
        now=utcnow(),
        party=_code_party(),
        **_client(),
    )
    if check.status != "verified":
        return _again(row, token, status=422, error=code_error(check))
    session[VERIFIED_CODES] = {**session.get(VERIFIED_CODES, {}), _code_key(row): check.code_id}
    return redirect(url_for(".page", token=token), 303)


def _readable(row: SigningRequest) -> Document | None:
    """What the signer reads: the original, or for a document several sign its newest version with the earlier
    parties' signatures on it."""
    if _party() is not None:
        return routing.current_document(db.session, row.id)
    return latest_document(db.session, row.id, "original")


def _send_pdf(row: SigningRequest, token: str, *, document: Document | None, filename: str):
    if document is None:
        return _again(
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
        return _again(
            row, token, status=503, error=_("The document cannot be shown right now. Please try again later.")
        )
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


@bp.get("/<token>/document")
@public
@recipient_limit
@_by_token
def document(token: str, row: SigningRequest):
    refused = _document_refused(row, token, now=utcnow())
    return refused or _send_pdf(row, token, document=_readable(row), filename=f"document-{row.id}.pdf")


def _document_refused(row: SigningRequest, token: str, *, now: datetime):
    """The page to answer instead of the document, its page images or its signed copy: 410 when it can no longer
    be read, 403 (the page, with its code step) while the batch asks for a one-time code this browser has not
    confirmed, signed or not; None when it may be shown."""
    state = _state(row, now=now)
    if state not in DOCUMENT_STATES:
        return _render(row, token, state=state, status=410)
    if not one_time_codes.may_act(db.session, request=row, code_id=_verified_code(row), now=now, party=_code_party()):
        return _render(row, token, state=state, status=403)
    return None


@bp.get("/<token>/pages/<int:number>")
@public
@page_image_limit
@_by_token
def page_image(token: str, row: SigningRequest, number: int):
    """One page of the document as an image, for the page's document view (phones show no PDF in a frame)."""
    refused = _document_refused(row, token, now=utcnow())
    if refused is not None:
        return refused
    original = _readable(row)
    try:
        data = (
            stored_page_image(storage=get_storage(), redis=get_redis(), document=original, number=number)
            if original is not None
            else None
        )
    except (StorageError, PopplerError) as exc:
        log(logger, logging.ERROR, "page image unavailable", request_id=row.id, page=number, error=str(exc))
        return _again(
            row, token, status=503, error=_("The document cannot be shown right now. Please try again later.")
        )
    if data is None:
        return _render(row, token, state=_state(row, now=utcnow()), status=404)
    return send_file(BytesIO(data), mimetype="image/webp", max_age=0, etag=False)


@bp.get("/<token>/signed")
@public
@recipient_limit
@_by_token
def signed_copy(token: str, row: SigningRequest):
    now = utcnow()
    # The code first, as for the document: a browser without one gets the code step, signed or not.
    refused = _document_refused(row, token, now=now)
    if refused is not None:
        return refused
    state = _state(row, now=now)
    if state != "signed":
        return _render(row, token, state=state, status=409)
    return _send_pdf(row, token, document=latest_document(db.session, row.id, "signed"), filename=signed_filename(row))


def _recipient_error(message: str, status: int):
    return render_template("signing/message.html", message=message, status=status), status


@bp.errorhandler(429)
def _too_many(error):
    page, status = _recipient_error(_("Too many requests from your network. Please wait a minute and try again."), 429)
    return page, status, {"Retry-After": str(seconds_until_limit_resets())}


@bp.errorhandler(CSRFError)
def _form_expired(error):
    return _recipient_error(_("The form expired. Go back, reload the page and try again."), 400)


def init_app(app: Flask) -> None:
    # The admin page reports which certificate seals documents (and whether it is self-signed).
    app.jinja_env.globals["seal_status"] = lambda: seal_status(current_app.config)

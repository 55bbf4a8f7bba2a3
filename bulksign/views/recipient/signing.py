"""The recipient's page: ``/sign/<token>`` — view the document, sign or decline. No account, token only."""

from __future__ import annotations

import base64
import binascii
import functools
import logging
from collections.abc import Mapping
from datetime import datetime
from functools import wraps
from typing import Any

from flask import Blueprint, Flask, current_app, g, redirect, render_template, request, session, url_for
from flask_babel import gettext as _
from flask_wtf.csrf import CSRFError

from bulksign.batches.corrections import replaced_request
from bulksign.core.extensions import db, limiter, seconds_until_limit_resets
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.doc_templates.template_parties import party_label
from bulksign.documents.document_pages import DocumentPages, document_pages
from bulksign.documents.poppler import PopplerError
from bulksign.documents.seal_keys import seal_status
from bulksign.documents.sealing import latest_document
from bulksign.documents.storage import StorageError, get_storage
from bulksign.models import RECIPIENT_ROLE, Batch, Document, Party, SigningRequest, utcnow
from bulksign.models.parties import PartyStatus
from bulksign.people.auth import public
from bulksign.signing import code_owners, countersign_runs, one_time_codes, routing, steps
from bulksign.signing.acts import Act
from bulksign.signing.attachments import Upload
from bulksign.signing.field_entry import FilledForm, earlier_values, form_fields
from bulksign.signing.links import find_by_token
from bulksign.signing.page_states import PageState, contact_of, deadline_of, signer_party, signer_state
from bulksign.signing.parties import find_party
from bulksign.signing.recipient_actions import decline, open_party, open_request, sign
from bulksign.signing.signer_input import MAX_SIGNATURE_BYTES, SIGNATURE
from bulksign.views._forms import client_ip

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
#: Session key: countersign link id → the last run this browser started on it, whose drawing the next documents
#: offer (``countersign_runs.adopted``), on the countersigner's pages and on a document's own page.
ADOPTED_RUNS = "countersign_runs"
STATUS_CODES = {
    PageState.UNKNOWN: 404,
    PageState.EXPIRED: 410,
    PageState.CANCELLED: 410,
    PageState.UNAVAILABLE: 404,
    PageState.REPLACED: 410,
}
#: The states whose page shows the document or its signed copy: in these a batch that asks for a one-time code
#: asks this browser for one first (a forwarded link, before or after signing), and only these can serve a PDF.
DOCUMENT_STATES = (PageState.WAITING, PageState.SIGNED)
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


def signer_party_of_link() -> Party | None:
    """The party whose link this is (the recipient's for the request's own link); None for a single-signer one."""
    return _party()


def state_of(row: SigningRequest, *, now: datetime) -> PageState:
    return signer_state(row, _party(), now=now)


def signer_code_party() -> Party | None:
    """The party whose own one-time codes this link's are: another role's; None for the recipient's link."""
    return code_owners.code_party(_party())


def code_key(row: SigningRequest) -> str:
    party = signer_code_party()
    return str(row.id) if party is None else f"{row.id}:{party.role}"


def verified_code(row: SigningRequest) -> int | None:
    return session.get(VERIFIED_CODES, {}).get(code_key(row))


def _code_status(row: SigningRequest, state: PageState) -> one_time_codes.CodeStatus | None:
    """Where the signer stands with one-time codes, when the batch asks for one and the page could show it."""
    if state not in DOCUMENT_STATES or not one_time_codes.required(row):
        return None
    return one_time_codes.status(
        db.session, request=row, code_id=verified_code(row), now=utcnow(), party=signer_code_party()
    )


def render_page(
    row: SigningRequest | None,
    token: str,
    *,
    state: PageState,
    error: str | None = None,
    form: dict | None = None,
    status: int | None = None,
    field_errors: Mapping[str, N_] | None = None,
):
    batch = row.batch if row is not None else None
    template = batch.template_version.template if batch is not None and batch.template_version else None
    code = _code_status(row, state) if row is not None else None
    # The document's pages (and their text) and the signed copy only once a code asked for is confirmed.
    shown = code is None or code.state == one_time_codes.CodeState.VERIFIED
    signed_document = (
        latest_document(db.session, row.id, "signed")
        if row is not None and state == PageState.SIGNED and shown
        else None
    )
    party = _party()
    pages = _pages(row) if row is not None and state == PageState.WAITING and shown else None
    fields = (
        form_fields(
            row,
            role=party.role if party is not None else RECIPIENT_ROLE,
            document=latest_document(db.session, row.id, "original"),
            pages=pages,
            typed=(form or {}).get("fields"),
            chosen=(form or {}).get("files"),
            errors=field_errors,
            earlier=earlier_values(db.session, request_id=row.id),
        )
        if row is not None and state == PageState.WAITING and shown
        else ()
    )
    if not form and party is not None and state == PageState.WAITING and shown:
        # A countersigner who signed others in this browser: the drawing is offered again (``ADOPTED_RUNS``).
        runs = session.get(ADOPTED_RUNS) or {}
        form = adopted_form(countersign_runs.adopted_by_party(db.session, party=party, runs=runs))
    declined_by = None
    if row is not None and party is not None and state == PageState.DECLINED:
        declined_by = next(
            (p for p in routing.parties_in_order(db.session, row.id) if p.status == PartyStatus.DECLINED), None
        )
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
        page_src=functools.partial(url_for, "signing.page_image", token=token),
        field_errors=field_errors or {},
        # Who this link is for, and what they did: the party of a document several sign, else the request.
        me=party if party is not None else row,
        who=routing.party_person(party) if party is not None else (row.email, row.name or "") if row else ("", ""),
        # A document several sign says who each reader signs as, and who declined, by the party's label.
        role=_label(batch, party.role) if party is not None and batch is not None else None,
        declined_by=declined_by,
        declined_by_label=_label(batch, declined_by.role) if declined_by is not None and batch is not None else None,
        declined_by_name=(routing.party_person(declined_by)[1] or routing.party_person(declined_by)[0])
        if declined_by is not None
        else None,
    )
    return html, status or (422 if error else STATUS_CODES.get(state, 200))


def adopted_form(found: countersign_runs.Adopted | None) -> dict:
    """The sign form prefilled with what the countersigner last signed with in this browser (said to be kept)."""
    if found is None:
        return {}
    drawing = SIGNATURE_PREFIX + base64.b64encode(found.signature_png).decode("ascii")
    return {"name": found.signer_name, "signature": drawing, "adopted": True}


def _label(batch: Batch, role: str) -> str:
    return party_label(batch.template_version, role=role, language=batch.language or "en")


def _pages(row: SigningRequest) -> DocumentPages | None:
    """The document's pages and text for the page (with the earlier parties' signatures on it, for a document several
    sign); None when they cannot be read (Download still works)."""
    original = readable(row)
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


def client() -> dict:
    return {"ip": client_ip(), "user_agent": request.user_agent.string}


def again(
    row: SigningRequest,
    token: str,
    *,
    error: str,
    form: dict | None = None,
    status: int | None = None,
    field_errors: Mapping[str, N_] | None = None,
):
    """The page as it stands now (the row re-read), with a message for the recipient."""
    row = db.session.get_one(SigningRequest, row.id)
    if _party() is not None:
        db.session.refresh(_party())
    return render_page(
        row, token, state=state_of(row, now=utcnow()), error=error, form=form, status=status, field_errors=field_errors
    )


def by_token(view):
    """Look the token up first: an unknown token gets the same "not valid" page on every route."""

    @wraps(view)
    def wrapped(token: str, **kwargs):
        row = _find(token)
        if row is None:
            replaced = replaced_request(db.session, token=token)
            if replaced is not None and replaced.purged_at is None:
                g.locale = replaced.batch.language
                return render_page(None, token, state=PageState.REPLACED)
            return render_page(None, token, state=PageState.UNKNOWN)
        if row.purged_at is not None:  # its files and personal data are gone: only the record of it is left
            return _recipient_error(
                _("This document is no longer available: it was deleted under the sender's retention rules."), 410
            )
        return view(token, row, **kwargs)

    return wrapped


@bp.get("/<token>")
@public
@recipient_limit
@by_token
def page(token: str, row: SigningRequest):
    now = utcnow()
    other = signer_code_party()  # the link is that of a party other than the recipient
    if other is not None:
        open_party(db.session, party=other, now=now, **client())
    else:
        open_request(db.session, request_id=row.id, now=now, **client())
    row = db.session.get_one(SigningRequest, row.id)
    return render_page(row, token, state=state_of(row, now=now))


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
@by_token
def sign_document(token: str, row: SigningRequest):
    uploads = _uploads()
    form: dict[str, Any] = {
        "name": request.form.get("name", ""),
        "consent": request.form.get("consent") == "yes",
        # What a refused try shows again: the values typed, the names of the files (chosen again).
        "fields": {k.removeprefix(FIELD_INPUT): v for k, v in request.form.items() if k.startswith(FIELD_INPUT)},
        "files": {name: upload.filename or name for name, upload in uploads.items()},
    }
    try:
        image = signature_bytes(request.form.get("signature", ""))
    except ValueError as exc:
        return again(row, token, error=str(exc), form={**form, "wrong": SIGNATURE})
    # A drawing that could be read is drawn again on the pad when the page comes back with a message.
    form["signature"] = request.form.get("signature", "") if image else ""
    outcome = sign(
        db.session,
        request_id=row.id,
        now=utcnow(),
        signer_name=form["name"],
        signature_png=image,
        consent=form["consent"],
        code_id=verified_code(row),
        party=_party(),
        filled=FilledForm(
            typed=form["fields"],
            files=uploads,
            attachment_max_bytes=current_app.config["ATTACHMENT_MAX_MB"] * 1024 * 1024,
            storage=get_storage(),
        ),
        **client(),
    )
    if outcome.status == Act.INVALID:
        form["wrong"] = outcome.signer_field
        if outcome.signer_field == SIGNATURE:
            form["signature"] = ""  # the drawing itself is what is refused: the pad starts empty
        return again(row, token, error=str(outcome.message), form=form, field_errors=outcome.field_errors)
    # Signed, signed already (a double click), a code needed first or no longer possible: the page shows which.
    return redirect(url_for(".page", token=token), 303)


@bp.post("/<token>/decline")
@public
@recipient_limit
@by_token
def decline_document(token: str, row: SigningRequest):
    reason = request.form.get("reason", "")
    outcome = decline(
        db.session,
        request_id=row.id,
        now=utcnow(),
        reason=reason,
        code_id=verified_code(row),
        party=_party(),
        **client(),
    )
    if outcome.status == Act.INVALID:
        return again(row, token, error=str(outcome.message), form={"reason": reason, "declining": True})
    return redirect(url_for(".page", token=token), 303)


def readable(row: SigningRequest) -> Document | None:
    """What the signer reads: the original, or for a document several sign its newest version with the earlier
    parties' signatures on it."""
    if _party() is not None:
        return steps.current_document(db.session, row.id)
    return latest_document(db.session, row.id, "original")


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

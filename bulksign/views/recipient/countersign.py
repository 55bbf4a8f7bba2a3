"""The countersigner's page: ``/countersign/<token>`` — the documents of a batch ready for one person, read one by
one, signed all at once (a job, with live progress) or declined one by one. No account, the digest's link only.
"""

from __future__ import annotations

import logging
import tempfile
import zipfile
from functools import wraps
from io import BytesIO
from typing import Any

from flask import Blueprint, abort, current_app, g, redirect, render_template, request, send_file, session, url_for
from flask_babel import gettext as _

from bulksign.batches import versions
from bulksign.core.extensions import db, get_redis
from bulksign.core.logs import log
from bulksign.documents.audit_record import document_title
from bulksign.documents.document_pages import document_pages
from bulksign.documents.document_pages import page_image as stored_page_image
from bulksign.documents.poppler import PopplerError
from bulksign.documents.storage import StorageError, get_storage
from bulksign.models import CountersignLink, utcnow
from bulksign.models.status import BATCH_FINAL
from bulksign.people.auth import public
from bulksign.signing import countersign, countersign_done, countersign_runs, one_time_codes
from bulksign.signing.acts import Act
from bulksign.signing.countersign_listed import Listed
from bulksign.signing.countersign_runs import RunStatus
from bulksign.signing.digests import countersigner_name, find_link
from bulksign.signing.one_time_codes import CheckStatus
from bulksign.signing.page_states import PageState, contact_of
from bulksign.views._forms import client_ip
from bulksign.views._live import live_tag, tagged, unchanged
from bulksign.views.recipient.recipient_headers import polling_csp
from bulksign.views.recipient.signing import (
    ADOPTED_RUNS,
    adopted_form,
    page_image_limit,
    recipient_limit,
    signature_bytes,
)
from bulksign.views.recipient.signing_codes import code_error, not_sent_error

logger = logging.getLogger(__name__)
bp = Blueprint("countersign", __name__, url_prefix="/countersign")

#: Session key: countersign link id → the one-time code of the link this browser verified (the signed cookie keeps
#: it, for ``one_time_codes.VERIFIED_FOR``).
VERIFIED_LINK_CODES = "countersign_codes"


def _by_link(view):
    """Look the link up first: an unknown token gets the signing page's "not valid" answer on every route."""

    @wraps(view)
    def wrapped(token: str, **kwargs):
        link = find_link(db.session, token)
        if link is None:
            return render_template("signing/page.html", state=PageState.UNKNOWN, token=token), 404
        g.locale = link.batch.language
        return view(token, link, **kwargs)

    return wrapped


def _client() -> dict:
    return {"ip": client_ip(), "user_agent": request.user_agent.string}


def _code_id(link: CountersignLink) -> int | None:
    return session.get(VERIFIED_LINK_CODES, {}).get(str(link.id))


def _code_page(token: str, link: CountersignLink, *, error: str | None = None, status=200):
    """The code step: nothing of the documents (their people are personal data) until a code is confirmed."""
    code = one_time_codes.link_status(db.session, link=link, code_id=_code_id(link), now=utcnow())
    html = render_template(
        "signing/countersign.html",
        token=token,
        link=link,
        batch=link.batch,
        document_name=document_title(link.batch),
        code=code,
        contact=contact_of(link.batch),
        error=error,
        form={},
    )
    return html, status


def _adopted_form(link: CountersignLink) -> dict[str, Any]:
    """The sign form as this browser last signed on the link (its name and drawing, said to be kept), or empty."""
    return adopted_form(
        countersign_runs.adopted(db.session, link=link, run_id=session.get(ADOPTED_RUNS, {}).get(str(link.id)))
    )


def _unlocked(view):
    """A route that shows or acts on the documents: in a batch that asks for a one-time code, only for a browser that
    confirmed a code of the link within ``VERIFIED_FOR``; others get the code step (403)."""

    @wraps(view)
    def wrapped(token: str, link: CountersignLink, **kwargs):
        if not countersign.unlocked(db.session, link=link, code_id=_code_id(link), now=utcnow()):
            return _code_page(token, link, status=403)
        return view(token, link, **kwargs)

    return wrapped


def _page(token: str, link: CountersignLink, *, error: str | None = None, form: dict | None = None, status=200):
    listing = countersign.ready_page(
        db.session,
        link=link,
        query=request.values.get("q", ""),  # a refused "Sign all" shows its search again
        page=request.args.get("page", 1, type=int) or 1,
        now=utcnow(),
    )
    finished = countersign_done.finished_page(db.session, link=link, page=request.args.get("done", 1, type=int) or 1)
    html = render_template(
        "signing/countersign.html",
        since=versions.version_of(db.session, batch_id=link.batch_id),
        signer_name=countersigner_name(db.session, link=link),
        token=token,
        link=link,
        batch=link.batch,
        document_name=document_title(link.batch),
        listing=listing,
        code=None,
        finished=finished,
        contact=contact_of(link.batch),
        error=error,
        form=form or _adopted_form(link),
    )
    return html, status, {"Content-Security-Policy": polling_csp()}


@bp.get("/<token>")
@public
@recipient_limit
@_by_link
def page(token: str, link: CountersignLink):
    if not countersign.unlocked(db.session, link=link, code_id=_code_id(link), now=utcnow()):
        return _code_page(token, link)
    return _page(token, link)


def _code_step(view):
    """A one-time code route: only in a batch that asks for one; else the page."""

    @wraps(view)
    def wrapped(token: str, link: CountersignLink):
        if not link.batch.one_time_code:
            return redirect(url_for(".page", token=token), 303)
        return view(token, link)

    return wrapped


@bp.post("/<token>/code")
@public
@recipient_limit
@_by_link
@_code_step
def send_code(token: str, link: CountersignLink):
    """Send a (new) one-time code of the link to the countersigner's phone or mailbox."""
    now = utcnow()
    sent = one_time_codes.send_link_code(
        db.session, link=link, secret=current_app.config["SECRET_KEY"], now=now, **_client()
    )
    refused = not_sent_error(sent, now=now)
    if refused:
        return _code_page(token, link, error=refused, status=429)
    one_time_codes.dispatch(sent)
    return redirect(url_for(".page", token=token), 303)


@bp.post("/<token>/code/verify")
@public
@recipient_limit
@_by_link
@_code_step
def verify_code(token: str, link: CountersignLink):
    """Check the typed code; the right one lets this browser see, sign and decline the link's documents."""
    check = one_time_codes.verify_link_code(
        db.session,
        link=link,
        code=request.form.get("code", ""),
        secret=current_app.config["SECRET_KEY"],
        now=utcnow(),
        **_client(),
    )
    if check.status != CheckStatus.VERIFIED:
        return _code_page(token, link, error=code_error(check), status=422)
    session[VERIFIED_LINK_CODES] = {**session.get(VERIFIED_LINK_CODES, {}), str(link.id): check.code_id}
    return redirect(url_for(".page", token=token), 303)


def _chosen() -> Listed | None:
    """What the form consents to: the documents "Sign all" listed (as the page carried them; None: it carried
    none), or those ticked (none ticked: an empty ``Listed``)."""
    if request.form.get("all") == "1":
        return Listed.parse(request.form.get("listed"))
    raw = request.form.getlist("party_ids")
    if not all(value.isdigit() for value in raw):
        abort(400, description=_("The selection contains an invalid document."))
    return Listed.parse(",".join(raw)) or Listed()


@bp.post("/<token>/sign")
@public
@recipient_limit
@_by_link
@_unlocked
def sign_all(token: str, link: CountersignLink):
    form: dict[str, Any] = {
        "name": request.form.get("name", ""),
        "consent": request.form.get("consent") == "yes",
        "all": "0" if request.form.get("all") == "0" else "1",
    }
    try:
        image = signature_bytes(request.form.get("signature", ""))
    except ValueError as exc:
        return _page(token, link, error=str(exc), form={**form, "wrong": "signature"}, status=422)
    # A drawing that could be read is drawn again on the pad when the page comes back with a message.
    form["signature"] = request.form.get("signature", "") if image else ""
    chosen = _chosen()
    if chosen == Listed():
        return _page(token, link, error=_("Tick the documents to sign, or sign them all."), form=form, status=422)
    started = countersign_runs.start_run(
        db.session,
        link=link,
        listed=chosen,
        query=request.form.get("q", ""),
        signer_name=form["name"],
        signature_png=image,
        consent=form["consent"],
        now=utcnow(),
        code_id=_code_id(link),
        **_client(),
    )
    if started.status == RunStatus.CODE_NEEDED:  # the code ran out since the page was shown
        return _code_page(token, link, status=403)
    if started.status == RunStatus.INVALID:
        return _page(token, link, error=str(started.message), form=form, status=422)
    if started.status == RunStatus.CHANGED:  # the page is shown again, as it is now: its list is what a new run signs
        return _page(token, link, error=str(started.message), form=form, status=409)
    if started.status == RunStatus.NOTHING:
        return _page(
            token, link, error=_("None of the chosen documents waits for your signature any more."), status=409
        )
    session[ADOPTED_RUNS] = {**session.get(ADOPTED_RUNS, {}), str(link.id): started.run_id}
    return redirect(url_for(".run", token=token, run_id=started.run_id), 303)


@bp.get("/<token>/runs/<int:run_id>")
@public
@recipient_limit
@_by_link
@_unlocked
def run(token: str, link: CountersignLink, run_id: int):
    """The run's progress: the whole page, or (HTMX polling) its progress partial."""
    progress = countersign_runs.run_progress(db.session, link=link, run_id=run_id, now=utcnow())
    if progress is None:
        abort(404)
    template = (
        "signing/_countersign_progress.html" if request.headers.get("HX-Request") else "signing/countersign_run.html"
    )
    html = render_template(
        template, token=token, link=link, document_name=document_title(link.batch), progress=progress
    )
    return html, 200, {"Content-Security-Policy": polling_csp()}


@bp.get("/<token>/live")
@public
@recipient_limit
@_by_link
@_unlocked
def live(token: str, link: CountersignLink):
    """What the open page polls: nothing while the batch stands where the page saw it (``since``; 304 while it
    stays so), else how many documents wait and how many are finished now, with a link to see them."""
    version = versions.version_of(db.session, batch_id=link.batch_id)
    tag = live_tag(version)
    if (same := unchanged(tag)) is not None:
        return same
    changed = version != request.args.get("since", type=int)
    now = utcnow()
    html = render_template(
        "signing/_countersign_live.html",
        token=token,
        since=request.args.get("since", type=int),
        final=link.batch.status in BATCH_FINAL,
        etag=tag,
        waiting=countersign.ready_page(db.session, link=link, query="", page=1, now=now).total if changed else 0,
        finished=countersign_done.finished_page(db.session, link=link, page=1).total if changed else 0,
        changed=changed,
    )
    return tagged(html, tag)


def _readable(link: CountersignLink, party_id: int) -> countersign.Readable:
    """The document as the countersigner reads it; 404 when it is not ready for them (or not theirs)."""
    readable = countersign.readable_document(db.session, link=link, party_id=party_id, now=utcnow())
    if readable is None:
        abort(404)
    return readable


@bp.get("/<token>/documents/<int:party_id>")
@public
@recipient_limit
@_by_link
@_unlocked
def document(token: str, link: CountersignLink, party_id: int):
    """One ready document as page images, with its decline form."""
    readable = _readable(link, party_id)
    try:
        pages = document_pages(storage=get_storage(), document=readable.document)
    except (StorageError, PopplerError):
        pages = None
    return render_template(
        "signing/countersign_document.html",
        token=token,
        link=link,
        document_name=document_title(link.batch),
        party_id=party_id,
        readable=readable,
        pages=pages,
        signer_name=countersigner_name(db.session, link=link),
        form=_adopted_form(link),
    )


@bp.get("/<token>/documents/<int:party_id>/pages/<int:number>")
@public
@page_image_limit
@_by_link
@_unlocked
def page_image(token: str, link: CountersignLink, party_id: int, number: int):
    readable = _readable(link, party_id)
    try:
        data = stored_page_image(storage=get_storage(), redis=get_redis(), document=readable.document, number=number)
    except (StorageError, PopplerError):
        abort(503)
    if data is None:
        abort(404)
    return send_file(BytesIO(data), mimetype="image/webp", max_age=0, etag=False)


@bp.post("/<token>/documents/<int:party_id>/open")
@public
@recipient_limit
@_by_link
@_unlocked
def open_own(token: str, link: CountersignLink, party_id: int):
    """A document with fields to fill: its own signing page."""
    own = countersign.own_link(
        db.session, link=link, party_id=party_id, secret=current_app.config["SECRET_KEY"], now=utcnow()
    )
    if own is None:
        abort(404)
    return redirect(url_for("signing.page", token=own), 303)


@bp.post("/<token>/documents/<int:party_id>/decline")
@public
@recipient_limit
@_by_link
@_unlocked
def decline(token: str, link: CountersignLink, party_id: int):
    reason = request.form.get("reason", "")
    outcome = countersign.decline_one(
        db.session, link=link, party_id=party_id, reason=reason, now=utcnow(), code_id=_code_id(link), **_client()
    )
    if outcome is None:
        abort(404)
    if outcome.status == Act.CODE_NEEDED:
        return _code_page(token, link, status=403)
    if outcome.status == Act.INVALID:
        return _page(token, link, error=str(outcome.message), status=422)
    return redirect(url_for(".page", token=token), 303)


@bp.get("/<token>/signed/<int:party_id>")
@public
@recipient_limit
@_by_link
@_unlocked
def signed_copy(token: str, link: CountersignLink, party_id: int):
    """The sealed copy of one of the countersigner's signed documents (no mail brings it: ``countersign_done``)."""
    copy = countersign_done.signed_copy(db.session, link=link, party_id=party_id)
    if copy is None:
        abort(404)
    try:
        data = get_storage().get(copy.document.storage_key)
    except StorageError as exc:
        log(logger, logging.ERROR, "document missing from storage", document_id=copy.document.id, error=str(exc))
        abort(503)
    # ``send_file`` writes the name as RFC 5987 asks: an ASCII fallback and ``filename*`` in UTF-8.
    return send_file(
        BytesIO(data),
        mimetype="application/pdf",
        download_name=copy.filename(title=document_title(link.batch)),
        as_attachment=True,
        max_age=0,
        etag=False,
    )


#: Most documents one "download all" ZIP holds (the newest): a bigger set is downloaded a page at a time.
ZIP_MAX = 500


@bp.get("/<token>/signed.zip")
@public
@recipient_limit
@_by_link
@_unlocked
def signed_zip(token: str, link: CountersignLink):
    """Every finished document's sealed copy (at most ``ZIP_MAX``, the newest), each named as its own download."""
    copies = countersign_done.signed_copies(db.session, link=link, limit=ZIP_MAX)
    if not copies:
        abort(404)
    title = document_title(link.batch)
    out = tempfile.SpooledTemporaryFile(max_size=32 * 1024 * 1024)
    names: set[str] = set()
    try:
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
            for copy in copies:
                name, stem, n = copy.filename(title=title), copy.filename(title=title)[:-4], 1
                while name in names:  # two people of one name: "… (2).pdf"
                    n += 1
                    name = f"{stem} ({n}).pdf"
                names.add(name)
                archive.writestr(name, get_storage().get(copy.document.storage_key))
    except StorageError as exc:
        log(logger, logging.ERROR, "document missing from storage", batch_id=link.batch_id, error=str(exc))
        abort(503)
    out.seek(0)
    return send_file(
        out,
        mimetype="application/zip",
        download_name=f"{countersign_done.safe_name(title)}.zip",
        as_attachment=True,
        max_age=0,
        etag=False,
    )

"""The signing page's one-time code step: a code sent to the signer's phone or mailbox, and checked."""

from __future__ import annotations

from datetime import datetime
from functools import wraps

from flask import current_app, redirect, request, session, url_for
from flask_babel import gettext as _
from flask_babel import ngettext

from bulksign.core.extensions import db
from bulksign.models import SigningRequest, utcnow
from bulksign.people.auth import public
from bulksign.signing import one_time_codes
from bulksign.signing.one_time_codes import CheckStatus
from bulksign.views.recipient import signing as signing_page
from bulksign.views.recipient.signing import (
    DOCUMENT_STATES,
    VERIFIED_CODES,
    again,
    by_token,
    client,
    code_key,
    recipient_limit,
    signer_code_party,
    state_of,
)


def _code_step(view):
    """A one-time code route: only while the page could show the document or its signed copy and the batch asks
    for a code; else the page."""

    @wraps(view)
    def wrapped(token: str, row: SigningRequest):
        if state_of(row, now=utcnow()) not in DOCUMENT_STATES or not one_time_codes.required(row):
            return redirect(url_for(".page", token=token), 303)
        return view(token, row)

    return wrapped


@signing_page.bp.post("/<token>/code")
@public
@recipient_limit
@by_token
@_code_step
def send_code(token: str, row: SigningRequest):
    """Send a (new) one-time code to the signer's phone or mailbox."""
    now = utcnow()
    sent = one_time_codes.send_code(
        db.session,
        request_id=row.id,
        secret=current_app.config["SECRET_KEY"],
        now=now,
        party=signer_code_party(),
        **client(),
    )
    refused = not_sent_error(sent, now=now)
    if refused:
        return again(row, token, status=429, error=refused)
    one_time_codes.dispatch(sent)
    return redirect(url_for(".page", token=token), 303)


def not_sent_error(sent: one_time_codes.CodeSent, *, now: datetime) -> str | None:
    """Why no code was sent, for the page (None: it was)."""
    if sent.status == one_time_codes.SendStatus.TOO_SOON and sent.retry_at is not None:
        seconds = max(int((sent.retry_at - now).total_seconds()), 1)
        return _("A code was sent a moment ago. You can ask for a new one in %(seconds)s seconds.", seconds=seconds)
    if sent.status == one_time_codes.SendStatus.TOO_MANY:
        return _("Too many codes were asked for today. Try again tomorrow, or contact the sender.")
    return None


def code_error(check: one_time_codes.CodeCheck) -> str:
    """What the recipient reads after a code that did not work."""
    if check.status == CheckStatus.WRONG:
        return ngettext(
            "The code is not right. You have %(num)s more try.",
            "The code is not right. You have %(num)s more tries.",
            check.tries_left,
        )
    return {
        CheckStatus.LOCKED: _("That was the last try for this code. Ask for a new code."),
        CheckStatus.EXPIRED: _("This code has expired. Ask for a new code."),
        CheckStatus.USED: _("This code has been used already. Ask for a new code."),
        CheckStatus.NO_CODE: _("Ask for a code first."),
    }.get(check.status) or str(check.message)


@signing_page.bp.post("/<token>/code/verify")
@public
@recipient_limit
@by_token
@_code_step
def verify_code(token: str, row: SigningRequest):
    """Check the typed one-time code; the right one lets this browser see and sign the document."""
    check = one_time_codes.verify_code(
        db.session,
        request_id=row.id,
        code=request.form.get("code", ""),
        secret=current_app.config["SECRET_KEY"],
        now=utcnow(),
        party=signer_code_party(),
        **client(),
    )
    if check.status != CheckStatus.VERIFIED:
        return again(row, token, status=422, error=code_error(check))
    session[VERIFIED_CODES] = {**session.get(VERIFIED_CODES, {}), code_key(row): check.code_id}
    return redirect(url_for(".page", token=token), 303)

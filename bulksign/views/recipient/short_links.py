"""``/s/<token>``: the signing link as a text message carries it, short enough for two SMS segments; it leads to
the signing page of the same token (``/sign/<token>``), which decides everything."""

from __future__ import annotations

from flask import Blueprint, abort, redirect, url_for

from bulksign.people.auth import public

bp = Blueprint("short_links", __name__)

#: Longer than any token we make (``tokens.signing_token``: 43 characters).
MAX_TOKEN = 128


@bp.get("/s/<token>")
@public
def short(token: str):
    if len(token) > MAX_TOKEN:
        abort(404)
    return redirect(url_for("signing.page", token=token), 302)

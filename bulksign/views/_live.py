"""Live fragments, which pages poll: tagged with the version of what they show (an ETag), and answered 304 with
no body, nothing read beyond that version, while it stands (static/live.js sends the tag back)."""

from __future__ import annotations

import hashlib

from flask import Response, make_response, request
from flask_babel import get_locale
from flask_login import current_user


def live_tag(*versions: object) -> str:
    """The ETag of this fragment at ``versions``: the same URL, reader and language at the same versions is the
    same HTML; another version, URL or reader, another tag."""
    key = "|".join([request.full_path, str(get_locale()), str(current_user.get_id()), *map(str, versions)])
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def unchanged(tag: str) -> Response | None:
    """The 304 when the browser already shows the fragment at ``tag``; None when it must be rendered."""
    if not request.if_none_match.contains(tag):
        return None
    response = Response(status=304)
    response.set_etag(tag)
    response.headers["Cache-Control"] = "no-store"
    return response


def tagged(html: str, tag: str) -> Response:
    """The rendered fragment with its tag, kept by no cache (the page's script sends the tag back itself)."""
    response = make_response(html)
    response.set_etag(tag)
    response.headers["Cache-Control"] = "no-store"
    return response

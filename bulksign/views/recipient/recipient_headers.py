"""What every recipient-facing response carries because its URL holds a secret: no caching, no referrer, a strict
Content Security Policy, never framed; and the development server's access log without signing tokens."""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote

from flask import Flask, request

from bulksign.views.brand import logo_origin

#: Recipient pages: our own files only, no inline script, no frames, never framed by anyone.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


def page_csp() -> str:
    """``PAGE_CSP``, letting images come from the organisation's logo host when ``ORG_LOGO`` is a URL."""
    origin = logo_origin()
    return PAGE_CSP.replace("img-src 'self' data:;", f"img-src 'self' data: {origin};") if origin else PAGE_CSP


def polling_csp() -> str:
    """``page_csp`` for a page that polls its own origin for a partial (HTMX): the countersigner's progress."""
    return f"{page_csp()}; connect-src 'self'"


#: The PDF itself, opened or downloaded: browsers' PDF viewers are frames of our origin.
DOCUMENT_CSP = "default-src 'none'; frame-ancestors 'self'"


def is_recipient_path(path: str) -> bool:
    return (
        path == "/sign"
        or path.startswith(("/sign/", "/countersign/"))
        or path == "/verify"
        or path.startswith("/verify/")
    )


class RedactSigningTokens(logging.Filter):
    """The development server's access log (``werkzeug``) writes request lines; the token must not appear."""

    TOKEN_IN_PATH = re.compile(r"(/(?:counter)?sign/)[^/\s?\"]+")

    def filter(self, record: logging.LogRecord) -> bool:
        # Read as the router reads the path: /%73ign/… and //sign/… are /sign/… too.
        message = re.sub(r"/{2,}", "/", unquote(record.getMessage()))
        if "sign/" in message:
            record.msg, record.args = self.TOKEN_IN_PATH.sub(r"\1<token>", message), None
        return True


def init_app(app: Flask) -> None:
    werkzeug_logger = logging.getLogger("werkzeug")
    if not any(isinstance(f, RedactSigningTokens) for f in werkzeug_logger.filters):
        werkzeug_logger.addFilter(RedactSigningTokens())

    @app.after_request
    def _recipient_headers(response):
        # On every recipient-facing response, including 404s and 429s: the URL holds a secret.
        if is_recipient_path(request.path):
            response.headers["Cache-Control"] = "no-store"
            response.headers.pop("Expires", None)
            response.headers["Referrer-Policy"] = "no-referrer"
            response.headers["X-Content-Type-Options"] = "nosniff"
            response.headers.setdefault("Content-Security-Policy", page_csp())
            response.headers.setdefault("X-Frame-Options", "DENY")
        return response

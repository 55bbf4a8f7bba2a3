"""Every error is a page of the app (or JSON for the API), never a stack trace."""

from __future__ import annotations

import logging

from flask import Flask, abort, jsonify, make_response, render_template, request
from flask.json.provider import DefaultJSONProvider
from flask_babel import gettext as _
from flask_wtf.csrf import CSRFError
from sqlalchemy.exc import DataError
from werkzeug.exceptions import HTTPException

from bulksign.core.error_tracking import capture
from bulksign.core.errors import Message
from bulksign.core.extensions import db, seconds_until_limit_resets
from bulksign.core.messages import N_
from bulksign.people.auth import is_api_request

logger = logging.getLogger(__name__)

MESSAGES = {
    400: N_("The request could not be understood."),
    401: N_("You need to log in (or give a valid API key) for this."),
    403: N_("You do not have access to this page."),
    404: N_("There is nothing at this address."),
    405: N_("That action is not allowed here."),
    413: N_("The file is too large."),
    429: N_("Too many attempts. Please wait a minute and try again."),
    500: N_("Something went wrong on our side. It has been logged; please try again."),
}


#: HTTP status → the machine-readable ``error.code`` of the API when the view names no more precise one.
ERROR_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "unprocessable",
    429: "rate_limited",
    500: "server_error",
}


def error_body(status: int, message: Message, *, code: str | None = None, details: dict | None = None) -> dict:
    """The one error shape of the API: ``{"error": {"code", "message", "details"}}``."""
    # str(): domain messages are lazy translations, translated here at the edge.
    return {"error": {"code": code or ERROR_CODES.get(status, "error"), "message": str(message), "details": details}}


def _respond(code: int, message: str):
    if is_api_request() or request.accept_mimetypes.best == "application/json":
        return jsonify(error_body(code, message)), code
    return render_template("errors/error.html", code=code, message=message), code


def guard_forms(app: Flask) -> None:
    """Register before CSRF protection, which crashes (AttributeError, a 500) on a multipart field without a name."""

    @app.before_request
    def _nameless_form_fields():
        if request.method in ("POST", "PUT", "PATCH", "DELETE") and any(not isinstance(k, str) for k in request.form):
            abort(400, description=_("The form could not be read. Go back, reload the page and try again."))


class _BoundedJSON(DefaultJSONProvider):
    """Flask's JSON, but a body nested deeper than the parser can recurse is bad input, not a crash."""

    def loads(self, s, **kwargs):
        try:
            return super().loads(s, **kwargs)
        except RecursionError:
            # A ValueError is what request.get_json() turns into a 400 (or None when silent).
            raise ValueError("JSON nested too deeply") from None


def guard_json(app: Flask) -> None:
    """Every ``request.get_json()`` of the app parses through ``_BoundedJSON``."""
    app.json = _BoundedJSON(app)


def init_app(app: Flask) -> None:
    @app.errorhandler(CSRFError)
    def _csrf(error):
        return _respond(400, _("The form expired or was sent twice. Go back, reload the page and try again."))

    @app.errorhandler(DataError)
    def _unrepresentable(error: DataError):
        # A value PostgreSQL cannot hold (an id past its integer range, a NUL byte in a search) is bad input.

        db.session.rollback()
        logger.warning("value refused by the database: %s", type(error.orig).__name__)
        return _respond(400, _("A value in the request is out of range or contains characters that are not allowed."))

    @app.errorhandler(413)
    def _too_large(error):
        limit = app.config["MAX_UPLOAD_MB"]
        return _respond(413, _("The file is too large: the limit is %(mb)s MB.", mb=limit))

    @app.errorhandler(429)
    def _rate_limited(error):
        # Flask-Limiter's description is the limit itself ("3 per 1 minute"): not for people.
        response = make_response(_respond(429, str(MESSAGES[429])))
        response.headers["Retry-After"] = str(seconds_until_limit_resets())
        return response

    @app.errorhandler(HTTPException)
    def _http(error: HTTPException):
        code = error.code or 500
        # A description set by the view (abort(404, "...")) is the specific message.
        custom = error.description if error.description != type(error).description else None
        response = make_response(_respond(code, str(custom) if custom else str(MESSAGES.get(code, error.name))))
        allowed = getattr(error, "valid_methods", None)
        if allowed:
            # RFC 9110: a 405 names the methods the address does take.
            response.headers["Allow"] = ", ".join(allowed)
        return response

    @app.errorhandler(Exception)
    def _unexpected(error: Exception):
        if isinstance(error, HTTPException):
            return _http(error)
        logger.error("unhandled error: %r", error, exc_info=True)
        # This handler answers every error, so Flask never signals it as unhandled: Sentry is told here.

        capture(error)

        db.session.rollback()
        return _respond(500, str(MESSAGES[500]))

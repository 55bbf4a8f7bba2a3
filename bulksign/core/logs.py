"""Structured logs: one JSON line per record, with the request id or RQ job id when there is one.
More in docs/architecture/core.md."""

from __future__ import annotations

import json
import logging
import re
import sys
import uuid
from datetime import UTC, datetime
from urllib.parse import quote_plus, unquote, unquote_plus

from flask import Flask, g, has_request_context, request
from rq import get_current_job

#: An e-mail address in free text.
EMAIL_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}")


def mask_addresses(text: str) -> str:
    """``text`` with each e-mail address's mailbox masked: ``***@example.com`` (the domain tells mail trouble)."""
    return EMAIL_ADDRESS.sub(lambda m: "***@" + m.group(0).rpartition("@")[2], text)


class MaskingFormatter(logging.Formatter):
    """The plain format (``LOG_JSON=false``), addresses masked."""

    def format(self, record: logging.LogRecord) -> str:
        return mask_addresses(super().format(record))


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if has_request_context():
            line["request_id"] = getattr(g, "request_id", None)
            line["path"] = request_log_target().partition("?")[0]
        job_id = _current_job_id()
        if job_id:
            line["job_id"] = job_id
        for key, value in getattr(record, "fields", {}).items():
            line[key] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return mask_addresses(json.dumps(line, default=str, ensure_ascii=False))


#: Paths whose next segment is a secret token (signing links, tracking pixels).
TOKEN_PATH_PREFIXES = ("/sign/", "/t/", "/track/")


def redact_path(path: str) -> str:
    """A path with the signing token or tracking mac replaced by ``<token>``, read as the router reads it:
    percent-decoded, slashes merged (``//sign/…`` and ``/%73ign/…`` are ``/sign/…``)."""
    path = re.sub(r"/{2,}", "/", unquote(path or ""))
    # A signing token is a secret: it never reaches a log line.
    for prefix in TOKEN_PATH_PREFIXES:
        if path.startswith(prefix):
            return prefix + "<token>" + ("/" + path.split("/", 3)[3] if path.count("/") > 2 else "")
    return path


#: Query parameters that carry secrets (the bounce webhook's ``?token=`` for providers that only take a URL).
SECRET_PARAMETERS = frozenset({"token", "secret", "key", "api_key"})
#: Route arguments that are secrets: signing tokens, and the tracking pixel's mac.
SECRET_ROUTE_ARGUMENTS = {"token": "<token>", "name": "<token>"}
#: Where the app leaves the request line's path and query, secrets replaced, for gunicorn's access log.
LOG_TARGET = "bulksign.log_target"


def redact_query(query: str) -> str:
    """The query string with the values of secret-bearing parameters replaced by ``<redacted>``, and e-mail
    addresses in the others masked (a staff search for a person's address).

    Names and values are read decoded, as the app reads them: ``%74oken`` is ``token``."""
    if not query:
        return query
    parts = []
    for part in query.split("&"):
        name, sep, value = part.partition("=")
        if sep and unquote_plus(name).strip().lower() in SECRET_PARAMETERS:
            part = f"{name}=<redacted>"
        elif EMAIL_ADDRESS.search(unquote_plus(value)):
            part = f"{name}={quote_plus(mask_addresses(unquote_plus(value)), safe='*@')}"
        parts.append(part)
    return "&".join(parts)


def request_log_target() -> str:
    """This request's path and query as logs may show them: the secrets of the route it matched replaced."""
    path = request.path
    secret_endpoint = request.blueprint in ("signing", "tracking")
    for name, value in (request.view_args or {}).items():
        if secret_endpoint and name in SECRET_ROUTE_ARGUMENTS and isinstance(value, str) and value:
            path = path.replace(value, SECRET_ROUTE_ARGUMENTS[name])
    query = redact_query(request.query_string.decode("latin-1"))
    return redact_path(path) + (f"?{query}" if query else "")


_TOKEN_IN_TEXT = re.compile("(" + "|".join(re.escape(p) for p in TOKEN_PATH_PREFIXES) + r")[^/?#\s\"'<>]+")
_QUERY_IN_TEXT = re.compile(r"\?([^\s#\"'<>]*)")


def redact_text(text: str) -> str:
    """Free text (an error message, a URL in it) with tokens in paths and secret query values redacted."""
    text = _TOKEN_IN_TEXT.sub(lambda m: m.group(1) + "<token>", text)
    return _QUERY_IN_TEXT.sub(lambda m: "?" + redact_query(m.group(1)), text)


def current_request_id() -> str | None:
    """The id of the request being answered, if any."""
    return getattr(g, "request_id", None) if has_request_context() else None


def _current_job_id() -> str | None:
    try:
        job = get_current_job()
    except Exception:  # outside a worker there is no job, and rq may raise instead of returning None
        return None
    return job.id if job else None


def init_app(app: Flask) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if app.config.get("LOG_JSON", True) else MaskingFormatter())
    root = logging.getLogger("bulksign")
    if not any(isinstance(h.formatter, JsonFormatter) for h in root.handlers):
        root.handlers = [handler]
    root.setLevel(logging.INFO)
    root.propagate = bool(app.testing)

    @app.before_request
    def _assign_request_id():
        incoming = request.headers.get("X-Request-ID", "")
        g.request_id = incoming if 8 <= len(incoming) <= 64 and incoming.isalnum() else uuid.uuid4().hex

    @app.after_request
    def _echo_request_id(response):
        response.headers["X-Request-ID"] = getattr(g, "request_id", "")
        request.environ[LOG_TARGET] = request_log_target()
        return response


def log(logger: logging.Logger, level: int, message: str, **fields) -> None:
    """Log ``message`` with structured ``fields`` (ids, counts) as separate JSON keys."""
    logger.log(level, message, extra={"fields": fields})

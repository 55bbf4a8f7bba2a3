"""gunicorn access logs without secrets: signing tokens in paths become ``<token>``, secret query values ``<redacted>``."""

from __future__ import annotations

from gunicorn.glogging import Logger

from bulksign.core.logs import LOG_TARGET, redact_path, redact_query


class RedactingLogger(Logger):
    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        # What the app matched (after decoding) decides what is secret; a request it never saw (a killed
        # worker, a refused request line) falls back to reading the path as the router would.
        target = environ.get(LOG_TARGET)
        if target is None:
            query = redact_query(atoms.get("q") or "")
            target = redact_path(atoms.get("U") or "") + (f"?{query}" if query else "")
        path, _, query = target.partition("?")
        atoms["U"], atoms["q"] = path, query
        atoms["r"] = f"{environ.get('REQUEST_METHOD', '-')} {target} {environ.get('SERVER_PROTOCOL', '-')}"
        return atoms

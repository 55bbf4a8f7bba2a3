"""gunicorn access logs without secrets: signing tokens in paths become ``<token>``, secret query values ``<redacted>``."""
from __future__ import annotations

from gunicorn.glogging import Logger

from .logs import redact_path, redact_query


class RedactingLogger(Logger):
    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        # A request gunicorn answers itself (a worker killed mid-request: 500) has no PATH_INFO nor QUERY_STRING.
        path = atoms.get("U") or ""
        safe = redact_path(path)
        if safe != path:
            atoms["U"] = safe
            atoms["r"] = atoms.get("r", "").replace(path, safe)
            atoms["q"] = ""
        query = atoms.get("q") or ""
        safe_query = redact_query(query)
        if safe_query != query:
            atoms["q"] = safe_query
            atoms["r"] = atoms.get("r", "").replace(query, safe_query)
        return atoms

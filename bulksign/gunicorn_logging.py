"""gunicorn access logs without secrets: signing tokens in paths become ``<token>``, secret query values ``<redacted>``."""
from __future__ import annotations

from gunicorn.glogging import Logger

from .logs import redact_path, redact_query


class RedactingLogger(Logger):
    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        path = atoms.get("U", "")
        safe = redact_path(path)
        if safe != path:
            atoms["U"] = safe
            atoms["r"] = atoms.get("r", "").replace(path, safe)
            atoms["q"] = ""
        query = atoms.get("q", "")
        safe_query = redact_query(query)
        if safe_query != query:
            atoms["q"] = safe_query
            atoms["r"] = atoms.get("r", "").replace(query, safe_query)
        return atoms

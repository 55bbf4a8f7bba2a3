"""gunicorn access logs without secrets: signing tokens in paths are replaced by ``<token>``."""
from __future__ import annotations

from gunicorn.glogging import Logger

from .logs import redact_path


class RedactingLogger(Logger):
    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        path = atoms.get("U", "")
        safe = redact_path(path)
        if safe != path:
            atoms["U"] = safe
            atoms["r"] = atoms.get("r", "").replace(path, safe)
            atoms["q"] = ""
        return atoms

"""Queue ``pdf``: seal the signed document of a request (idempotent: a second run finds it and stops)."""
from __future__ import annotations

from flask import current_app

from ..extensions import db
from ..models import utcnow
from ..sealing import SealOutcome, seal_key, seal_request
from ..storage import get_storage


def seal(request_id: int) -> SealOutcome:
    """Build, seal and store the signed PDF of ``request_id`` and queue the confirmation mail."""
    return seal_request(db.session, request_id=request_id, now=utcnow(), storage=get_storage(),
                        key=seal_key(current_app.config))

"""The periodic retention purge: what has passed its keeping time loses its files and personal data."""

from __future__ import annotations

from datetime import datetime

from flask import current_app

from bulksign.batches.retention import purge_due
from bulksign.core.extensions import db
from bulksign.doc_templates.word_check import expire_checks
from bulksign.documents.storage import get_storage
from bulksign.work.queues import PURGE_RETENTION, job


@job(PURGE_RETENTION)
def purge_retention(*, now: datetime) -> int:
    """Purge the requests whose time has passed, a commit after each chunk, then the Word checks as old as a
    recipients file no batch was made of; returns how many requests."""
    hours = current_app.config["UPLOAD_KEEP_HOURS"]
    purged = purge_due(db.session, storage=get_storage(), now=now, on_page=db.session.commit, upload_hours=hours)
    expire_checks(db.session, get_storage(), now=now, hours=hours)
    db.session.commit()
    return purged.requests

"""The Word check's job on the ``pdf`` queue: the file rendered with its sample row and its tags found."""

from __future__ import annotations

from flask import current_app

from bulksign.core.extensions import db
from bulksign.doc_templates.word_check import run_check
from bulksign.documents.storage import get_storage
from bulksign.models import utcnow
from bulksign.work.queues import WORD_CHECK, job


@job(WORD_CHECK)
def check(check_id: int) -> str:
    """Run the check ``check_id`` (its row says how it ended)."""
    return run_check(
        db.session,
        check_id=check_id,
        storage=get_storage(),
        now=utcnow,
        timeout=current_app.config["PDF_TIMEOUT_SECONDS"],
    )

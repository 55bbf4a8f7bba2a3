"""Jobs on the ``default`` queue that build export files."""

from __future__ import annotations

from bulksign.batches.exports import ExportResult, build_signed_zip
from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.models import utcnow
from bulksign.work.queues import SIGNED_ZIP, job


@job(SIGNED_ZIP)
def signed_zip(export_id: int) -> str:
    """Build the ZIP of a batch's signed PDFs for this export row."""
    result: ExportResult = build_signed_zip(db.session, export_id=export_id, storage=get_storage(), now=utcnow)
    return result.status

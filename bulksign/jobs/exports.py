"""Jobs on the ``default`` queue that build export files."""

from __future__ import annotations

from bulksign.batches import evidence  # noqa: F401 (registers the evidence package's builder)
from bulksign.batches.exports import ExportResult, build_export
from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.models import utcnow
from bulksign.work.queues import SIGNED_ZIP, job


@job(SIGNED_ZIP)
def signed_zip(export_id: int) -> str:
    """Build the file of this export row: the ZIP of a batch's signed PDFs or its evidence package (by its kind;
    the job keeps its first name so that queued jobs and their ids stay valid)."""
    result: ExportResult = build_export(db.session, export_id=export_id, storage=get_storage(), now=utcnow)
    return result.status

"""Jobs on the ``default`` queue that build export files."""
from __future__ import annotations

from ..exports import ExportResult, build_signed_zip
from ..extensions import db
from ..models import utcnow
from ..queues import SIGNED_ZIP, job
from ..storage import get_storage


@job(SIGNED_ZIP)
def signed_zip(export_id: int) -> str:
    """Build the ZIP of a batch's signed PDFs for this export row."""
    result: ExportResult = build_signed_zip(db.session, export_id=export_id, storage=get_storage(), now=utcnow)
    return result.status

"""JSON API for a batch's evidence package (``batches.evidence``): start it (a job builds it), follow it, download
it (docs/architecture/views.md)."""

from __future__ import annotations

import logging
from typing import cast

from flask import Blueprint, g
from pydantic import BaseModel, Field

from bulksign.batches.evidence import EVIDENCE, start_evidence
from bulksign.batches.exports import latest_export
from bulksign.core.extensions import db
from bulksign.core.logs import log
from bulksign.models import Export, utcnow
from bulksign.views.api.common import MAX_ID, ApiError, absolute_url, answer, operation
from bulksign.views.api.exports import POLL_SECONDS, ExportState, zip_download
from bulksign.work.queues import SIGNED_ZIP

bp = Blueprint("api_evidence", __name__, url_prefix="/api/v1")
logger = logging.getLogger(__name__)


class EvidenceOut(BaseModel):
    """A batch's evidence package: a ZIP of its signed PDFs, their audit certificates, `manifest.csv`,
    `manifest.json`, `SHA256SUMS` and a README."""

    id: int
    batch_id: int
    status: ExportState = Field(
        description="`pending` → `running` → `ready` (download it) or `failed` (`error` says why; start another)."
    )
    total: int = Field(description="Signed documents it holds (counted when it starts).")
    done: int = Field(description="Documents written so far.")
    error: str | None
    status_url: str = Field(description="Poll this until `status` is `ready`.")
    download_url: str | None = Field(description="The ZIP, once `status` is `ready`; null before.")


def _out(export: Export) -> EvidenceOut:
    ids = {"batch_id": export.batch_id, "export_id": export.id}
    return EvidenceOut(
        id=export.id,
        batch_id=export.batch_id,
        status=cast(ExportState, export.status),
        total=export.total,
        done=export.done,
        error=export.error,
        status_url=absolute_url(".evidence_status", **ids),
        download_url=absolute_url(".download", **ids) if export.status == "ready" else None,
    )


def _package(batch_id: int, export_id: int) -> Export:
    # ``reach`` checked the batch; the package must be one of that batch's.
    found = (
        latest_export(db.session, batch_id=batch_id, export_id=export_id, kind=EVIDENCE)
        if export_id <= MAX_ID
        else None
    )
    if found is None:
        raise ApiError("No evidence package with this id for this batch.", 404)
    return found


@bp.post("/batches/<int:batch_id>/evidence")
@operation(
    "Start the batch's evidence package",
    tag="Exports",
    responses={202: EvidenceOut},
    errors=(403, 404),
    idempotent=True,
)
def start(batch_id: int):
    """A job builds it; poll `status_url` until `status` is `ready`, then download `download_url`. While one is
    unfinished, starting again answers that one. Viewers' keys may follow and download packages but not start one."""
    started = start_evidence(db.session, batch_id=batch_id, user=g.api_user, now=utcnow())
    db.session.commit()
    if started.created:
        SIGNED_ZIP.enqueue(started.export.id, job_id=SIGNED_ZIP.job_id(id=started.export.id))
        log(logger, logging.INFO, "evidence package started over the api", export_id=started.export.id)
    response = answer(_out(started.export), 202)
    response.headers["Location"] = absolute_url(".evidence_status", batch_id=batch_id, export_id=started.export.id)
    return response


@bp.get("/batches/<int:batch_id>/evidence/<int:export_id>")
@operation("Follow an evidence package", tag="Exports", responses={200: EvidenceOut}, errors=(404,))
def evidence_status(batch_id: int, export_id: int):
    """Its progress (`done` of `total`) and, once `ready`, its `download_url`."""
    package = _package(batch_id, export_id)
    response = answer(_out(package))
    if package.status in ("pending", "running"):
        response.headers["Retry-After"] = str(POLL_SECONDS)
    return response


@bp.get("/batches/<int:batch_id>/evidence/<int:export_id>/download")
@operation("Download an evidence package", tag="Exports", responses={200: "application/zip"}, errors=(404, 409, 503))
def download(batch_id: int, export_id: int):
    """409 while it is not `ready` (`pending` or `running`: with `Retry-After`; `failed`: start another)."""
    return zip_download(
        _package(batch_id, export_id),
        what="evidence package",
        restart=f"POST /batches/{batch_id}/evidence",
        filename=f"batch-{batch_id}-evidence.zip",
    )

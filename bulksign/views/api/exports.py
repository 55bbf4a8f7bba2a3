"""JSON API for a batch's ZIP of signed PDFs (``batches.exports``, the batch page's export): start it (a job builds
it), follow it, download it."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Literal, cast

from flask import Blueprint, Response, g
from pydantic import BaseModel, Field

from bulksign.batches.exports import latest_export, start_signed_zip
from bulksign.core.extensions import db
from bulksign.core.logs import log
from bulksign.documents.storage import StorageError, get_storage
from bulksign.models import Export, utcnow
from bulksign.views._downloads import streamed_attachment
from bulksign.views.api.common import MAX_ID, ApiError, Link, absolute_url, answer, operation
from bulksign.work.queues import SIGNED_ZIP

bp = Blueprint("api_exports", __name__, url_prefix="/api/v1")
logger = logging.getLogger(__name__)

#: Seconds a client should wait before polling an unfinished export again.
POLL_SECONDS = 5


class ExportLinks(BaseModel):
    status: str = Field(description="Poll this (`GET /batches/{batch_id}/exports/{export_id}`).")
    download: str = Field(description="The ZIP, once `status` is `ready` (409 before).")


#: Where an export is (``Export.status``).
ExportState = Literal["pending", "running", "ready", "failed"]


class ExportOut(BaseModel):
    """A ZIP of the batch's signed PDFs, one file per signed request (`<row>-<email>.pdf`)."""

    id: int
    batch_id: int
    status: ExportState = Field(
        description="`pending` → `running` → `ready` (download it) or `failed` (`error` says why; start another)."
    )
    total: int = Field(description="Signed documents it holds (counted when it starts).")
    done: int = Field(description="Documents written so far.")
    error: str | None
    created_at: datetime
    finished_at: datetime | None
    links: ExportLinks


def _export_out(export: Export) -> ExportOut:
    ids = {"batch_id": export.batch_id, "export_id": export.id}
    return ExportOut(
        id=export.id,
        batch_id=export.batch_id,
        status=cast(ExportState, export.status),
        total=export.total,
        done=export.done,
        error=export.error,
        created_at=export.created_at,
        finished_at=export.finished_at,
        links=ExportLinks(status=absolute_url(".export_status", **ids), download=absolute_url(".download", **ids)),
    )


def _export(batch_id: int, export_id: int) -> Export:
    # ``reach`` checked the batch; the export must be one of that batch's (and an id PostgreSQL can compare).
    export = latest_export(db.session, batch_id=batch_id, export_id=export_id) if export_id <= MAX_ID else None
    if export is None:
        raise ApiError("No export with this id for this batch.", 404)
    return export


_FOLLOW = {
    "GetExport": Link(
        "api_exports.export_status", {"batch_id": "$response.body#/batch_id", "export_id": "$response.body#/id"}
    ),
    "DownloadExport": Link(
        "api_exports.download", {"batch_id": "$response.body#/batch_id", "export_id": "$response.body#/id"}
    ),
}


@bp.post("/batches/<int:batch_id>/exports")
@operation(
    "Start a ZIP of the batch's signed PDFs",
    tag="Exports",
    responses={202: ExportOut},
    errors=(403, 404),
    idempotent=True,
    links={202: _FOLLOW},
)
def start(batch_id: int):
    """A job builds the ZIP; poll `links.status` until `status` is `ready`, then download it. While one is
    unfinished, starting again answers that one. Viewers' keys may follow and download exports but not start one
    (403), as on the batch page."""
    started = start_signed_zip(db.session, batch_id=batch_id, user=g.api_user, now=utcnow())
    db.session.commit()
    if started.created:
        SIGNED_ZIP.enqueue(started.export.id, job_id=SIGNED_ZIP.job_id(id=started.export.id))
        log(logger, logging.INFO, "export started over the api", export_id=started.export.id, batch_id=batch_id)
    response = answer(_export_out(started.export), 202)
    response.headers["Location"] = absolute_url(".export_status", batch_id=batch_id, export_id=started.export.id)
    return response


@bp.get("/batches/<int:batch_id>/exports/<int:export_id>")
@operation("Follow an export", tag="Exports", responses={200: ExportOut}, errors=(404,), links={200: _FOLLOW})
def export_status(batch_id: int, export_id: int):
    """Its progress (`done` of `total`); `ready` when the ZIP can be downloaded."""
    export = _export(batch_id, export_id)
    response = answer(_export_out(export))
    if export.status in ("pending", "running"):
        response.headers["Retry-After"] = str(POLL_SECONDS)
    return response


@bp.get("/batches/<int:batch_id>/exports/<int:export_id>/download")
@operation("Download the ZIP of signed PDFs", tag="Exports", responses={200: "application/zip"}, errors=(404, 409, 503))
def download(batch_id: int, export_id: int):
    """409 while the export is not `ready` (`pending` or `running`: with `Retry-After`; `failed`: start another)."""
    return zip_download(
        _export(batch_id, export_id),
        what="ZIP",
        restart=f"POST /batches/{batch_id}/exports",
        filename=f"batch-{batch_id}-signed.zip",
    )


def zip_download(export: Export, *, what: str, restart: str, filename: str) -> Response:
    """An export's ZIP (the signed documents' or the evidence package), streamed from storage in parts.

    409 while it is not ``ready`` (``pending`` or ``running``: with ``Retry-After``; ``failed``: start another with
    ``restart``), 503 when storage cannot give it now.
    """
    if export.status != "ready" or not export.storage_key:
        if export.status == "failed":
            raise ApiError(
                f"This {what} failed ({export.error}); start a new one with {restart}.", 409, code="export_failed"
            )
        raise ApiError(
            f"The {what} is not ready yet ({export.done} of {export.total} documents written). "
            f"Ask again in {POLL_SECONDS} seconds.",
            409,
            code="not_ready",
            headers={"Retry-After": str(POLL_SECONDS)},
        )
    storage = get_storage()
    try:
        readable = storage.exists(export.storage_key)
    except StorageError as exc:
        log(logger, logging.ERROR, "export download failed", export_id=export.id, error=str(exc))
        readable = False
    if not readable:
        raise ApiError(
            f"The {what} cannot be read from storage right now; try again later.", 503, code="storage_unavailable"
        )
    return streamed_attachment(storage.chunks(export.storage_key), mimetype="application/zip", filename=filename)

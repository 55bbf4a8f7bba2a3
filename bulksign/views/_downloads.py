"""Downloads that the staff pages and the API both serve."""

from __future__ import annotations

from collections.abc import Iterator

from flask import Response, stream_with_context

from bulksign.batches.exports import recipients_csv
from bulksign.batches.recipients_table import RecipientFilter
from bulksign.core.extensions import db


def csv_response(batch_id: int, flt: RecipientFilter) -> Response:
    """The filtered recipients as a streamed CSV download (the batch page and the API)."""
    body = stream_with_context(recipients_csv(db.session, batch_id=batch_id, flt=flt))
    return Response(
        body,
        mimetype="text/csv",
        headers={
            "Content-Disposition": f'attachment; filename="batch-{batch_id}-recipients.csv"',
            "Cache-Control": "no-store",
        },
    )


def attachment(data: bytes, *, mimetype: str, filename: str) -> Response:
    """A stored file (a PDF, a ZIP) as a download: personal documents, so no cache keeps a copy."""
    return Response(
        data,
        mimetype=mimetype,
        headers={"Content-Disposition": f'attachment; filename="{filename}"', "Cache-Control": "no-store"},
    )


def streamed_attachment(chunks: Iterator[bytes], *, mimetype: str, filename: str) -> Response:
    """``attachment`` of a big stored file read in parts (an evidence package): the worker never holds it whole.
    The parts come from storage alone, so they need no request context while they stream."""
    return Response(
        chunks,
        mimetype=mimetype,
        headers={"Content-Disposition": f'attachment; filename="{filename}"', "Cache-Control": "no-store"},
    )

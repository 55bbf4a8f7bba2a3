"""Downloads that the staff pages and the API both serve."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from urllib.parse import quote

from flask import Response, stream_with_context

from bulksign.batches.exports import recipients_csv
from bulksign.batches.field_values import StoredAttachment
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


def download_disposition(filename: str) -> str:
    """``Content-Disposition`` of a download named ``filename`` as someone else chose it (a signer's file): a plain
    ASCII name every client reads (accents dropped, any other letter, a quote, a slash or a control character as
    ``_``), and the exact name (RFC 6266 ``filename*``) when that differs."""
    letters = (c for c in unicodedata.normalize("NFKD", filename) if not unicodedata.combining(c))
    plain = "".join(c if c.isascii() and c.isprintable() and c not in '"\\/' else "_" for c in letters)
    value = f'attachment; filename="{plain or "attachment"}"'
    return value if plain == filename else f"{value}; filename*=UTF-8''{quote(filename, safe='')}"


def signer_attachment(found: StoredAttachment, data: bytes) -> Response:
    """A file a signer attached (``data``: its bytes from storage), for staff and the API: with its checked type,
    always downloaded (never shown in the browser, never sniffed as another type), kept by no cache."""
    response = Response(data, content_type=found.content_type)
    response.headers["Content-Disposition"] = download_disposition(found.filename)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = "no-store"
    return response

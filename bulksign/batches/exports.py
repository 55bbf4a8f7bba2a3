"""Exports of a batch: the recipients as CSV (streamed, with the values its signers filled in), and files built by
a job from its signed documents: a ZIP of the signed PDFs (each request's attachments beside its PDF) here, the
evidence package in ``evidence`` (``build_zip`` is the frame both use)."""

from __future__ import annotations

import io
import logging
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Row, Select, func, select
from sqlalchemy.orm import Session

from bulksign.batches.field_values import StoredValue, batch_fields, safe_name, stored_attachments, stored_values
from bulksign.batches.party_progress import RowParty, batch_roles, row_parties
from bulksign.batches.recipients_table import RecipientFilter, recipients_page
from bulksign.batches.texting import TextState, channel_cells, text_states
from bulksign.core.logs import log
from bulksign.core.spreadsheets import csv_writer
from bulksign.documents.field_boxes import FIELD_PREFIX
from bulksign.documents.storage import Storage, StorageError
from bulksign.models import RECIPIENT_ROLE, Document, Export, SigningRequest, User
from bulksign.people.access import batch_for_export

logger = logging.getLogger(__name__)

#: UTF-8 byte order mark: Excel reads the file as UTF-8 only with it.
BOM = "\ufeff"
CSV_COLUMNS = (
    "row",
    "email",
    "name",
    "phone",
    "status",
    "sent_at",
    "opened_at",
    "signed_at",
    "declined_at",
    "decline_reason",
    "reminders",
    "expires_at",
    "error",
    "channel",
    "text_state",
    "text_reason",
)
SIGNED_ZIP = "signed_zip"


class ExportStatus(StrEnum):
    """Where an export's file stands (``Export.status``); ``MISSING`` answers for an export row that is gone."""

    PENDING = "pending"
    RUNNING = "running"
    READY = "ready"
    FAILED = "failed"
    MISSING = "missing"


#: An export not finished yet: another of its kind is not started beside it.
UNFINISHED = (ExportStatus.PENDING, ExportStatus.RUNNING)
CSV_PAGE = 2000


def _csv_row(r: SigningRequest, texted: TextState | None) -> list[object]:
    return [
        r.row_number,
        r.email,
        r.name,
        r.phone,
        r.status,
        r.sent_at,
        r.opened_at,
        r.signed_at,
        r.declined_at,
        r.decline_reason,
        r.reminder_count,
        r.expires_at,
        r.error_message,
        *channel_cells(texted),
    ]


#: Each party's columns, after its role: ``employer_email``, ``employer_status`` …
PARTY_FIELDS = ("email", "status", "invited_at", "opened_at", "signed_at", "declined_at")


def party_columns(roles: tuple[str, ...]) -> tuple[str, ...]:
    """The columns a batch with parties besides the recipient adds, after ``CSV_COLUMNS``: each role's address,
    status and times (the recipient's too: the row's ``status`` is the request's, signed once every party signed)."""
    return tuple(f"{role}_{field}" for role in roles for field in PARTY_FIELDS)


def _party_cells(roles: tuple[str, ...], parties: Iterable[RowParty], *, row_email: str | None) -> list[object]:
    by_role = {p.role: p for p in parties}
    cells: list[object] = []
    for role in roles:
        p = by_role.get(role)
        if p is None:
            cells.extend([None] * len(PARTY_FIELDS))
            continue
        email = row_email if role == RECIPIENT_ROLE else p.email
        cells.extend([email, p.status, p.invited_at, p.opened_at, p.signed_at, p.declined_at])
    return cells


def file_columns(session: Session, *, batch_id: int) -> tuple[str, ...]:
    """The recipients file's own columns (``contract_number``, ``position`` …), as its first row kept them: the
    CSV repeats them after its usual columns (a name it uses itself gets ``file_`` before it)."""
    data = session.scalar(
        select(SigningRequest.data)
        .where(SigningRequest.batch_id == batch_id, SigningRequest.purged_at.is_(None))
        .order_by(SigningRequest.id)
        .limit(1)
    )
    return tuple(str(key) for key in (data or {}) if str(key).lower() not in ("email", "name", "phone"))


def _file_header(columns: tuple[str, ...], taken: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"file_{c}" if c in taken else c for c in columns)


def _field_cells(names: tuple[str, ...], values: Mapping[str, StoredValue]) -> list[object]:
    return [values[name].value if name in values else None for name in names]


def recipients_csv(session: Session, *, batch_id: int, flt: RecipientFilter) -> Iterator[str]:
    """The filtered recipients as CSV text chunks (BOM first), read in keyset pages: memory stays flat.
    A batch with parties besides the recipient gets their columns (``party_columns``; one more query a page), one
    whose template has fields a ``field_<name>`` column each, the value as stored (one more query a page); the
    recipients file's own columns (``file_columns``) follow the usual ones."""
    roles = batch_roles(session, batch_id=batch_id)
    fields = tuple(field.name for field in batch_fields(session, batch_id=batch_id).fields)
    given = tuple(f"{FIELD_PREFIX}{name}" for name in fields)
    # The file's columns a field prefills are the field's own column.
    own = tuple(c for c in file_columns(session, batch_id=batch_id) if c not in given)
    buffer = io.StringIO()
    writer = csv_writer(buffer)
    ours = CSV_COLUMNS + party_columns(roles) + given
    writer.writerow(CSV_COLUMNS + _file_header(own, ours) + party_columns(roles) + given)
    yield BOM + buffer.getvalue()
    cursor = None
    for _ in range(100_000):  # bounded: pages of CSV_PAGE rows
        page = recipients_page(session, batch_id=batch_id, flt=flt, cursor=cursor, limit=CSV_PAGE)
        buffer.seek(0)
        buffer.truncate()
        ids = [r.id for r in page.items]
        parties = row_parties(session, batch_id=batch_id, request_ids=ids) if roles else {}
        values = stored_values(session, request_ids=ids) if fields else {}
        texts = text_states(session, request_ids=ids)
        writer.writerows(
            _csv_row(r, texts.get(r.id))
            + [(r.data or {}).get(column) for column in own]
            + _party_cells(roles, parties.get(r.id, ()), row_email=r.email)
            + _field_cells(fields, values.get(r.id, {}))
            for r in page.items
        )
        yield buffer.getvalue()
        session.expunge_all()  # rows already written need not stay in memory
        cursor = page.next_cursor
        if cursor is None:
            return


@dataclass(frozen=True)
class ExportStarted:
    export: Export
    #: False when an unfinished export of the same batch already existed (it is returned instead).
    created: bool


def start_signed_zip(session: Session, *, batch_id: int, user: User, now: datetime) -> ExportStarted:
    """Create the export row for a ZIP of the batch's signed PDFs (the caller commits, then enqueues)."""
    return start_export(session, batch_id=batch_id, user=user, now=now, kind=SIGNED_ZIP)


def start_export(session: Session, *, batch_id: int, user: User, now: datetime, kind: str) -> ExportStarted:
    """Create the export row of a file of ``kind`` built from the batch's signed documents; the caller commits, then
    enqueues the build. Viewers are refused (``Refused`` 403); while one of the same kind is unfinished, that one is
    returned."""
    batch_for_export(session, batch_id=batch_id, user=user)
    running = session.scalar(
        select(Export).where(Export.batch_id == batch_id, Export.kind == kind, Export.status.in_(UNFINISHED))
    )
    if running is not None:
        return ExportStarted(export=running, created=False)
    total = session.scalar(_signed_documents(batch_id).with_only_columns(func.count()).order_by(None)) or 0
    export = Export(
        batch_id=batch_id,
        kind=kind,
        status=ExportStatus.PENDING,
        total=total,
        done=0,
        created_by_id=user.id,
        created_at=now,
    )
    session.add(export)
    session.flush()
    log(logger, logging.INFO, "export requested", export_id=export.id, batch_id=batch_id, total=total, kind=kind)
    return ExportStarted(export=export, created=True)


def _signed_documents(batch_id: int) -> Select[tuple[str, int | None, int, str]]:
    return (
        select(Document.storage_key, SigningRequest.row_number, SigningRequest.id, SigningRequest.email)
        .join(SigningRequest, SigningRequest.id == Document.request_id)
        .where(SigningRequest.batch_id == batch_id, Document.kind == "signed")
        .order_by(SigningRequest.id)
    )


@dataclass(frozen=True)
class ExportResult:
    export_id: int
    status: ExportStatus
    files: int


#: Signed documents read per page while a ZIP is written: the rows of one page at a time stay in memory.
PAGE = 500


def signed_pages(session: Session, *, batch_id: int) -> Iterator[Sequence[Row[Any]]]:
    """The batch's signed documents (storage key, row, request id, email) in request order, a page at a time."""
    after = 0
    for _ in range(1_000_000):  # bounded: pages of PAGE rows
        page = session.execute(_signed_documents(batch_id).where(SigningRequest.id > after).limit(PAGE)).all()
        if not page:
            return
        yield page
        after = page[-1].id


def build_signed_zip(
    session: Session, *, export_id: int, storage: Storage, now: Callable[[], datetime], progress_every: int = 50
) -> ExportResult:
    """Write every signed PDF of the batch into one ZIP in storage, committing progress as it goes."""
    return build_zip(
        session,
        export_id=export_id,
        storage=storage,
        now=now,
        write=_signed_pdfs,
        name="signed",
        progress_every=progress_every,
    )


def _signed_pdfs(
    session: Session, archive: zipfile.ZipFile, export: Export, storage: Storage, tick: Callable[[int], None]
) -> int:
    n = 0
    for page in signed_pages(session, batch_id=export.batch_id):
        attachments = stored_attachments(session, request_ids=[row.id for row in page])
        for key, row_number, request_id, email in page:
            # PDFs are already compressed; storing them keeps the job fast.
            name = zip_name(row_number, request_id, email)
            archive.writestr(name, storage.get(key))
            for attachment in attachments.get(request_id, ()):
                beside = attachment_zip_name(name, field=attachment.name, filename=attachment.filename)
                archive.writestr(beside, storage.get(attachment.storage_key))
            n += 1
            tick(n)
    return n


#: Builders of export files by kind, for the one job that builds them (``jobs.exports``); more register here.
BUILDERS: dict[str, Callable[..., ExportResult]] = {SIGNED_ZIP: build_signed_zip}


def build_export(session: Session, *, export_id: int, storage: Storage, now: Callable[[], datetime]) -> ExportResult:
    """Build the export row's file with the builder of its kind."""
    export = session.get(Export, export_id)
    if export is None:
        return ExportResult(export_id=export_id, status=ExportStatus.MISSING, files=0)
    return BUILDERS[export.kind](session, export_id=export_id, storage=storage, now=now)


def build_zip(
    session: Session,
    *,
    export_id: int,
    storage: Storage,
    now: Callable[[], datetime],
    write: Callable[..., int],
    name: str,
    progress_every: int = 50,
    compression: int = zipfile.ZIP_STORED,
) -> ExportResult:
    """The frame of every ZIP export: ``write(session, archive, export, storage, tick)`` adds the files and calls
    ``tick(n)`` after each; progress is committed every ``progress_every``. The ZIP is written to a temporary
    file and handed to storage from there (``put_file``), so memory holds one document at a time, whatever the
    batch's size."""
    export = session.get(Export, export_id)
    if export is None or export.status not in UNFINISHED:
        return ExportResult(
            export_id=export_id, status=ExportStatus(export.status) if export else ExportStatus.MISSING, files=0
        )
    export.status, export.done = ExportStatus.RUNNING, 0
    export.total = session.scalar(_signed_documents(export.batch_id).with_only_columns(func.count()).order_by(None))
    session.commit()

    def tick(n: int) -> None:
        if n % progress_every == 0:
            export.done = n
            session.commit()

    fd, path = tempfile.mkstemp(prefix="bulksign-export-", suffix=".zip")
    os.close(fd)
    try:
        with zipfile.ZipFile(path, "w", compression=compression) as archive:
            files = write(session, archive, export, storage, tick)
        key = f"exports/{export.batch_id}/{export.id}-{name}.zip"
        storage.put_file(key, path, content_type="application/zip")
    except (StorageError, OSError) as exc:
        export.status, export.error, export.finished_at = ExportStatus.FAILED, str(exc), now()
        session.commit()
        log(logger, logging.ERROR, "export failed", export_id=export.id, batch_id=export.batch_id, error=str(exc))
        return ExportResult(export_id=export.id, status=ExportStatus.FAILED, files=0)
    finally:
        os.unlink(path)
    export.status, export.done, export.storage_key, export.finished_at = ExportStatus.READY, files, key, now()
    session.commit()
    log(logger, logging.INFO, "export ready", export_id=export.id, batch_id=export.batch_id, files=files)
    return ExportResult(export_id=export.id, status=ExportStatus.READY, files=files)


def zip_name(row_number: int | None, request_id: int, email: str) -> str:
    return f"{row_number or request_id:06d}-{safe_name(email)}.pdf"


def attachment_zip_name(signed_name: str, *, field: str, filename: str) -> str:
    """Where a request's attachment goes beside its signed PDF ``signed_name``: its stem, the field, the file's name
    (``000002-ann@example.com.pdf`` → ``000002-ann@example.com-id_scan-passport.jpg``), its extension (the checked
    type's: ``field_values.StoredValue``) kept however long the name."""
    stem, extension = os.path.splitext(filename)
    return f"{signed_name.removesuffix('.pdf')}-{field}-{safe_name(stem)}{safe_name(extension)}"


def latest_export(
    session: Session, *, batch_id: int, export_id: int | None = None, kind: str = SIGNED_ZIP
) -> Export | None:
    """The batch's newest export of ``kind`` (or the given one, if it belongs to the batch)."""
    query = select(Export).where(Export.batch_id == batch_id, Export.kind == kind)
    if export_id is not None:
        query = query.where(Export.id == export_id)
    return session.scalar(query.order_by(Export.id.desc()).limit(1))

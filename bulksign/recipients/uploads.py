"""The recipients file kept between "check" and "create", under an unguessable id, for the user who sent it."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from bulksign.core.messages import N_
from bulksign.documents.storage import Storage, StorageError
from bulksign.models import RecipientUpload
from bulksign.recipients import column_mapping
from bulksign.recipients.column_mapping import ColumnMapping
from bulksign.recipients.files import open_table
from bulksign.recipients.rows import UploadError

_UPLOAD_ID = re.compile(r"[0-9a-f]{32}\Z")


@dataclass(frozen=True)
class StoredUpload:
    upload_id: str
    filename: str
    data: bytes
    template_id: int | None
    #: The columns matched for this file (confirmed, or remembered for its template when it was checked).
    mapping: ColumnMapping | None = None


def _key(upload_id: str) -> str:
    return f"uploads/{upload_id}/file"


def store_upload(
    session: Session,
    storage: Storage,
    *,
    data: bytes,
    filename: str,
    user_id: int,
    template_id: int | None,
    now: datetime,
    mapping: ColumnMapping | None = None,
) -> StoredUpload:
    """Keep an uploaded file under an unguessable id, so that "create" re-reads the same bytes, with the columns
    ``mapping`` matched when it was checked. The caller commits."""
    upload_id = secrets.token_hex(16)
    safe_name = PurePosixPath((filename or "upload").replace("\\", "/")).name[:200]
    storage.put(_key(upload_id), data, content_type="application/octet-stream")
    session.add(
        RecipientUpload(
            id=upload_id,
            user_id=user_id,
            template_id=template_id,
            filename=safe_name,
            created_at=now,
            columns=mapping.to_json() if mapping else None,
        )
    )
    session.flush()
    return StoredUpload(upload_id, safe_name, data, template_id, mapping)


def load_upload(session: Session, storage: Storage, *, upload_id: str, user_id: int) -> StoredUpload:
    """The stored file, if it exists and belongs to this user; raises UploadError otherwise."""
    gone = UploadError(N_("The uploaded file is no longer available. Upload it again."), 410)
    row = session.get(RecipientUpload, upload_id) if _UPLOAD_ID.match(upload_id or "") else None
    if row is None or row.user_id != user_id:
        raise gone
    try:
        data = storage.get(_key(upload_id))
    except StorageError:
        raise gone from None
    mapping = column_mapping.parse_mapping(row.columns) if row.columns else None
    return StoredUpload(upload_id, row.filename, data, row.template_id, mapping)


def confirm_mapping(
    session: Session,
    *,
    upload: StoredUpload,
    mapping: ColumnMapping,
    team_id: int | None,
    user_id: int,
    now: datetime,
) -> StoredUpload:
    """Staff matched the upload's columns (checked against its file already): the batch is made with them, and
    they are offered for the template's next file in this team. The caller commits."""
    row = session.get(RecipientUpload, upload.upload_id)
    assert row is not None and upload.template_id is not None  # loaded for this user just before
    row.columns = mapping.to_json()
    column_mapping.remember(
        session, template_id=upload.template_id, team_id=team_id, mapping=mapping, user_id=user_id, now=now
    )
    return StoredUpload(upload.upload_id, upload.filename, upload.data, upload.template_id, mapping)


def delete_uploads(session: Session, storage: Storage, *, upload_ids: Iterable[str]) -> int:
    """Delete these uploads, files then rows (a file already gone counts too); how many rows went."""
    ids = sorted(set(session.scalars(select(RecipientUpload.id).where(RecipientUpload.id.in_(list(upload_ids))))))
    for upload_id in ids:
        storage.delete(_key(upload_id))
    if ids:
        session.execute(delete(RecipientUpload).where(RecipientUpload.id.in_(ids)))
    return len(ids)


def naming(session: Session, storage: Storage, *, upload_ids: Iterable[str], address: str) -> list[str]:
    """Those of these uploads whose file has a cell equal to ``address`` (lower case), or cannot be read any more."""
    found = []
    rows = session.execute(
        select(RecipientUpload.id, RecipientUpload.filename).where(RecipientUpload.id.in_(list(upload_ids)))
    )
    for upload_id, filename in rows:
        try:
            table = open_table(storage.get(_key(upload_id)), filename=filename)
            if any(cell.strip().lower() == address for row in table.rows for cell in row.cells):
                found.append(upload_id)
        except StorageError:
            continue  # gone already
        except UploadError:
            found.append(upload_id)  # it was read once: what cannot be read now cannot be shown to hold nobody
    return sorted(found)

"""The recipients file kept between "check" and "create", under an unguessable id, for the user who sent it."""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from pathlib import PurePosixPath

from bulksign.core.messages import N_
from bulksign.documents.storage import Storage, StorageError
from bulksign.recipients.rows import UploadError

_UPLOAD_ID = re.compile(r"[0-9a-f]{32}\Z")


@dataclass(frozen=True)
class StoredUpload:
    upload_id: str
    filename: str
    data: bytes
    template_id: int | None


def store_upload(
    storage: Storage, *, data: bytes, filename: str, user_id: int, template_id: int | None
) -> StoredUpload:
    """Keep an uploaded file under an unguessable id, so that "create" re-reads the same bytes."""
    upload_id = secrets.token_hex(16)
    safe_name = PurePosixPath((filename or "upload").replace("\\", "/")).name[:200]
    meta = {"filename": safe_name, "user_id": user_id, "template_id": template_id}
    storage.put(f"uploads/{upload_id}/file", data, content_type="application/octet-stream")
    storage.put(f"uploads/{upload_id}/meta.json", json.dumps(meta).encode(), content_type="application/json")
    return StoredUpload(upload_id, safe_name, data, template_id)


def load_upload(storage: Storage, *, upload_id: str, user_id: int) -> StoredUpload:
    """The stored file, if it exists and belongs to this user; raises UploadError otherwise."""
    gone = UploadError(N_("The uploaded file is no longer available. Upload it again."), 410)
    if not _UPLOAD_ID.match(upload_id or ""):
        raise gone
    try:
        meta = json.loads(storage.get(f"uploads/{upload_id}/meta.json"))
        if meta.get("user_id") != user_id:
            raise gone
        data = storage.get(f"uploads/{upload_id}/file")
    except (StorageError, ValueError):
        raise gone from None
    return StoredUpload(upload_id, meta["filename"], data, meta.get("template_id"))

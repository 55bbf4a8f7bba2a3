"""Where document bytes live: a local folder by default, S3-compatible storage for several hosts.

Keys are relative paths made by the app (``batches/12/requests/345/original.pdf``); a key that
could leave the storage root is refused, whatever backend.
"""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Protocol

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$")


class StorageError(RuntimeError):
    """The backend could not store or read a file; ``message`` is for people."""


class InvalidKey(StorageError):
    pass


def check_key(key: str) -> str:
    """A safe relative key: no '..', no leading '/', no backslashes or odd characters."""
    if not _KEY.match(key or "") or ".." in key.split("/") or len(key) > 500:
        raise InvalidKey(f"invalid storage key {key!r}")
    return key


class Storage(Protocol):
    def put(self, key: str, data: bytes, *, content_type: str = "application/pdf") -> None: ...
    def get(self, key: str) -> bytes: ...
    def exists(self, key: str) -> bool: ...
    def delete(self, key: str) -> None: ...


class LocalStorage:
    """Files under one root folder; writes are atomic (temp file + rename)."""

    def __init__(self, root: str | Path):
        self.root = Path(root).resolve()

    def _path(self, key: str) -> Path:
        path = (self.root / check_key(key)).resolve()
        if self.root not in path.parents:
            raise InvalidKey(f"invalid storage key {key!r}")
        return path

    def put(self, key: str, data: bytes, *, content_type: str = "application/pdf") -> None:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except OSError as exc:
            raise StorageError(f"Could not write the document to storage ({exc.strerror or exc}).") from exc

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise StorageError(f"The document {key} is missing from storage.") from None
        except OSError as exc:
            raise StorageError(f"Could not read the document from storage ({exc.strerror or exc}).") from exc

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)


def storage_from_url(url: str, *, s3_endpoint_url: str | None = None) -> Storage:
    """``s3://bucket/prefix`` or a folder path (``file://`` optional)."""
    if url.startswith("s3://"):
        from bulksign.documents.storage.s3 import S3Storage

        bucket, _, prefix = url[len("s3://"):].partition("/")
        return S3Storage(bucket=bucket, prefix=prefix.strip("/"), endpoint_url=s3_endpoint_url)
    if url.startswith("file://"):
        url = url[len("file://"):]
    return LocalStorage(url)


def get_storage() -> Storage:
    """The app's storage backend (one per process)."""
    from flask import current_app

    ext = current_app.extensions
    if "bulksign_storage" not in ext:
        ext["bulksign_storage"] = storage_from_url(
            current_app.config["STORAGE_URL"], s3_endpoint_url=current_app.config.get("S3_ENDPOINT_URL"))
    return ext["bulksign_storage"]

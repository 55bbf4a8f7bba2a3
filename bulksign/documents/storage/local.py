"""Documents as files under one local folder: the embedded default, and one host's storage."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bulksign.documents.storage.base import InvalidKey, StorageError, check_key


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

    def put_file(self, key: str, path: str, *, content_type: str) -> None:
        target = self._path(key)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
                shutil.copyfileobj(src, out, 1 << 20)
            os.replace(tmp, target)
        except OSError as exc:
            raise StorageError(f"Could not write the document to storage ({exc.strerror or exc}).") from exc

    def chunks(self, key: str, *, size: int = 1 << 20) -> Iterator[bytes]:
        try:
            fh = open(self._path(key), "rb")
        except FileNotFoundError:
            raise StorageError(f"The document {key} is missing from storage.") from None
        with fh:
            while part := fh.read(size):
                yield part

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

"""What every storage backend is: the interface, its errors, and the check that keeps a key inside the root."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Protocol

from bulksign.core.errors import BulksignError

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$")


class StorageError(BulksignError):
    """The backend could not store or read a file; ``message`` is for people."""

    status = 500


class InvalidKey(StorageError):
    pass


def check_key(key: str) -> str:
    """A safe relative key: no '..', no leading '/', no backslashes or odd characters."""
    if not _KEY.match(key or "") or ".." in key.split("/") or len(key) > 500:
        raise InvalidKey(f"invalid storage key {key!r}")
    return key


class Storage(Protocol):
    def put(self, key: str, data: bytes, *, content_type: str = "application/pdf") -> None: ...
    #: ``put`` of a file's content, read from disk in parts (a big export never sits in memory).
    def put_file(self, key: str, path: str, *, content_type: str) -> None: ...
    #: The stored content in parts of about ``size`` bytes (a big export is served without holding it).
    def chunks(self, key: str, *, size: int = 1 << 20) -> Iterator[bytes]: ...
    def get(self, key: str) -> bytes: ...
    def exists(self, key: str) -> bool: ...
    def delete(self, key: str) -> None: ...

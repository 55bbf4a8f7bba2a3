"""Where document bytes live: a local folder by default, S3-compatible storage for several hosts.
More in docs/architecture/documents.md."""

from __future__ import annotations

from flask import current_app

from bulksign.documents.storage.base import InvalidKey, Storage, StorageError, check_key
from bulksign.documents.storage.local import LocalStorage

__all__ = [
    "InvalidKey",
    "LocalStorage",
    "Storage",
    "StorageError",
    "backend_of",
    "check_key",
    "get_storage",
    "storage_from_url",
]


def backend_of(url: str) -> str:
    """``s3`` or ``local``: the backend a ``STORAGE_URL`` names, read without building it (which may be what fails)."""
    return "s3" if url.startswith("s3://") else "local"


def storage_from_url(url: str, *, s3_endpoint_url: str | None = None) -> Storage:
    """``s3://bucket/prefix`` or a folder path (``file://`` optional)."""
    if backend_of(url) == "s3":
        # boto3 takes ~0.3 s to import: only a host that stores in S3 pays it.
        from bulksign.documents.storage.s3 import S3Storage

        bucket, _, prefix = url[len("s3://") :].partition("/")
        return S3Storage(bucket=bucket, prefix=prefix.strip("/"), endpoint_url=s3_endpoint_url)
    if url.startswith("file://"):
        url = url[len("file://") :]
    return LocalStorage(url)


def get_storage() -> Storage:
    """The app's storage backend (one per process)."""
    ext = current_app.extensions
    if "bulksign_storage" not in ext:
        ext["bulksign_storage"] = storage_from_url(
            current_app.config["STORAGE_URL"], s3_endpoint_url=current_app.config.get("S3_ENDPOINT_URL")
        )
    return ext["bulksign_storage"]

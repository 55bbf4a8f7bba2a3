"""S3-compatible storage (AWS, MinIO, Ceph …) so that workers on several hosts share the documents."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
from boto3.exceptions import S3UploadFailedError
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from bulksign.documents.storage.base import StorageError, check_key


class S3Storage:
    """Objects under ``prefix/`` in one bucket; credentials come from the usual AWS variables or roles."""

    def __init__(
        self,
        *,
        bucket: str,
        prefix: str = "",
        endpoint_url: str | None = None,
        connect_timeout: float = 5,
        read_timeout: float = 30,
        max_attempts: int = 3,
    ):
        if not bucket:
            raise StorageError("STORAGE_URL names no bucket (expected s3://bucket/prefix).")
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.client = boto3.client(
            "s3",
            endpoint_url=endpoint_url,
            config=Config(
                connect_timeout=connect_timeout,
                read_timeout=read_timeout,
                retries={"max_attempts": max_attempts, "mode": "standard"},
                s3={"addressing_style": "path"},
            ),
        )

    def _key(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def put(self, key: str, data: bytes, *, content_type: str = "application/pdf") -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, ContentType=content_type)
        except (BotoCoreError, ClientError) as exc:
            raise StorageError(f"Could not write the document to storage ({_reason(exc)}).") from exc

    def put_file(self, key: str, path: str, *, content_type: str) -> None:
        try:  # boto3 uploads a big file in parts (multipart), never all of it in memory
            self.client.upload_file(path, self.bucket, self._key(key), ExtraArgs={"ContentType": content_type})
        except (BotoCoreError, ClientError, S3UploadFailedError) as exc:
            raise StorageError(f"Could not write the document to storage ({_reason(exc)}).") from exc

    def chunks(self, key: str, *, size: int = 1 << 20) -> Iterator[bytes]:
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                raise StorageError(f"The document {key} is missing from storage.") from None
            raise StorageError(f"Could not read the document from storage ({_reason(exc)}).") from exc
        except BotoCoreError as exc:
            raise StorageError(f"Could not read the document from storage ({_reason(exc)}).") from exc
        yield from body.iter_chunks(size)

    def get(self, key: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                raise StorageError(f"The document {key} is missing from storage.") from None
            raise StorageError(f"Could not read the document from storage ({_reason(exc)}).") from exc
        except BotoCoreError as exc:
            raise StorageError(f"Could not read the document from storage ({_reason(exc)}).") from exc

    def exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            return True
        except ClientError as exc:
            if _code(exc) in ("404", "NoSuchKey", "NotFound"):
                return False
            raise StorageError(f"Could not reach storage ({_reason(exc)}).") from exc
        except BotoCoreError as exc:
            raise StorageError(f"Could not reach storage ({_reason(exc)}).") from exc

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except (BotoCoreError, ClientError) as exc:
            raise StorageError(f"Could not delete the document from storage ({_reason(exc)}).") from exc


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _reason(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return f"{_code(exc)}: {exc.response.get('Error', {}).get('Message', '')}".strip(": ")
    return exc.__class__.__name__

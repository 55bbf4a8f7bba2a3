"""S3-compatible storage against a real S3 protocol server on loopback (moto's server mode)."""

from __future__ import annotations

import boto3
import pytest

from bulksign.documents.storage import InvalidKey, StorageError, storage_from_url
from tests.support.services import free_port


@pytest.fixture(scope="module")
def s3_endpoint():
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def aws_env(monkeypatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)


def test_documents_round_trip_through_s3(s3_endpoint, aws_env):
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket="docs")
    storage = storage_from_url("s3://docs/bulksign/prod", s3_endpoint_url=s3_endpoint)
    key = "batches/1/requests/2/original.pdf"
    assert not storage.exists(key)
    storage.put(key, b"%PDF-1.4 test")
    assert storage.exists(key) and storage.get(key) == b"%PDF-1.4 test"
    listed = boto3.client("s3", endpoint_url=s3_endpoint).list_objects_v2(Bucket="docs")["Contents"]
    assert [o["Key"] for o in listed] == [f"bulksign/prod/{key}"]
    storage.delete(key)
    assert not storage.exists(key)
    with pytest.raises(StorageError, match="missing"):
        storage.get(key)
    with pytest.raises(InvalidKey):
        storage.put("../escape", b"x")


def test_a_missing_bucket_is_a_clear_storage_error(s3_endpoint, aws_env):
    storage = storage_from_url("s3://no-such-bucket", s3_endpoint_url=s3_endpoint)
    with pytest.raises(StorageError, match="Could not write the document to storage .*NoSuchBucket"):
        storage.put("a.pdf", b"x")


def test_an_unreachable_endpoint_is_a_storage_error_not_a_hang(aws_env):
    storage = storage_from_url("s3://docs", s3_endpoint_url=f"http://127.0.0.1:{free_port()}")
    storage.client.meta.config.retries = {"max_attempts": 1}
    with pytest.raises(StorageError, match="Could not write"):
        storage.put("a.pdf", b"x")


def test_the_pipeline_renders_into_s3(s3_endpoint, aws_env, make_app, smtp):
    from bulksign.core.extensions import db
    from bulksign.documents.storage import get_storage
    from bulksign.models import Document
    from bulksign.work.pipeline import enqueue_renders
    from tests.support.batches import make_batch, request_ids, requests_of, run_worker
    from tests.support.clock import NOW

    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket="pipeline")
    app = make_app(STORAGE_URL="s3://pipeline/docs", S3_ENDPOINT_URL=s3_endpoint)
    with app.app_context():
        batch = make_batch(now=NOW, recipients=2)
        enqueue_renders(request_ids(batch))
        run_worker(app, "pdf", "mail")
        assert {r.status for r in requests_of(batch)} == {"sent"}
        for doc in db.session.query(Document):
            assert get_storage().get(doc.storage_key).startswith(b"%PDF")

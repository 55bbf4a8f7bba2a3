"""What an integrator fetches after a webhook: one request, its original, its sealed PDF, its audit certificate,
the batch's ZIP of signed PDFs; and a JSON body where a form is expected, told so."""

from __future__ import annotations

import hashlib
import io
import zipfile

import pytest
from flask import g
from pypdf import PdfReader
from sqlalchemy import select

from bulksign.batches.field_values import values_by_name
from bulksign.core.extensions import db
from bulksign.documents.seal_keys import seal_key
from bulksign.documents.sealing import check_seal
from bulksign.integrations import webhooks_out
from bulksign.models import Export, Team, User, WebhookDelivery
from bulksign.people.teams import add_member, create_team
from bulksign.people.users import create_api_key, create_user
from tests.support.batches import make_batch
from tests.support.clock import NOW
from tests.support.sealed import signed_request
from tests.support.signing_requests import make_sent_request

APP_URL = "http://127.0.0.1:5000"


def _key(user: User) -> dict:
    secret = create_api_key(db.session, user=user, name="integration", now=NOW).secret
    db.session.commit()
    return {"Authorization": f"Bearer {secret}"}


def _text(pdf: bytes) -> str:
    return " ".join(" ".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf)).pages).split())


@pytest.fixture
def staff(app, users) -> dict:
    """The staff user's key headers (made before a worker runs: it ends the session, detaching ``users``)."""
    return _key(users["staff"])


@pytest.fixture
def signed(app, users, staff, run_jobs):
    """A request signed through the real steps and sealed by the real worker."""
    r = signed_request(owner=users["staff"], name="Anna Berg")
    run_jobs("pdf")
    return r


def test_a_signed_request_its_documents_and_links(app, client, staff, signed):
    headers = staff
    response = client.get(f"/api/v1/requests/{signed.id}", headers=headers)
    assert response.status_code == 200 and response.headers["Cache-Control"] == "no-store"
    body = response.json
    assert (body["id"], body["status"], body["email"], body["name"]) == (
        signed.id,
        "signed",
        "ivan@example.com",
        "Anna Berg",
    )
    assert body["batch"] == {"id": signed.batch_id, "name": "November contracts"}
    assert body["signed_at"] and body["sent_at"] and body["opened_at"]
    assert body["document"]["sha256"] == hashlib.sha256(signed.original).hexdigest()
    base = f"{APP_URL}/api/v1/requests/{signed.id}"
    assert body["links"] == {
        "request": base,
        "batch": f"{APP_URL}/api/v1/batches/{signed.batch_id}",
        "document": f"{base}/document",
        "signed": f"{base}/signed",
        "certificate": f"{base}/certificate",
    }

    original = client.get(body["links"]["document"].removeprefix(APP_URL), headers=headers)
    assert original.status_code == 200 and original.mimetype == "application/pdf"
    assert original.headers["Content-Disposition"] == f'attachment; filename="document-{signed.id}.pdf"'
    assert original.headers["Cache-Control"] == "no-store"
    assert original.data == signed.original

    sealed = client.get(body["links"]["signed"].removeprefix(APP_URL), headers=headers)
    assert sealed.status_code == 200 and sealed.mimetype == "application/pdf"
    assert sealed.headers["Content-Disposition"] == f'attachment; filename="signed-{signed.id}.pdf"'
    assert sealed.headers["Cache-Control"] == "no-store"
    assert hashlib.sha256(sealed.data).hexdigest() == body["signed_document"]["sha256"]
    assert len(sealed.data) == body["signed_document"]["size"]
    assert check_seal(sealed.data, seal_key(app.config)).valid
    # The very bytes the recipient's page serves as their signed copy.
    assert client.get(f"/sign/{signed.token}/signed").data == sealed.data

    certificate = client.get(body["links"]["certificate"].removeprefix(APP_URL), headers=headers)
    assert certificate.status_code == 200 and certificate.mimetype == "application/pdf"
    assert certificate.headers["Content-Disposition"] == f'attachment; filename="audit-certificate-{signed.id}.pdf"'
    text = _text(certificate.data)
    assert text.startswith("Audit certificate") and "203.0.113.5" in text
    assert hashlib.sha256(signed.original).hexdigest() in text
    # Only the certificate: the document's own pages and the signature page stay in the signed PDF.
    pages = len(PdfReader(io.BytesIO(certificate.data)).pages)
    assert (
        pages == len(PdfReader(io.BytesIO(sealed.data)).pages) - len(PdfReader(io.BytesIO(signed.original)).pages) - 1
    )
    assert "Contract body text" not in text and "Contract body text" in _text(sealed.data)


def test_the_signed_pdf_before_signing_and_before_sealing_is_a_clear_409(app, client, users):
    headers = _key(users["staff"])
    sent = make_sent_request(now=NOW, owner=users["staff"])
    for what in ("signed", "certificate"):
        response = client.get(f"/api/v1/requests/{sent.id}/{what}", headers=headers)
        assert response.status_code == 409 and response.json["error"]["code"] == "not_signed"
        assert "not signed (its status is sent)" in response.json["error"]["message"]
    assert client.get(f"/api/v1/requests/{sent.id}", headers=headers).json["signed_document"] is None
    assert client.get(f"/api/v1/requests/{sent.id}/document", headers=headers).data == sent.original

    # Signed (the webhook goes out), the seal job not run yet: ask again shortly.
    unsealed = signed_request(owner=users["staff"], email="second@example.com")
    response = client.get(f"/api/v1/requests/{unsealed.id}/signed", headers=headers)
    assert response.status_code == 409 and response.json["error"]["code"] == "not_ready"
    assert response.headers["Retry-After"] == "5" and "being made" in response.json["error"]["message"]

    # Not rendered yet: no original to download.
    batch_id = make_batch(now=NOW, user=users["staff"], recipients=1)
    pending = client.get(f"/api/v1/batches/{batch_id}/requests", headers=headers).json["items"][0]["id"]
    response = client.get(f"/api/v1/requests/{pending}/document", headers=headers)
    assert response.status_code == 409 and response.headers["Retry-After"] == "5"
    assert "not rendered yet (status pending)" in response.json["error"]["message"]


def test_another_teams_requests_and_exports_are_not_found(app, client, staff, signed):
    other_team = create_team(db.session, name="Elsewhere", now=NOW)
    outsider = create_user(db.session, email="out@example.com", password="outsider-password", role="manager", now=NOW)
    add_member(db.session, team=other_team, user=outsider, by=None, now=NOW)
    db.session.commit()
    headers = _key(outsider)
    export_id = client.post(f"/api/v1/batches/{signed.batch_id}/exports", headers=staff).json["id"]
    for path in (
        f"/requests/{signed.id}",
        f"/requests/{signed.id}/document",
        f"/requests/{signed.id}/signed",
        f"/requests/{signed.id}/certificate",
        f"/batches/{signed.batch_id}/exports/{export_id}",
        f"/batches/{signed.batch_id}/exports/{export_id}/download",
    ):
        response = client.get("/api/v1" + path, headers=headers)
        assert response.status_code == 404 and response.json["error"]["code"] == "not_found", path
    assert client.post(f"/api/v1/batches/{signed.batch_id}/exports", headers=headers).status_code == 404
    assert client.get("/api/v1/requests/999999", headers=staff).status_code == 404


def test_the_zip_of_signed_pdfs_is_started_followed_and_downloaded(app, client, staff, signed, run_jobs):
    viewer = create_user(db.session, email="viewer@example.com", password="viewer-password", role="viewer", now=NOW)
    add_member(db.session, team=db.session.scalar(select(Team)), user=viewer, by=None, now=NOW)
    db.session.commit()
    reader = _key(viewer)
    batch_id = signed.batch_id

    refused = client.post(f"/api/v1/batches/{batch_id}/exports", headers=reader)
    assert refused.status_code == 403 and "not build new ones" in refused.json["error"]["message"]
    started = client.post(f"/api/v1/batches/{batch_id}/exports", headers=staff)
    assert started.status_code == 202
    export = started.json
    status_url = f"{APP_URL}/api/v1/batches/{batch_id}/exports/{export['id']}"
    assert started.headers["Location"] == status_url == export["links"]["status"]
    assert (export["status"], export["total"], export["done"]) == ("pending", 1, 0)
    # Started again while unfinished: the same export, no second job.
    assert client.post(f"/api/v1/batches/{batch_id}/exports", headers=staff).json["id"] == export["id"]
    early = client.get(export["links"]["download"].removeprefix(APP_URL), headers=reader)
    assert (
        early.status_code == 409 and early.json["error"]["code"] == "not_ready" and early.headers["Retry-After"] == "5"
    )
    polled = client.get(status_url.removeprefix(APP_URL), headers=reader)
    assert polled.status_code == 200 and polled.json["status"] == "pending" and polled.headers["Retry-After"] == "5"

    run_jobs("default")
    g.pop("api_user", None)
    ready = client.get(status_url.removeprefix(APP_URL), headers=reader).json
    assert (ready["status"], ready["done"], ready["error"]) == ("ready", 1, None) and ready["finished_at"]
    assert db.session.scalar(select(Export.status)) == "ready"
    download = client.get(ready["links"]["download"].removeprefix(APP_URL), headers=reader)
    assert download.status_code == 200 and download.mimetype == "application/zip"
    assert download.headers["Content-Disposition"] == f'attachment; filename="batch-{batch_id}-signed.zip"'
    assert download.headers["Cache-Control"] == "no-store"
    archive = zipfile.ZipFile(io.BytesIO(download.data))
    assert archive.namelist() == ["000002-ivan@example.com.pdf"]
    sealed = client.get(f"/api/v1/requests/{signed.id}/signed", headers=reader).data
    assert archive.read("000002-ivan@example.com.pdf") == sealed

    db.session.add(Export(batch_id=batch_id, status="failed", error="storage full", total=1, created_at=NOW))
    db.session.commit()
    failed_id = db.session.scalar(select(Export.id).where(Export.status == "failed"))
    failed = client.get(f"/api/v1/batches/{batch_id}/exports/{failed_id}/download", headers=reader)
    assert failed.status_code == 409 and failed.json["error"]["code"] == "export_failed"
    assert "storage full" in failed.json["error"]["message"]
    assert client.get(f"/api/v1/batches/{batch_id}/exports/{2**40}", headers=reader).status_code == 404


def test_the_signed_webhook_carries_the_urls_of_the_documents(app, client, staff, signed):
    webhooks_out.create_endpoint(
        db.session, url="https://hooks.example.com/in", events=["request.signed", "request.sent"], user_id=None, now=NOW
    )
    db.session.commit()
    webhooks_out.collect(
        db.session, after_event_id=0, batches_since=NOW, now=NOW, app_url=APP_URL, values_of=values_by_name
    )
    db.session.commit()
    payloads = {d.event: d.payload for d in db.session.scalars(select(WebhookDelivery))}
    links = client.get(f"/api/v1/requests/{signed.id}", headers=staff).json["links"]
    assert payloads["request.signed"]["links"] == {
        "request": links["request"],
        "document": links["document"],
        "signed": links["signed"],
        "certificate": links["certificate"],
    }
    assert payloads["request.sent"]["links"]["signed"] is None
    assert payloads["request.sent"]["links"]["request"] == links["request"]


@pytest.mark.parametrize("path", ["/api/v1/batches", "/api/v1/batches/validate"])
def test_a_json_body_where_a_form_is_expected_is_told_the_content_type(app, client, users, path):
    response = client.post(
        path, json={"template_id": 1, "file": "email\nanna@example.com\n"}, headers=_key(users["staff"])
    )
    assert response.status_code == 415
    error = response.json["error"]
    assert error["code"] == "unsupported_media_type"
    assert "takes multipart/form-data" in error["message"] and "not Content-Type application/json" in error["message"]
    assert error["details"] == {"expected": "multipart/form-data", "received": "application/json"}

"""A batch's evidence package as an auditor checks it: every signed PDF validates with pdfsig, the
manifest's hashes are the files' and the database's, SHA256SUMS passes ``sha256sum -c``, unsigned requests are
listed with their status, and the download is for the batch's team only. Built with memory bounded per document."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import subprocess
import tracemalloc
import zipfile
from datetime import timedelta

import pytest
from sqlalchemy import insert, select

from bulksign.batches.evidence import build_evidence, start_evidence
from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.models import Document, Party, SealCertificate, SigningRequest, User, utcnow
from bulksign.people.users import create_api_key, create_user
from bulksign.signing.parties import add_recipients
from bulksign.signing.recipient_actions import sign
from bulksign.work.pipeline import enqueue_renders
from tests.support.accounts import STAFF
from tests.support.batches import make_batch, request_ids
from tests.support.clock import NOW
from tests.support.partydata import ROWS, make_two_party_batch


def _signed_batch(users, run_jobs, *, recipients: int, signers: int) -> int:
    batch_id = make_batch(user=users["staff"], now=NOW, recipients=recipients, name="Offer letters")
    add_recipients(db.session, batch_id=batch_id, now=NOW)  # as batch creation gives every request its party
    db.session.commit()
    enqueue_renders(request_ids(batch_id))
    run_jobs("pdf", "mail")
    for request_id in request_ids(batch_id)[:signers]:
        done = sign(
            db.session,
            request_id=request_id,
            now=NOW + timedelta(days=1),
            signer_name="Signer",
            signature_png=None,
            consent=True,
            ip="127.0.0.1",
            user_agent="test",
        )
        assert done.status == "signed"
    run_jobs("pdf", "mail")  # the seals
    return batch_id


def _staff():
    """The staff user of the ``users`` fixture, loaded again (the workers' runs end the test's session)."""
    return db.session.scalar(select(User).where(User.email == STAFF[0]))


def _bearer(user) -> dict:
    secret = create_api_key(db.session, user=user, name="test", now=NOW).secret
    db.session.commit()
    return {"Authorization": f"Bearer {secret}"}


def test_the_package_holds_what_an_auditor_checks_and_every_check_passes(app, users, client, run_jobs, tmp_path, smtp):
    batch_id = _signed_batch(users, run_jobs, recipients=3, signers=2)
    key = _bearer(_staff())
    started = client.post(f"/api/v1/batches/{batch_id}/evidence", headers=key)
    assert started.status_code == 202
    body = started.get_json()
    assert body["status"] == "pending" and body["download_url"] is None
    run_jobs("default")
    followed = client.get(f"/api/v1/batches/{batch_id}/evidence/{body['id']}", headers=key).get_json()
    assert (followed["status"], followed["done"], followed["total"]) == ("ready", 2, 2)
    download = client.get(followed["download_url"].removeprefix(app.config["APP_URL"]), headers=key)
    assert download.status_code == 200 and download.mimetype == "application/zip"

    archive = zipfile.ZipFile(io.BytesIO(download.data))
    names = set(archive.namelist())
    assert {"README.txt", "manifest.csv", "manifest.json", "SHA256SUMS", "attachments/"} <= names
    assert len([n for n in names if n.startswith("signed/")]) == 2
    assert len([n for n in names if n.startswith("certificates/")]) == 2
    archive.extractall(tmp_path)

    sums = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert sums.returncode == 0, sums.stdout + sums.stderr
    assert sums.stdout.count(": OK") == len(names) - 2  # every file but SHA256SUMS itself and the folder

    manifest = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    entries = manifest["requests"]
    assert [e["status"] for e in entries] == ["signed", "signed", "sent"]
    fingerprint = db.session.scalar(select(SealCertificate.fingerprint))
    for entry in entries[:2]:
        signed_file = tmp_path / entry["signed_file"]
        data = signed_file.read_bytes()
        stored = db.session.scalars(
            select(Document).where(Document.request_id == entry["request_id"]).order_by(Document.id)
        ).all()
        by_kind = {d.kind: d for d in stored}
        assert entry["signed_sha256"] == hashlib.sha256(data).hexdigest() == by_kind["signed"].sha256
        assert entry["original_sha256"] == by_kind["original"].sha256
        assert entry["seal_certificate_sha256"] == fingerprint
        assert entry["parties"][0]["role"] == "recipient" and entry["parties"][0]["status"] == "signed"
        checked = subprocess.run(["pdfsig", str(signed_file)], capture_output=True, text=True, timeout=30).stdout
        assert "Signature is Valid" in checked and "Total document signed" in checked, checked
        assert (tmp_path / entry["certificate_file"]).read_bytes().startswith(b"%PDF")
    assert entries[2]["signed_file"] is None and entries[2]["original_sha256"] is not None

    rows = list(csv.DictReader(io.StringIO((tmp_path / "manifest.csv").read_text(encoding="utf-8"))))
    assert [r["status"] for r in rows] == ["signed", "signed", "sent"]
    assert rows[0]["signed_sha256"] == entries[0]["signed_sha256"]
    readme = (tmp_path / "README.txt").read_text(encoding="utf-8")
    assert "sha256sum -c SHA256SUMS" in readme and "pdfsig" in readme and "/verify" in readme

    # Another team's key does not find it; a viewer of the team may follow it but not start one.
    stranger = create_user(db.session, email="other@example.com", password="x" * 12, role="staff", now=NOW)
    db.session.commit()
    other = _bearer(stranger)
    assert client.get(f"/api/v1/batches/{batch_id}/evidence/{body['id']}", headers=other).status_code == 404
    assert client.get(followed["download_url"].removeprefix(app.config["APP_URL"]), headers=other).status_code == 404
    assert client.post(f"/api/v1/batches/{batch_id}/evidence", headers=other).status_code == 404


@pytest.mark.slow(seconds=35)
@pytest.mark.parametrize("documents", [200])
def test_building_a_big_package_holds_one_document_at_a_time(app, users, run_jobs, documents, capsys):
    """Many signed documents (one real sealed PDF stored once, referenced by each request): the peak of Python
    memory while building stays flat, whatever the count (measured 4.8 MiB for 100 documents, 5.8 for 600; the
    package is 14 and 86 MiB)."""
    batch_id = _signed_batch(users, run_jobs, recipients=1, signers=1)
    (first,) = request_ids(batch_id)
    signed = db.session.scalar(select(Document).where(Document.request_id == first, Document.kind == "signed"))
    original = db.session.scalar(select(Document).where(Document.request_id == first, Document.kind == "original"))
    template = db.session.get(SigningRequest, first)
    rows = [
        {
            "batch_id": batch_id,
            "row_number": 3 + i,
            "email": f"person{i}@example.org",
            "name": f"Person {i}",
            "data": {},
            "status": "signed",
            "status_changed_at": NOW,
            "created_at": NOW,
            "signed_at": NOW,
            "attempts": 0,
            "reminder_count": 0,
            "token_nonce": template.token_nonce,
        }
        for i in range(documents - 1)
    ]
    ids = db.session.scalars(insert(SigningRequest).returning(SigningRequest.id), rows).all()
    for doc in (signed, original):
        db.session.execute(
            insert(Document),
            [
                {
                    "request_id": i,
                    "kind": doc.kind,
                    "storage_key": doc.storage_key,
                    "sha256": doc.sha256,
                    "size": doc.size,
                    "seal_fingerprint": doc.seal_fingerprint,
                    "signature_box": doc.signature_box,
                    "created_at": NOW,
                }
                for i in ids
            ],
        )
    db.session.commit()
    export_id = start_evidence(db.session, batch_id=batch_id, user=_staff(), now=NOW).export.id
    db.session.commit()
    tracemalloc.start()
    result = build_evidence(db.session, export_id=export_id, storage=get_storage(), now=utcnow)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    size = len(get_storage().get(f"exports/{batch_id}/{export_id}-evidence.zip"))
    assert result.files == documents
    with capsys.disabled():
        print(f"\nevidence package: {documents} documents, {size / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB")
    assert peak < 12 * 2**20 < size, (peak, size)


def test_a_purged_request_is_listed_with_its_hashes_and_no_files_and_the_package_still_builds(
    app, users, run_jobs, tmp_path
):
    batch_id = _signed_batch(users, run_jobs, recipients=2, signers=2)
    purged, kept = request_ids(batch_id)
    documents = db.session.scalars(select(Document).where(Document.request_id == purged)).all()
    for document in documents:  # as the retention purge leaves it: the files gone, the hashes kept
        get_storage().delete(document.storage_key)
    db.session.get(SigningRequest, purged).purged_at = NOW + timedelta(days=400)
    db.session.commit()
    export_id = start_evidence(db.session, batch_id=batch_id, user=_staff(), now=NOW).export.id
    db.session.commit()
    result = build_evidence(db.session, export_id=export_id, storage=get_storage(), now=utcnow)
    assert (result.status, result.files) == ("ready", 1)
    archive = zipfile.ZipFile(io.BytesIO(get_storage().get(f"exports/{batch_id}/{export_id}-evidence.zip")))
    entries = json.loads(archive.read("manifest.json"))["requests"]
    gone = next(e for e in entries if e["request_id"] == purged)
    signed = next(d for d in documents if d.kind == "signed")
    assert (gone["signed_file"], gone["signed_sha256"]) == (None, signed.sha256)
    assert gone["purged_at"] is not None
    assert next(e for e in entries if e["request_id"] == kept)["signed_file"] is not None


def test_the_manifest_lists_every_party_of_each_document_in_its_own_state_and_times(app, users, client, run_jobs):
    """A two-party batch (the row's recipient, then the employer ``ACME HR``): each entry lists both parties with
    their own states and times, not the request's status copied onto the recipient alone."""
    batch_id = make_two_party_batch(db.session, now=NOW, user_id=users["staff"].id)
    key = _bearer(_staff())
    started = client.post(f"/api/v1/batches/{batch_id}/evidence", headers=key).get_json()
    run_jobs("default")
    followed = client.get(f"/api/v1/batches/{batch_id}/evidence/{started['id']}", headers=key).get_json()
    download = client.get(followed["download_url"].removeprefix(app.config["APP_URL"]), headers=key)
    archive = zipfile.ZipFile(io.BytesIO(download.data))
    entries = json.loads(archive.read("manifest.json"))["requests"]
    parties = {p.id: p for p in db.session.scalars(select(Party).where(Party.batch_id == batch_id))}
    by_request = {(p.request_id, p.role): p for p in parties.values()}
    assert [(e["status"], [(p["role"], p["status"]) for p in e["parties"]]) for e in entries] == [
        (status, [("recipient", recipient.value), ("employer", employer.value)]) for status, recipient, employer in ROWS
    ]
    request = db.session.get(SigningRequest, entries[3]["request_id"])
    recipient, employer = entries[3]["parties"]  # signed by both
    assert recipient == {
        "role": "recipient",
        "label": "Recipient",
        "name": request.name,
        "email": request.email,
        "status": "signed",
        "signed_at": by_request[request.id, "recipient"].signed_at.isoformat(timespec="seconds"),
        "declined_at": None,
    }
    assert (employer["label"], employer["name"], employer["email"]) == ("employer", "ACME HR", "hr@example.com")
    assert employer["signed_at"] == by_request[request.id, "employer"].signed_at.isoformat(timespec="seconds")
    declined = entries[4]["parties"][1]
    assert declined["status"] == "declined" and declined["declined_at"] is not None and declined["signed_at"] is None

    rows = list(csv.DictReader(io.StringIO(archive.read("manifest.csv").decode("utf-8"))))
    assert rows[3]["status"] == "signed"
    assert f"recipient: {request.name} <{request.email}> (signed {recipient['signed_at']})" in rows[3]["parties"]
    assert f"employer: ACME HR <hr@example.com> (signed {employer['signed_at']})" in rows[3]["parties"]
    assert "employer: ACME HR <hr@example.com> (waiting)" in rows[0]["parties"]

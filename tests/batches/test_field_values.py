"""What signers filled in, back to staff: the values on the request's row and in its panel, labelled and
written in the batch's language; an attachment downloaded only by whoever sees the batch; a ``field_<name>``
column per field in the CSV export; the attachments beside each signed PDF in the ZIP and in the evidence package
with their sha256 in its manifest; and retention and erasure removing values and files with the person's data."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import subprocess
import zipfile
from datetime import timedelta

from flask import g
from sqlalchemy import select, update

from bulksign.batches import retention
from bulksign.batches.erasure import erase_person
from bulksign.batches.evidence import build_evidence, start_evidence
from bulksign.batches.exports import BOM, build_signed_zip, start_signed_zip
from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.models import Document, SigningRequest, User
from bulksign.models.fields import FieldValue
from bulksign.people.teams import add_member, create_team
from bulksign.people.users import create_user
from tests.support.accounts import STAFF
from tests.support.batches import request_ids
from tests.support.clock import NOW
from tests.support.field_values import GIVEN, batch_with_fields, fill, scan_png


def _staff() -> User:
    return db.session.scalar(select(User).where(User.email == STAFF[0]))


def _filled_batch(users, **batch_fields) -> tuple[int, list[int], bytes]:
    """A batch of two: the first request's signer filled every field and attached a scan, the second nothing yet."""
    batch_id = batch_with_fields(user=users["staff"], now=NOW, **batch_fields)
    ids = request_ids(batch_id)
    scan = scan_png()
    fill(ids[0], now=NOW, scan=scan)
    return batch_id, ids, scan


def _signed(request_id: int) -> bytes:
    """A signed document for the request (its bytes), as the seal leaves one."""
    data = b"%PDF-1.7 signed " + str(request_id).encode()
    key = f"signed/{request_id}.pdf"
    get_storage().put(key, data)
    db.session.add(
        Document(
            request_id=request_id,
            kind="signed",
            storage_key=key,
            sha256=hashlib.sha256(data).hexdigest(),
            size=len(data),
            created_at=NOW,
        )
    )
    db.session.commit()
    return data


def test_staff_see_the_values_on_the_row_and_in_the_panel_labelled_and_in_their_pages_language(client, auth, users):
    batch_id, ids, scan = _filled_batch(users, language="ru")
    auth.login()
    page = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    row = re.search(rf'<tr id="r{ids[0]}".*?</tr>', page, re.S).group(0)
    text = re.sub(r" +", " ", re.sub(r"<[^>]+>", "", row))
    for shown in (
        "IBAN: DE89370400440532013000",
        # A Russian batch's values on an English page: written as English writes them.
        "Start date: January 31, 2027",
        "Hours a week: 1,234.5",
        "I have read the work rules: Ticked",
    ):
        assert shown in text
    link = f"/batches/{batch_id}/requests/{ids[0]}/attachments/id_scan"
    assert f'href="{link}"' in row and "passport scan.png" in row
    # The row of a request not signed yet shows an empty cell, not another row's values.
    other = re.search(rf'<tr id="r{ids[1]}".*?</tr>', page, re.S).group(0)
    assert "IBAN" not in other and "Filled in" in page

    panel = client.get(f"/batches/{batch_id}/requests/{ids[0]}").get_data(as_text=True)
    filled = re.search(r'<dl class="meta filled-in" id="filled-in">.*?</dl>', panel, re.S).group(0)
    labels = re.findall(r"<dt>(.*?)</dt>", filled)
    assert labels == ["IBAN", "Start date", "Hours a week", "I have read the work rules", "ID scan"]
    assert "January 31, 2027" in filled and f'href="{link}"' in filled
    assert hashlib.sha256(scan).hexdigest() in filled
    assert "Recipient · 2026-11-02 09:00" in filled
    assert "filled-in" not in client.get(f"/batches/{batch_id}/requests/{ids[1]}").get_data(as_text=True)


def test_the_progress_poll_brings_the_values_of_the_rows_on_screen(client, auth, users):
    batch_id, ids, _ = _filled_batch(users)
    auth.login()
    poll = client.get(f"/batches/{batch_id}/progress?shown={ids[0]}&shown={ids[1]}").get_data(as_text=True)
    cell = re.search(rf'<span id="fv-{ids[0]}"[^>]*hx-swap-oob="true">.*?</span>\s*</span>', poll, re.S)
    assert cell and "DE89370400440532013000" in cell.group(0)


def test_an_attachment_downloads_for_who_sees_the_batch_and_is_not_found_for_anyone_else(app, client, auth, users):
    batch_id, ids, scan = _filled_batch(users)
    elsewhere = create_team(db.session, name="Elsewhere", now=NOW)
    outsider = create_user(db.session, email="out@example.com", password="outsider-pass", role="manager", now=NOW)
    add_member(db.session, team=elsewhere, user=outsider, by=None, now=NOW)
    other_batch = batch_with_fields(user=outsider, now=NOW, recipients=1, name="Theirs")
    db.session.commit()
    link = f"/batches/{batch_id}/requests/{ids[0]}/attachments/id_scan"

    auth.login()
    got = client.get(link)
    assert got.status_code == 200 and got.data == scan
    assert got.headers["Content-Type"] == "image/png"
    assert got.headers["Content-Disposition"] == 'attachment; filename="passport scan.png"'
    assert got.headers["X-Content-Type-Options"] == "nosniff" and got.headers["Cache-Control"] == "no-store"
    # A field without a file, a name the request has not, a request under another batch's id: not found.
    assert client.get(f"/batches/{batch_id}/requests/{ids[0]}/attachments/iban").status_code == 404
    assert client.get(f"/batches/{batch_id}/requests/{ids[1]}/attachments/id_scan").status_code == 404
    assert client.get(f"/batches/{other_batch}/requests/{ids[0]}/attachments/id_scan").status_code == 404

    auth.logout()
    g.pop("_login_user", None)
    auth.login("out@example.com", "outsider-pass")
    assert client.get(link).status_code == 404
    assert client.get(f"/batches/{batch_id}/requests/{ids[0]}").status_code == 404


def test_a_file_name_in_another_script_downloads_under_its_own_name(client, auth, users):
    batch_id = batch_with_fields(user=users["staff"], now=NOW, recipients=1)
    (request_id,) = request_ids(batch_id)
    fill(request_id, now=NOW, scan=scan_png(), filename='Résumé "скан"\r\n.png')
    auth.login()
    got = client.get(f"/batches/{batch_id}/requests/{request_id}/attachments/id_scan")
    assert got.status_code == 200
    # Old clients read the plain name, others the name in its own letters; no quote or line break in either.
    assert got.headers["Content-Disposition"] == (
        "attachment; filename=\"Resume _____.png\"; filename*=UTF-8''R%C3%A9sum%C3%A9%20_%D1%81%D0%BA%D0%B0%D0%BD.png"
    )


def test_the_csv_export_has_a_column_per_field_with_the_values_as_given(client, auth, users):
    batch_id, ids, _ = _filled_batch(users, language="ru")
    auth.login()
    text = client.get(f"/batches/{batch_id}/export.csv").get_data(as_text=True)
    assert text.startswith(BOM)
    rows = list(csv.DictReader(io.StringIO(text[1:])))
    header = next(csv.reader(io.StringIO(text[1:])))
    assert header[-5:] == ["field_iban", "field_start", "field_hours", "field_rules", "field_id_scan"]
    first, second = rows
    # As stored, for machines: the ISO date, the plain number, true/false, the attachment's file name.
    assert {k: first[f"field_{k}"] for k in GIVEN} == GIVEN
    assert first["field_id_scan"] == "passport scan.png"
    assert all(second[f"field_{k}"] == "" for k in (*GIVEN, "id_scan"))


def test_the_zip_holds_each_requests_attachment_beside_its_signed_pdf(app, users):
    batch_id, ids, scan = _filled_batch(users)
    for request_id in ids:
        _signed(request_id)
    started = start_signed_zip(db.session, batch_id=batch_id, user=_staff(), now=NOW)
    db.session.commit()
    storage = get_storage()
    done = build_signed_zip(db.session, export_id=started.export.id, storage=storage, now=lambda: NOW)
    assert (done.status, done.files) == ("ready", 2)
    export = db.session.get(type(started.export), started.export.id)
    archive = zipfile.ZipFile(io.BytesIO(storage.get(export.storage_key)))
    assert archive.namelist() == [
        "000002-person0@example.com.pdf",
        "000002-person0@example.com-id_scan-passport_scan.png",
        "000003-person1@example.com.pdf",
    ]
    assert archive.read("000002-person0@example.com-id_scan-passport_scan.png") == scan


def test_the_evidence_package_holds_the_attachments_and_its_manifest_lists_them_with_their_sha256(app, users, tmp_path):
    batch_id, ids, scan = _filled_batch(users)
    _signed(ids[0])
    started = start_evidence(db.session, batch_id=batch_id, user=_staff(), now=NOW)
    db.session.commit()
    storage = get_storage()
    assert build_evidence(db.session, export_id=started.export.id, storage=storage, now=lambda: NOW).status == "ready"
    export = db.session.get(type(started.export), started.export.id)
    archive = zipfile.ZipFile(io.BytesIO(storage.get(export.storage_key)))
    name = "attachments/000002-person0@example.com-id_scan-passport_scan.png"
    assert archive.read(name) == scan
    archive.extractall(tmp_path)
    assert subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=tmp_path).returncode == 0

    manifest = json.loads(archive.read("manifest.json"))
    entry = next(e for e in manifest["requests"] if e["request_id"] == ids[0])
    assert entry["fields"] == GIVEN
    (attached,) = entry["attachments"]
    assert attached["file"] == name and attached["sha256"] == hashlib.sha256(scan).hexdigest()
    assert (attached["field"], attached["filename"], attached["content_type"], attached["size"]) == (
        "id_scan",
        "passport scan.png",
        "image/png",
        len(scan),
    )
    rows = {int(r["request_id"]): r for r in csv.DictReader(io.StringIO(archive.read("manifest.csv").decode()))}
    assert rows[ids[0]]["attachments"] == f"id_scan: {name} ({hashlib.sha256(scan).hexdigest()})"
    assert rows[ids[1]]["attachments"] == ""
    readme = archive.read("README.txt").decode()
    assert "none are collected yet" not in readme and "attachments/" in readme


def test_erasure_removes_the_values_and_the_stored_attachment_and_keeps_its_hash(client, auth, users):
    batch_id, ids, scan = _filled_batch(users)
    key = db.session.scalar(select(FieldValue.storage_key).where(FieldValue.name == "id_scan"))
    storage = get_storage()
    assert storage.exists(key)
    email = db.session.get(SigningRequest, ids[0]).email
    erased = erase_person(db.session, storage=storage, email=email, by=None, now=NOW)
    db.session.commit()
    assert [e.request_id for e in erased.erased] == [ids[0]]
    assert not storage.exists(key)
    rows = db.session.scalars(select(FieldValue).where(FieldValue.request_id == ids[0])).all()
    assert {r.name for r in rows} == {*GIVEN, "id_scan"}
    assert all(r.value is None and r.storage_key is None and r.entered_ip is None for r in rows)
    # Like a purged document's, the attachment's hash stays: a kept copy can still be matched.
    assert next(r for r in rows if r.name == "id_scan").sha256 == hashlib.sha256(scan).hexdigest()

    auth.login()
    assert client.get(f"/batches/{batch_id}/requests/{ids[0]}/attachments/id_scan").status_code == 404
    panel = client.get(f"/batches/{batch_id}/requests/{ids[0]}").get_data(as_text=True)
    assert "DE89370400440532013000" not in panel and "/attachments/id_scan" not in panel


def test_the_retention_purge_removes_an_ended_requests_values_and_attachment(app, users):
    batch_id, ids, _ = _filled_batch(users)
    key = db.session.scalar(select(FieldValue.storage_key).where(FieldValue.name == "id_scan"))
    # The signer filled the form, then a second party declined: the request ended unsigned.
    db.session.execute(update(SigningRequest).where(SigningRequest.id == ids[0]).values(status="declined"))
    retention.set_batch_retention(db.session, batch_id=batch_id, keep_signed_days=None, keep_unsigned_days=7)
    db.session.commit()
    storage = get_storage()
    done = retention.purge_due(
        db.session, storage=storage, now=NOW + timedelta(days=8), on_page=db.session.commit, upload_hours=24
    )
    assert done.requests == 1 and not storage.exists(key)
    values = db.session.scalars(select(FieldValue.value).where(FieldValue.request_id == ids[0])).all()
    assert values and set(values) == {None}

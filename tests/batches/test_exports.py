"""Exports: the filtered recipients as CSV (Excel-safe) and a ZIP of the signed PDFs built by a job."""

from __future__ import annotations

import csv
import io
import re
import zipfile

from flask import g
from sqlalchemy import select, update

from bulksign.batches.exports import BOM
from bulksign.core.extensions import db
from bulksign.core.spreadsheets import cell_text
from bulksign.documents.storage import get_storage
from bulksign.models import Document, Export, SigningRequest
from tests.support.batchdata import batch_in_states
from tests.support.clock import NOW
from tests.support.web import csrf_from


def _rows(response) -> list[dict]:
    text = response.get_data().decode("utf-8")
    assert text.startswith(BOM)
    return list(csv.DictReader(io.StringIO(text[1:])))


def test_csv_has_a_bom_and_only_the_filtered_rows(client, auth, users):
    batch = batch_in_states(db.session, statuses=["sent", "signed", "signed", "bounced"], now=NOW)
    auth.login()
    response = client.get(f"/batches/{batch.id}/export.csv?status=signed")
    assert response.mimetype == "text/csv" and "attachment" in response.headers["Content-Disposition"]
    rows = _rows(response)
    assert [r["status"] for r in rows] == ["signed", "signed"]
    assert rows[0]["email"] == "person000002@example.org"


def test_csv_cells_that_would_run_as_formulas_are_escaped(client, auth, users):
    batch = batch_in_states(db.session, statuses=["sent"] * 5, now=NOW)
    names = ['=HYPERLINK("http://x")', "+1+2", "-3", "@SUM(A1)", "\tTab"]
    ids = db.session.scalars(
        select(SigningRequest.id).where(SigningRequest.batch_id == batch.id).order_by(SigningRequest.id)
    ).all()
    for request_id, name in zip(ids, names):
        db.session.execute(update(SigningRequest).where(SigningRequest.id == request_id).values(name=name))
    db.session.commit()
    auth.login()
    rows = _rows(client.get(f"/batches/{batch.id}/export.csv"))
    assert [r["name"] for r in rows] == ['\'=HYPERLINK("http://x")', "'+1+2", "'-3", "'@SUM(A1)", "'\tTab"]
    assert cell_text("Ann") == "Ann" and cell_text(None) == "" and cell_text(-3) == "'-3"


def test_csv_streams_every_row_of_a_batch_bigger_than_one_page(client, auth, users):
    batch = batch_in_states(db.session, statuses=["sent"] * 4500, now=NOW)
    auth.login()
    response = client.get(f"/batches/{batch.id}/export.csv")
    assert response.is_streamed
    rows = _rows(response)
    assert len(rows) == 4500 and len({r["email"] for r in rows}) == 4500


def test_csv_over_the_api_with_a_key(app, client, users):
    from bulksign.people.users import create_api_key

    secret = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    batch = batch_in_states(db.session, statuses=["sent", "signed"], now=NOW)
    response = client.get(
        f"/api/v1/batches/{batch.id}/export.csv?status=sent", headers={"Authorization": f"Bearer {secret}"}
    )
    assert [r["status"] for r in _rows(response)] == ["sent"]


def _signed_documents(batch, n):
    storage = get_storage()
    ids = db.session.scalars(
        select(SigningRequest.id).where(SigningRequest.batch_id == batch.id, SigningRequest.status == "signed")
    ).all()[:n]
    for request_id in ids:
        key = f"batches/{batch.id}/requests/{request_id}/signed.pdf"
        storage.put(key, b"%PDF-1.7 signed " + str(request_id).encode())
        db.session.add(
            Document(request_id=request_id, kind="signed", storage_key=key, sha256="0" * 64, size=20, created_at=NOW)
        )
    db.session.commit()
    return ids


def test_zip_of_signed_pdfs_is_built_by_a_job_with_progress_and_a_download(client, auth, users, run_jobs):
    batch = batch_in_states(db.session, statuses=["signed"] * 3 + ["sent"], now=NOW)
    ids = _signed_documents(batch, 3)
    auth.login()
    page = client.get(f"/batches/{batch.id}")
    started = client.post(
        f"/batches/{batch.id}/exports", data={"csrf_token": csrf_from(page)}, headers={"HX-Request": "true"}
    )
    html = started.get_data(as_text=True)
    assert "0 of 3" in html and 'hx-trigger="every 2s"' in html
    export = db.session.scalar(select(Export))
    assert export.status == "pending" and export.total == 3
    # Asking again while it runs does not start a second job.
    client.post(f"/batches/{batch.id}/exports", data={"csrf_token": csrf_from(page)})
    batch_id, export_id = batch.id, export.id  # the worker ends the shared session: keep plain ids
    run_jobs("default")
    g.pop("_login_user", None)
    fragment = client.get(f"/batches/{batch_id}/exports/{export_id}").get_data(as_text=True)
    assert "hx-trigger" not in fragment and "Download the ZIP (3 signed documents)" in fragment
    link = re.search(r'href="([^"]+/download)"', fragment).group(1)
    archive = zipfile.ZipFile(io.BytesIO(client.get(link).data))
    assert len(archive.namelist()) == 3
    assert sorted(archive.read(n) for n in archive.namelist()) == sorted(
        b"%PDF-1.7 signed " + str(i).encode() for i in ids
    )


def test_zip_download_of_another_batch_or_unfinished_export_is_404(client, auth, users):
    batch = batch_in_states(db.session, statuses=["signed"], now=NOW)
    other = batch_in_states(db.session, statuses=["signed"], now=NOW, name="Other")
    export = Export(batch_id=batch.id, status="running", total=1, created_at=NOW)
    db.session.add(export)
    db.session.commit()
    auth.login()
    assert client.get(f"/batches/{batch.id}/exports/{export.id}/download").status_code == 404
    assert client.get(f"/batches/{other.id}/exports/{export.id}").status_code == 404

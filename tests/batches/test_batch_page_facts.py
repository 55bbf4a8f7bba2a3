"""What the batch page says of a batch beyond its progress: how long it is kept and its legal hold (and the API
object), an export the retention rules deleted in the page's language, and a cancelled row's parties."""

from __future__ import annotations

from flask import g
from sqlalchemy import select

from bulksign.batches.retention import EXPORT_PURGED
from bulksign.batches.retention.legal_hold import place_hold
from bulksign.batches.states import transition
from bulksign.core.extensions import db
from bulksign.models import Export, SigningRequest
from bulksign.people.users import create_api_key
from tests.support.batchdata import batch_in_states
from tests.support.clock import NOW
from tests.support.partydata import make_two_party_batch


def test_retention_and_a_legal_hold_show_on_the_page_and_in_the_api(client, auth, users):
    batch = batch_in_states(db.session, statuses=["sent"] * 2, now=NOW, user_id=users["staff"].id)
    batch_id = batch.id
    auth.login()
    page = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    assert "signed documents for ever · unsigned requests 90 days after they end" in page
    assert 'id="legal-hold"' not in page
    place_hold(db.session, batch_id=batch_id, reason="Court case 12/2026", by=users["admin"], now=NOW)
    db.session.commit()
    page = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    assert "On legal hold since Nov 2, 2026: Court case 12/2026." in page
    key = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    g.pop("_login_user", None)
    found = client.get(f"/api/v1/batches/{batch_id}", headers={"Authorization": f"Bearer {key}"}).get_json()
    assert found["retention"] == {
        "keep_signed_days": None,
        "keep_unsigned_days": 90,
        "legal_hold_since": found["retention"]["legal_hold_since"],
        "legal_hold_reason": "Court case 12/2026",
    }
    assert found["retention"]["legal_hold_since"].startswith("2026-11-02")
    listed = client.get("/api/v1/batches", headers={"Authorization": f"Bearer {key}"}).get_json()
    assert listed["items"][0]["retention"]["legal_hold_reason"] == "Court case 12/2026"


def test_an_export_the_retention_rules_deleted_is_said_so_in_the_pages_language(client, auth, users):
    batch = batch_in_states(db.session, statuses=["signed"], now=NOW, user_id=users["staff"].id)
    for kind in ("signed_zip", "evidence"):
        db.session.add(Export(batch_id=batch.id, kind=kind, status="failed", error=EXPORT_PURGED, created_at=NOW))
    users["staff"].locale = "ru"
    db.session.commit()
    auth.login()
    g.pop("_flask_babel", None)  # the test shares the app context: the locale is chosen afresh
    page = client.get(f"/batches/{batch.id}").get_data(as_text=True)
    assert 'id="zip-purged"' in page and 'id="evidence-purged"' in page
    assert "Deleted under the retention rules" not in page and 'class="error"' not in page
    assert "удал" in page.split('id="zip-purged"', 1)[1].split("</span>", 1)[0]


def test_a_cancelled_rows_parties_read_cancelled_not_invited(client, auth, users):
    batch_id = make_two_party_batch(db.session, now=NOW, user_id=users["staff"].id)
    waiting = db.session.scalar(
        select(SigningRequest.id).where(SigningRequest.batch_id == batch_id, SigningRequest.status == "sent")
    )
    transition(db.session, waiting, frm="sent", to="cancelled", now=NOW)
    db.session.commit()
    auth.login()
    page = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    cell = page.split(f'id="pt-{waiting}"', 1)[1].split("</td>", 1)[0]
    assert "invited" not in cell and "waiting for their turn" not in cell and cell.count("<b>cancelled</b>") == 2


def test_the_request_panel_labels_each_address_offers_remind_and_cancel_and_follows_a_change(client, auth, users):
    from bulksign.batches import versions
    from tests.support.web import csrf_from

    batch_id = make_two_party_batch(db.session, now=NOW, user_id=users["staff"].id)
    request_id = db.session.scalar(
        select(SigningRequest.id).where(SigningRequest.batch_id == batch_id, SigningRequest.status == "sent")
    )
    auth.login()
    panel = client.get(f"/batches/{batch_id}/requests/{request_id}")
    html = panel.get_data(as_text=True)
    assert "Email address of the Recipient" in html and "Email address of the Employer" in html
    assert 'id="row-remind"' in html and 'id="row-cancel"' in html
    assert "request-changed from:body" in html
    before = versions.version_of(db.session, batch_id=batch_id)
    changed = client.post(
        f"/requests/{request_id}/email",
        data={"csrf_token": csrf_from(panel), "email": "new.person@example.org"},
        headers={"HX-Request": "true"},
    )
    assert changed.status_code == 200 and changed.headers["HX-Trigger"] == "request-changed"
    assert versions.version_of(db.session, batch_id=batch_id) == before + 1
    again = client.get(f"/batches/{batch_id}/requests/{request_id}", headers={"If-None-Match": panel.headers["ETag"]})
    assert again.status_code == 200 and 'value="new.person@example.org"' in again.get_data(as_text=True)
    reminded = client.post(
        f"/batches/{batch_id}/remind",
        data={"csrf_token": csrf_from(panel), "request_ids": str(request_id)},
        headers={"HX-Request": "true"},
    )
    assert reminded.status_code == 200 and "1 reminder queued." in reminded.get_data(as_text=True)


def test_the_csv_export_repeats_the_files_own_columns(client, auth, users):
    import csv
    import io

    from bulksign.batches.exports import CSV_COLUMNS
    from tests.signing.test_routing import CONTRACT, _batch

    html = CONTRACT.replace("</body>", "<p>{{ contract_number }} {{ position }} {{ status }}</p></body>")
    batch_id = _batch(
        users,
        html=html,
        file="email,name,contract_number,position,status\neva@example.com,Eva,C-17,=cmd|' /C calc'!A0,new\n",
    )
    auth.login()
    body = client.get(f"/batches/{batch_id}/export.csv").get_data(as_text=True).lstrip("\ufeff")
    (row,) = list(csv.DictReader(io.StringIO(body)))
    header = next(csv.reader(io.StringIO(body)))
    assert header[len(CSV_COLUMNS) : len(CSV_COLUMNS) + 3] == ["contract_number", "position", "file_status"]
    assert (row["contract_number"], row["file_status"], row["employer_email"]) == ("C-17", "new", "hr@acme.example")
    assert row["position"].startswith("'=")  # a formula is written as text

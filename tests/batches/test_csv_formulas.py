"""Every CSV we write opens as plain text in a spreadsheet of any locale: a formula hidden after a separator a
Russian, German or French spreadsheet splits on (``;``), a tab or a line break is not run. The recipients export,
the evidence package's manifest, the rows left out of a batch and an upload's error report, each through the real
view or job that writes it."""

from __future__ import annotations

import csv
import io
import re
import zipfile

from sqlalchemy import select, update

from bulksign.batches.evidence import build_evidence, start_evidence
from bulksign.batches.skipped_rows import keep_skipped_rows, skipped_rows_csv
from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.models import SigningRequest, User
from bulksign.recipients.validation import error_report_csv, validate_recipients
from bulksign.signing.parties import add_recipients
from tests.support.accounts import STAFF
from tests.support.batches import request_ids
from tests.support.clock import NOW
from tests.support.field_values import GIVEN, batch_with_fields, fill

#: What a signer or a recipients file may hold: harmless to an English spreadsheet, each a formula to another one.
HIDDEN = {
    "semicolon": "Bank;=cmd|' /C calc'!A0",
    "comma": 'Smith, =HYPERLINK("http://evil.example")',
    "tab": "Ann\t+1+cmd|' /C calc'!A0",
    "line": "Reason\n@SUM(1+1)*cmd|' /C calc'!A0",
    "spaced": "Dept;  -2+3+cmd|' /C calc'!A0",
}
FORMULA = ("=", "+", "-", "@")


def _formula_cells(text: str) -> list[str]:
    """The cells of ``text`` that a spreadsheet would run: read as CSV split on a comma, a semicolon or a tab (quotes
    read), and cut at every separator and line break ignoring quotes (the cruder importers), a cell's spaces and
    quotes around it dropped."""
    text = text.lstrip("\ufeff")
    cells = [c for d in ",;\t" for row in csv.reader(io.StringIO(text, newline=""), delimiter=d) for c in row]
    cells += re.split(r"[,;\t\r\n]", text)
    return [c for c in cells if c.strip(' "\u00a0').startswith(FORMULA)]


def _filled_batch(users) -> tuple[int, list[int]]:
    """A batch of two whose first request carries every hidden formula: in its name, its decline reason and a
    field's value."""
    batch_id = batch_with_fields(user=users["staff"], now=NOW)
    add_recipients(db.session, batch_id=batch_id, now=NOW)  # as batch creation gives every request its party
    ids = request_ids(batch_id)
    fill(ids[0], now=NOW, values={**GIVEN, "iban": HIDDEN["semicolon"]})
    db.session.execute(
        update(SigningRequest)
        .where(SigningRequest.id == ids[0])
        .values(name=HIDDEN["semicolon"] + HIDDEN["spaced"], decline_reason=HIDDEN["line"] + HIDDEN["tab"])
    )
    db.session.execute(update(SigningRequest).where(SigningRequest.id == ids[1]).values(name=HIDDEN["comma"]))
    db.session.commit()
    return batch_id, ids


def test_the_recipients_export_runs_no_formula_in_any_locales_spreadsheet(client, auth, users):
    batch_id, ids = _filled_batch(users)
    auth.login()
    text = client.get(f"/batches/{batch_id}/export.csv").get_data(as_text=True)
    assert _formula_cells(text) == []
    # What was given is all there, readable: an apostrophe before each formula's start, nothing else changed.
    rows = list(csv.DictReader(io.StringIO(text.lstrip("\ufeff"), newline="")))
    assert rows[0]["name"] == "Bank;'=cmd|' /C calc'!A0Dept;'  -2+3+cmd|' /C calc'!A0"
    assert rows[0]["field_iban"] == "Bank;'=cmd|' /C calc'!A0"
    assert rows[0]["decline_reason"] == "Reason\n'@SUM(1+1)*cmd|' /C calc'!A0Ann\t'+1+cmd|' /C calc'!A0"
    assert rows[1]["name"] == 'Smith,\' =HYPERLINK("http://evil.example")'


def test_the_evidence_manifest_runs_no_formula(app, users):
    batch_id, _ = _filled_batch(users)
    staff = db.session.scalar(select(User).where(User.email == STAFF[0]))
    started = start_evidence(db.session, batch_id=batch_id, user=staff, now=NOW)
    db.session.commit()
    storage = get_storage()
    assert build_evidence(db.session, export_id=started.export.id, storage=storage, now=lambda: NOW).status == "ready"
    export = db.session.get(type(started.export), started.export.id)
    manifest = zipfile.ZipFile(io.BytesIO(storage.get(export.storage_key))).read("manifest.csv").decode()
    assert "Bank;'=cmd" in manifest and _formula_cells(manifest) == []


def test_rows_left_out_and_an_uploads_error_report_run_no_formula(app, users):
    batch_id, _ = _filled_batch(users)
    rows = io.StringIO()
    csv.writer(rows).writerows([["email", "name", "note"], *(["not-an-address", v, v] for v in HIDDEN.values())])
    with app.test_request_context("/"):
        report = validate_recipients(
            rows.getvalue().encode(), filename="people.csv", variables=["name", "note"], max_errors=None
        )
        assert len(report.errors) == len(HIDDEN)
        keep_skipped_rows(db.session, batch_id=batch_id, errors=report.errors, kept_rows=set())
        db.session.commit()
        left_out = "".join(skipped_rows_csv(db.session, batch_id=batch_id))
        errors = error_report_csv(report)
    for text in (left_out, errors):
        assert "Bank;'=cmd" in text and _formula_cells(text) == [], text

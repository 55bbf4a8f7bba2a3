"""What signers filled in, as staff see it in a browser: the row's "Filled in" cell and the request's
panel, readable at 1366 and 360 px without sideways scrolling, axe clean, and the attachment a download; the
recipients table of a two-party batch with values and long addresses fits 1366 px, its request's panel open too."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from bulksign.core.extensions import db
from bulksign.recipients.parties import PartyPerson
from bulksign.signing.parties import add_parties
from tests.support.accounts import STAFF
from tests.support.batches import request_ids
from tests.support.clock import NOW
from tests.support.field_values import batch_with_fields, fill, scan_png
from tests.support.looks import log_in, look_at

pytestmark = pytest.mark.browser


def test_staff_read_the_values_on_the_row_and_in_the_panel_and_download_the_attachment(app, users, live_server, page):
    batch_id = batch_with_fields(user=users["staff"], now=NOW, recipients=3, language="ru")
    first = request_ids(batch_id)[0]
    scan = scan_png()
    fill(first, now=NOW, scan=scan, filename="passport-scan-of-a-rather-long-name-from-a-phone-camera.png")
    log_in(page, live_server, *STAFF)
    page.goto(f"{live_server}/batches/{batch_id}")
    cell = page.locator(f"#fv-{first}")
    # Staff read the values in their own page's language (English here), whatever the batch's.
    expect(cell).to_contain_text("Start date: January 31, 2027")
    expect(cell).to_contain_text("I have read the work rules: Ticked")
    assert look_at(page, live_server, "filled-values-row") == {1366: [], 360: []}

    page.set_viewport_size({"width": 1366, "height": 900})
    page.click(f"#r{first} a.open-timeline")
    panel = page.locator("#filled-in")
    expect(panel).to_contain_text("Hours a week")
    expect(panel).to_contain_text("1,234.5")
    assert look_at(page, live_server, "filled-values-panel") == {1366: [], 360: []}

    with page.expect_download() as started:
        panel.locator("a.attachment").click()
    download = started.value
    assert download.suggested_filename == "passport-scan-of-a-rather-long-name-from-a-phone-camera.png"
    assert Path(download.path()).read_bytes() == scan


#: The recipients table's own sideways scroll and the page's: (scrollWidth, clientWidth) each.
WIDTHS_OF_TABLE = """() => { const t = document.getElementById('table'), d = document.documentElement;
  return {table: [t.scrollWidth, t.clientWidth], page: [d.scrollWidth, d.clientWidth]}; }"""


def _fits(page) -> dict:
    widths = page.evaluate(WIDTHS_OF_TABLE)
    assert all(scroll <= client for scroll, client in widths.values()), widths
    return widths


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_recipients_table_fits_1366_px_with_parties_and_values_and_the_panel_open(
    app, users, live_server, page, language
):
    users["staff"].locale = language
    long_people = [
        (f"konstantin.konstantinopolsky.{i}@warehouse-subsidiary.example.com", f"Konstantin Konstantinopolsky {i}")
        for i in range(4)
    ]
    batch_id = batch_with_fields(user=users["staff"], now=NOW, recipients=long_people)
    ids = request_ids(batch_id)
    add_parties(
        db.session,
        batch_id=batch_id,
        request_ids=ids,
        per_row=[{}] * len(ids),
        fixed={"employer": PartyPerson("hr@example.com", "ACME HR")},
        steps={"recipient": 0, "employer": 1},
        now=NOW,
    )
    db.session.commit()
    fill(ids[0], now=NOW, scan=scan_png(), filename="passport-scan-of-a-rather-long-name-from-a-phone-camera.png")
    log_in(page, live_server, *STAFF)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server}/batches/{batch_id}")
    expect(page.locator(f"#fv-{ids[0]}")).to_contain_text("DE89370400440532013000")
    expect(page.locator("table.recipients td.parties").first).to_be_visible()
    _fits(page)
    # Every column, the values filled in last among them, is on the screen.
    last = page.locator(f"#r{ids[0]} td.filled").bounding_box()
    assert last and last["x"] + last["width"] <= 1366, last
    assert look_at(page, live_server, f"batch-table-fits-{language}") == {1366: [], 360: []}

    # With a request's panel beside the table, the table is narrower and still wraps instead of scrolling.
    page.set_viewport_size({"width": 1366, "height": 900})
    page.click(f"#r{ids[0]} a.open-timeline")
    expect(page.locator("#filled-in")).to_be_visible()
    _fits(page)
    assert look_at(page, live_server, f"batch-table-fits-panel-{language}") == {1366: [], 360: []}

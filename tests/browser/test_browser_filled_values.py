"""What signers filled in, as staff see it in a browser: the row's "Filled in" cell and the request's
panel, readable at 1366 and 360 px without sideways scrolling, axe clean, and the attachment a download."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

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

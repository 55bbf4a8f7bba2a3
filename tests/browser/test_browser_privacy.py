"""The admins' retention and erasure page in Chromium, at a desktop and a phone width: a team's periods saved, what
the next purge deletes, a legal hold placed, a person erased with what was kept and why."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bulksign.core.extensions import db
from bulksign.models import utcnow
from tests.support.accounts import ADMIN
from tests.support.batchdata import batch_in_states
from tests.support.looks import log_in, look_at
from tests.support.signing_requests import fresh

pytestmark = pytest.mark.browser


def test_retention_holds_and_an_erasure_on_the_admins_page(app, users, live_server, page):
    long_ago = utcnow() - timedelta(days=100)
    old = batch_in_states(db.session, statuses=["declined", "expired", "signed"], now=long_ago, name="Old contracts")
    disputed = batch_in_states(db.session, statuses=["declined", "signed"], now=long_ago, name="Disputed contracts")
    old_id, disputed_id = old.id, disputed.id
    log_in(page, live_server, *ADMIN)
    page.goto(f"{live_server}/admin/")
    page.click("text=Retention, legal holds and erasure")

    preview = page.locator("#purge-preview")
    assert "#1 Old contracts" in preview.inner_text() and "#2 Disputed contracts" in preview.inner_text()
    row = page.locator("#team-retention tr[data-team=Default]")
    assert row.locator("input[name=keep_signed_days]").get_attribute("placeholder") == "for ever"
    row.locator("input[name=keep_unsigned_days]").fill("30")
    row.locator("button").click()
    page.wait_for_selector("text=Retention of Default saved.")
    assert page.locator("#team-retention tr[data-team=Default] input[name=keep_unsigned_days]").input_value() == "30"

    hold = page.locator("#place-hold")
    hold.locator("input[name=batch_id]").fill(str(disputed_id))
    hold.locator("input[name=reason]").fill("Case 4711, labour court")
    hold.locator("button").click()
    page.wait_for_selector("text=Disputed contracts is on legal hold")
    assert "Case 4711, labour court" in page.locator("#legal-holds").inner_text()
    assert "Disputed contracts" not in page.locator("#purge-preview").inner_text()

    erase = page.locator("#erase-person")
    erase.locator("input[name=email]").fill("Person000001@example.org")
    erase.locator("input[name=confirm]").check()
    erase.locator("button").click()
    result = page.locator("#erasure-result")
    result.wait_for()
    said = result.inner_text()
    assert "Erased: 1, kept: 1" in said
    assert "#1 Old contracts" in said and "its batch is on legal hold (Case 4711, labour court)" in said
    request_of_old = 1  # make_batch numbers the rows in order: the old batch's first
    assert fresh(request_of_old).purged_at is not None and fresh(request_of_old).email == ""

    violations = look_at(page, live_server, "admin-privacy")
    assert violations == {1366: [], 360: []}, violations
    assert old_id == 1

    lift = page.locator("#legal-holds form")
    lift.locator("input[name=reason]").fill("Settled")
    lift.locator("button").click()
    page.wait_for_selector("text=The legal hold of Disputed contracts is lifted.")
    assert "No batch is on legal hold." in page.inner_text("body")
    assert "#2 Disputed contracts" in page.locator("#purge-preview").inner_text()

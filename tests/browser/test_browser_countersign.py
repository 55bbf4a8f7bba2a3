"""The countersigner's page in a real Chromium: the documents ready, one read as page images, a
selection signed with one drawn signature and its progress live until done, the drawing offered again on the
document left; in a batch that asks for a one-time code, the code step first; 1366 and 360 px, axe-checked."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from sqlalchemy import update

from bulksign.core.extensions import db
from bulksign.models import Batch
from bulksign.work.pipeline import enqueue_renders
from tests.browser.test_browser_signing import INKED, draw
from tests.signing.test_countersign import _digest_token, _digests
from tests.signing.test_routing import _batch
from tests.support.batches import request_ids
from tests.support.looks import look_at
from tests.support.partydata import recipients_sign

pytestmark = pytest.mark.browser

ROWS = "email,name\n" + "".join(f"e{i}@example.com,Employee {i} Longname-Doublebarrelled\n" for i in range(1, 5))


def test_the_countersigner_reads_ticks_signs_and_watches_the_progress(app, users, live_server, page, smtp, run_jobs):
    ids = request_ids(_batch(users, file=ROWS))
    enqueue_renders(ids)
    run_jobs("pdf", "mail")
    recipients_sign(db.session, ids[:3])  # the fourth employee has not: not ready for the employer
    run_jobs("pdf", "mail")
    token = _digest_token(_digests(smtp)[0])

    page.goto(f"{live_server}/countersign/{token}")
    expect(page.locator(".cs-item")).to_have_count(3)
    expect(page.locator("h1")).to_contain_text("3 documents of “Employment contract” wait for your signature")
    # Before the button: how many "All" signs, and that a document arriving later is not among them.
    expect(page.locator(".cs-count")).to_contain_text("“All” signs exactly 3 documents: those listed now.")
    found = look_at(page, live_server, "countersign-list")
    assert found == {1366: [], 360: []}, found

    page.set_viewport_size({"width": 1366, "height": 900})
    page.locator(".cs-item a", has_text="Read").first.click()
    expect(page.locator(".doc-head")).to_contain_text("Employee 1 Longname-Doublebarrelled <e1@example.com>")
    expect(page.locator(".doc-page img").first).to_be_visible()
    page.wait_for_function("() => document.querySelector('.doc-page img').naturalWidth > 0")
    found = look_at(page, live_server, "countersign-document")
    assert found == {1366: [], 360: []}, found

    page.go_back()
    page.set_viewport_size({"width": 360, "height": 800})
    page.locator(".cs-item input[type=checkbox]").nth(0).check()
    page.locator(".cs-item input[type=checkbox]").nth(1).check()
    page.check("input[name=all][value='0']")
    page.fill("input[name=name]", "Anna Boss")
    draw(page)
    page.check("input[name=consent]")
    page.click("#sign-button")
    page.wait_for_url("**/runs/*")
    expect(page.locator("#cs-progress")).to_contain_text("0 of 2 done")
    found = look_at(page, live_server, "countersign-progress")
    assert found == {1366: [], 360: []}, found

    run_jobs("default")
    expect(page.locator("#cs-progress h2")).to_have_text("2 documents signed", timeout=15_000)
    found = look_at(page, live_server, "countersign-done")
    assert found == {1366: [], 360: []}, found
    page.click("text=Back to the documents")
    expect(page.locator(".cs-item:not(#finished *)")).to_have_count(1)
    # The drawing is adopted for the session: the document left is offered it on the pad, with the name typed.
    page.wait_for_function(INKED, arg="#signature-pad")  # the kept drawing is an image: drawn once it loaded
    expect(page.locator("#pad-kept")).to_contain_text("the signature you drew before is filled in")
    expect(page.locator("input[name=name]")).to_have_value("Anna Boss")
    found = look_at(page, live_server, "countersign-adopted")
    assert found == {1366: [], 360: []}, found
    # The two signed ones are below, each sealed copy to download (no mail brings them one by one).
    run_jobs("pdf")
    page.reload()
    expect(page.locator("#finished .cs-item a", has_text="Download the signed PDF")).to_have_count(2)
    found = look_at(page, live_server, "countersign-finished")
    assert found == {1366: [], 360: []}, found
    with page.expect_download() as download:
        page.locator("#finished .cs-item a").first.click()
    assert download.value.suggested_filename.endswith(".pdf")


def test_in_a_batch_that_asks_for_a_code_one_code_unlocks_the_countersigners_page(
    app, users, live_server, page, smtp, run_jobs
):
    ids = request_ids(_batch(users, file=ROWS))
    enqueue_renders(ids)
    run_jobs("pdf", "mail")
    recipients_sign(db.session, ids)
    run_jobs("pdf", "mail")
    db.session.execute(update(Batch).values(one_time_code=True))
    db.session.commit()
    token = _digest_token(_digests(smtp)[0])

    page.goto(f"{live_server}/countersign/{token}")
    expect(page.locator("#send-code-form")).to_be_visible()
    assert page.locator(".cs-item").count() == 0 and "Employee" not in page.inner_text("main")
    found = look_at(page, live_server, "countersign-code-ask")
    assert found == {1366: [], 360: []}, found

    page.click("text=Send me a code")
    expect(page.locator("#code-sent")).to_contain_text("h•••@acme.example")
    found = look_at(page, live_server, "countersign-code-sent")
    assert found == {1366: [], 360: []}, found
    run_jobs("mail")
    code = re.search(r"\b(\d{6})\b", smtp.of_kind("code")[-1].text()).group(1)
    page.fill("input[name=code]", code)
    page.click("#code-form button[type=submit]")
    expect(page.locator(".cs-item:not(#finished *)")).to_have_count(4)
    expect(page.locator("#sign-button")).to_be_visible()

"""Live pages in a real Chromium: a signature given in another browser shows on the open batch page and on the
home page without a reload, after sending ended."""

from __future__ import annotations

import io
import re

import pytest
from pypdf import PdfReader

from bulksign.core.extensions import db
from bulksign.models import utcnow
from bulksign.work.pipeline import enqueue_renders
from tests.browser.test_browser_signing import draw
from tests.support.accounts import STAFF
from tests.support.batches import make_batch, request_ids
from tests.support.looks import log_in, shoot
from tests.support.signing_page import agree

pytestmark = pytest.mark.browser


@pytest.mark.slow(seconds=20)
def test_a_signature_in_another_browser_shows_on_the_open_batch_page_and_home_page(
    app, users, live_server, page, browser, smtp, run_jobs
):
    batch_id = make_batch(
        user=users["staff"],
        now=utcnow(),
        recipients=[("olga@example.com", "Ольга Смирнова"), ("ivan@example.com", "Иван Петров")],
        name="Live contracts",
    )
    enqueue_renders(request_ids(batch_id))
    run_jobs("pdf", "mail")
    db.session.remove()
    (invitation,) = smtp.to("olga@example.com")
    link = re.search(r"http://127\.0\.0\.1:\d+/sign/[A-Za-z0-9_-]+", invitation.text()).group(0)

    log_in(page, live_server, *STAFF)
    home = page.context.new_page()
    home.goto(live_server + "/")
    assert "0 of 2 signed" in home.locator("#home-live .in-flight").inner_text()
    page.goto(f"{live_server}/batches/{batch_id}")
    # Sending ended: the bar still asks, now and then, and is answered 304 while nothing changes.
    assert page.locator("#progress").get_attribute("data-active") == "no"
    assert page.locator("#progress").get_attribute("hx-trigger") == "every 3s"
    with page.expect_response(lambda r: "/progress" in r.url and r.status == 304):
        pass

    signer = browser.new_context().new_page()
    signer.goto(link)
    draw(signer)
    agree(signer)
    signer.click("#sign-button")
    signer.wait_for_selector("text=You signed this document")

    page.wait_for_function(
        "() => document.querySelector('#progress li[data-status=signed] .count').textContent.trim() === '1'",
        timeout=15_000,
    )
    assert page.locator("#table .badge-signed").count() == 1
    home.wait_for_function(
        "() => document.querySelector('#home-live .in-flight').textContent.includes('1 of 2 signed')",
        timeout=15_000,
    )
    shoot(page, "live-batch-after-signature")
    shoot(home, "live-home-after-signature")
    signer.context.close()


def test_the_employee_downloads_their_copy_before_the_employer_signs(app, users, live_server, page, smtp, run_jobs):
    from tests.signing.test_routing import _sent, _token

    _sent(users, run_jobs)
    link = f"{live_server}/sign/{_token(smtp.received[0])}"
    page.goto(link)
    draw(page)
    agree(page)
    page.click("#sign-button")
    page.wait_for_selector("#party-copy")
    shoot(page, "party-copy-offered")
    with page.expect_download() as download:
        page.click("#party-copy")
    assert download.value.suggested_filename == "Employment contract – waiting for Employer.pdf"
    data = open(download.value.path(), "rb").read()
    text = " ".join(" ".join(p.extract_text() for p in PdfReader(io.BytesIO(data)).pages).split())
    assert "Not complete: waiting for Employer." in text and "Eva Employee" in text

"""Batches that text, in Chromium: the channel chosen with the file, the texts the batch may send, and each row's
text state on the batch page; in English and Russian, at 1366 and 360 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from tests.support.accounts import STAFF
from tests.support.clock import NOW
from tests.support.looks import BATCH_PAGE, log_in, shoot
from tests.support.sms_gateway import SmsGateway

pytestmark = pytest.mark.browser

CSV = "email,name,phone\n,Иван Петров,+7 (999) 123-45-67\n,Пётр,+7 999 765 43 21\nanna@example.com,Анна,\n".encode()
WORDS = {
    "en": ("This batch may send up to 6 text messages", "By text · sent"),
    "ru": ("Этот пакет может отправить до 6 SMS", "По SMS · отправлено"),
}


@pytest.mark.parametrize("language", ["en", "ru"])
def test_a_batch_that_texts_from_the_form_to_the_rows(app, users, live_server, page, run_jobs, language):
    gateway = SmsGateway()
    app.config["SMS_HTTP_URL"] = gateway.url
    try:
        users["staff"].locale = language
        create_template(db.session, name="Договор", html="<p>{{ name }}</p>", user=users["staff"], now=NOW)
        db.session.commit()
        log_in(page, live_server, *STAFF)
        page.goto(f"{live_server}/batches/new")
        page.select_option("select#channel", "text_without_address")
        page.set_input_files("input[name=file]", files=[{"name": "p.csv", "mimeType": "text/csv", "buffer": CSV}])
        page.click("#upload-form button[type=submit]")
        page.locator("#texts-allowed").wait_for()
        allowed, state = WORDS[language]
        assert allowed in page.inner_text("#texts-allowed")
        assert page.locator("#valid-rows").inner_text() == "3"
        page.locator("#texts-allowed").scroll_into_view_if_needed()
        shoot(page, f"new-batch-texts-{language}")
        page.set_viewport_size({"width": 1366, "height": 900})
        page.select_option("#create-form select[name=language]", "ru")
        page.click("#create-batch")
        page.wait_for_url(BATCH_PAGE)
        run_jobs("pdf", "mail")
        page.reload()
        assert len(gateway.received) == 2
        assert page.locator(".text-state").all_inner_texts() == [state, state]
        assert page.locator("#channel").count() == 1
        shoot(page, f"batch-texts-{language}")
        page.set_viewport_size({"width": 360, "height": 740})
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    finally:
        gateway.close()


def test_choosing_the_recipients_language_reads_national_numbers_in_its_region(app, users, live_server, page):
    users["staff"].locale = "en"
    create_template(db.session, name="Contract", html="<p>{{ name }}</p>", user=users["staff"], now=NOW)
    db.session.commit()
    log_in(page, live_server, *STAFF)
    page.goto(f"{live_server}/batches/new")
    page.select_option("select#channel", "text_without_address")
    national = b"email,name,phone\n,Ivan,8 999 123 45 67\nanna@example.com,Anna,\n"
    page.set_input_files("input[name=file]", files=[{"name": "p.csv", "mimeType": "text/csv", "buffer": national}])
    page.click("#upload-form button[type=submit]")
    page.locator("#invalid-rows").wait_for()
    # Read in the staff member's region until the recipients' language is chosen: not a British number.
    assert page.inner_text("#invalid-rows") == "1"
    page.select_option("#create-form select[name=language]", "ru")
    expect(page.locator("#invalid-rows")).to_have_text("0")
    assert page.inner_text("#valid-rows") == "2"
    page.click("#create-batch")
    page.wait_for_url(BATCH_PAGE)
    from bulksign.models import SigningRequest

    phones = db.session.scalars(db.select(SigningRequest.phone).order_by(SigningRequest.id)).all()
    assert phones == ["+79991234567", None]

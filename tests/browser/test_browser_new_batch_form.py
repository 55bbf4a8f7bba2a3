"""The new-batch form in Chromium: the file's hint follows the chosen template, the zones come in
regions with the organisation's zone chosen, the language is the staff member's, and "another address" appears only
once chosen; in English and Russian, at 1366 and 360 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from tests.support.accounts import STAFF
from tests.support.clock import NOW
from tests.support.looks import log_in, shoot

pytestmark = pytest.mark.browser


@pytest.mark.parametrize(("language", "region"), [("en", "Europe"), ("ru", "Европа")])
def test_the_new_batch_form_follows_the_template_and_the_staff_member(app, users, live_server, page, language, region):
    app.config["ORG_TIMEZONE"] = "Europe/Berlin"
    users["staff"].locale = language
    for name, html in (("A contract", "<p>{{ name }}, {{ position }}</p>"), ("B notice", "<p>{{ city }}</p>")):
        create_template(db.session, name=name, html=html, user=users["staff"], now=NOW)
    db.session.commit()
    log_in(page, live_server, *STAFF)
    page.goto(f"{live_server}/batches/new")
    assert page.inner_text("#required-columns") == "email, name, position"
    page.select_option("select[name=template_id]", label="B notice (v1)")
    expect(page.locator("#required-columns")).to_have_text("email, city")
    assert page.locator("select#timezone").input_value() == "Europe/Berlin"
    assert page.locator(f"select#timezone optgroup[label='{region}'] option[value='Europe/Berlin']").count() == 1
    assert page.locator("#create-form select[name=language]").input_value() == language
    other = page.locator("#create-form input[name=notify_email]")
    assert other.is_hidden()
    page.select_option("#notify-to", "other")
    assert other.is_visible()
    page.locator("#create-form fieldset.notice-choice").scroll_into_view_if_needed()
    shoot(page, f"new-batch-form-{language}")
    page.set_viewport_size({"width": 360, "height": 740})
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")

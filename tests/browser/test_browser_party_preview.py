"""A clerk fills the template's sample row on its page and previews the contract as each party: the employee sees
their own fields and where they sign, the employer theirs; the sample's values, hostile ones too, show as typed.
Screenshots and axe at 1366 and 360 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from bulksign.core.extensions import db
from bulksign.models import DocumentTemplate
from tests.support.accounts import STAFF
from tests.support.looks import log_in, look_at
from tests.views.test_party_preview_pages import _contract

pytestmark = pytest.mark.browser


def test_a_clerk_edits_the_sample_and_previews_the_contract_as_each_party(users, live_server, page):
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    template = _contract(users)
    log_in(page, live_server, *STAFF)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server}/templates/{template.id}")
    page.fill("[name=sample-name]", "Olga <script>Petrova</script>")
    page.fill("[name=sample-salary]", "{{ 7*7 }}")
    page.fill("[name=sample-city]", "Riga")
    page.click("#sample-save")
    expect(page.locator("#sample-saved")).to_be_visible()
    db.session.expire_all()
    assert db.session.get(DocumentTemplate, template.id).sample["name"] == "Olga <script>Petrova</script>"
    found = look_at(page, live_server, "party-preview-sample")
    assert found == {1366: [], 360: []}, found

    page.set_viewport_size({"width": 1366, "height": 900})
    page.click("text=Preview as Employee")
    expect(page.locator("h1")).to_have_text("Preview as Employee")
    expect(page.locator("#sign-here")).to_have_text("Employee signs here")
    expect(page.locator(".field-entry")).to_have_count(2)
    expect(page.locator("#field-stamp")).to_have_count(0)
    expect(page.locator("#other-fields")).to_contain_text("Company stamp number — Employer")
    page.click(".doc-text summary")
    expect(page.locator(".doc-text")).to_contain_text("Olga <script>Petrova</script>")
    expect(page.locator(".doc-text")).to_contain_text("{{ 7*7 }}")
    # The employee's field shown only once the IBAN is filled follows as they type, as on the signing page.
    expect(page.locator("#field-children")).to_be_hidden()
    page.fill("#field-iban", "DE89 3704")
    expect(page.locator("#field-children")).to_be_visible()
    found = look_at(page, live_server, "party-preview-employee")
    assert found == {1366: [], 360: []}, found

    # Another party, and the sample changed from the preview itself.
    page.set_viewport_size({"width": 1366, "height": 900})
    page.click("text=Preview as Employer")
    expect(page.locator("#sign-here")).to_have_text("Employer signs here")
    expect(page.locator(".field-entry")).to_have_count(1)
    expect(page.locator("#field-stamp")).to_be_visible()
    page.fill("[name=sample-city]", "Tallinn")
    page.click("#sample-save")
    expect(page.locator("h1")).to_have_text("Preview as Employer")
    page.click(".doc-text summary")
    expect(page.locator(".doc-text")).to_contain_text("Tallinn")
    found = look_at(page, live_server, "party-preview-employer")
    assert found == {1366: [], 360: []}, found
    assert problems == []

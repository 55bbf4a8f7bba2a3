"""A clerk inserts each party's "date signed" and "signer's name" from the palette at the cursor, with clicks only;
saved, they are fields of those types, filled in for that party when they sign. Screenshots and axe at 1366 and
360 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from bulksign.core.extensions import db
from bulksign.doc_templates.fields import template_fields
from bulksign.doc_templates.versions import get_version
from bulksign.models import DocumentTemplate
from tests.browser.test_browser_template_palette import _type
from tests.support.accounts import STAFF
from tests.support.looks import log_in, look_at

pytestmark = pytest.mark.browser


def test_a_clerk_inserts_the_date_signed_and_the_signers_name_of_a_party(users, live_server, page):
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    log_in(page, live_server, *STAFF)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server}/templates/new")
    page.fill("input[name=name]", "Receipt")
    page.click("#tab-rich")
    _type(page, "Received by ")
    page.click("#palette button[data-named=signer_name]")
    _type(page, " on ")
    page.click("#palette button[data-named=signed_date]")
    _type(page, ". ")
    page.click("#palette button[data-token='{{ signature }}']")
    expect(page.locator("#rich-editor span.ph")).to_have_text(
        ["{{ field_signer_name_recipient }}", "{{ field_signed_date_recipient }}", "{{ signature }}"]
    )
    # Coloured as the party's other chips.
    colours = page.locator("#rich-editor span.ph").evaluate_all("cs => cs.map(c => getComputedStyle(c).borderTopColor)")
    assert colours[0] == colours[1] == colours[2], colours
    found = look_at(page, live_server, "palette-signed-chips")
    assert found == {1366: [], 360: []}, found
    page.set_viewport_size({"width": 1366, "height": 900})
    page.click("main button[type=submit]")
    page.wait_for_selector("text=Saved as version 1")
    db.session.expire_all()
    template = db.session.query(DocumentTemplate).one()
    fields = template_fields(get_version(db.session, template_id=template.id))
    assert [(f.name, f.type, f.role) for f in fields] == [
        ("signer_name_recipient", "signer_name", "recipient"),
        ("signed_date_recipient", "signed_date", "recipient"),
    ]
    assert problems == []

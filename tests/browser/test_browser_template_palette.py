"""A clerk builds a two-party contract in the rich-text editor with clicks only: the palette inserts the row's
values, a field for a party and each party's signature at the cursor as chips coloured by party, and the source tab
shows what they became; the template page then has both parties and their fields. Screenshots and axe at 1366 and
360 px."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from bulksign.core.extensions import db
from bulksign.doc_templates.fields import template_fields
from bulksign.doc_templates.template_check import check_template
from bulksign.doc_templates.versions import get_version
from bulksign.models import DocumentTemplate
from tests.support.accounts import STAFF
from tests.support.looks import log_in, look_at

pytestmark = pytest.mark.browser


def _type(page, text: str) -> None:
    page.locator("#rich-editor .pell-content").click()
    page.keyboard.press("End")
    page.keyboard.type(text)


def _field(page, party: str, kind: str, name: str) -> None:
    page.select_option("#palette-party", label=party)
    page.once("dialog", lambda dialog: dialog.accept(name))
    page.click(f"#palette button[data-field-type={kind}]")


def test_a_clerk_builds_a_two_party_contract_with_the_palette(users, live_server, page):
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    log_in(page, live_server, *STAFF)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server}/templates/new")
    page.fill("input[name=name]", "Employment contract")
    page.click("#tab-rich")
    _type(page, "Employee: ")
    page.click("#palette button[data-token='{{ name }}']")
    _type(page, ". IBAN: ")
    _field(page, "Recipient", "text", "iban")
    _type(page, ". Signed: ")
    page.click("#palette button[data-token='{{ signature }}']")
    expect(page.locator("#rich-editor span.ph")).to_have_text(["{{ name }}", "{{ field_iban }}", "{{ signature }}"])
    page.click("#tab-source")
    source = re.sub(r"<[^>]+>", "", page.input_value("#html-source")).replace("&nbsp;", " ")
    assert " ".join(source.split()) == "Employee: {{ name }} . IBAN: {{ field_iban }} . Signed: {{ signature }}"
    page.click("main button[type=submit]")
    page.wait_for_selector("text=Saved as version 1")

    # The employer, named on the template page, then given a field and a signature place in the editor.
    page.click("#add-party")
    fresh = page.locator(".party-def").last
    fresh.locator("[name=party-key]").fill("employer")
    fresh.locator("[name=party-label-en]").fill("Employer")
    fresh.locator("[name=party-label-ru]").fill("Работодатель")
    page.click("#save-parties")
    page.wait_for_selector("text=Saved as version 2")
    expect(page.locator("#check-warnings")).to_contain_text("Employer has no signature place in the document")
    page.click("text=Edit")
    page.click("#tab-rich")
    _type(page, " Starts on: ")
    _field(page, "Employer", "date", "start")
    _type(page, ". For the employer: ")
    page.click("#palette button[data-token='{{ signature_employer }}']")
    chips = page.locator("#rich-editor span.ph")
    expect(chips).to_have_count(5)
    # Chips are coloured by party: the employer's field and signature in the employer's colour.
    colours = chips.evaluate_all("cs => cs.map(c => getComputedStyle(c).borderTopColor)")
    assert colours[3] == colours[4] != colours[2], colours
    found = look_at(page, live_server, "template-palette")
    assert found == {1366: [], 360: []}, found
    page.set_viewport_size({"width": 1366, "height": 900})
    page.click("main button[type=submit]")
    page.wait_for_selector("text=Saved as version 3")
    expect(page.locator("#roles")).to_have_text("Recipient, Employer")
    expect(page.locator("#template-check")).to_have_count(0)

    db.session.expire_all()
    template = db.session.query(DocumentTemplate).one()
    version = get_version(db.session, template_id=template.id)
    assert [(f.name, f.type, f.role) for f in template_fields(version)] == [
        ("iban", "text", "recipient"),
        ("start", "date", "employer"),
    ]
    assert not check_template(version, language="en")
    assert problems == []

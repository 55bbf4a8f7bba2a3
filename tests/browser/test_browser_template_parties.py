"""A clerk names a two-party contract's parties and puts them in order with clicks and the keyboard alone, on the
template page; the new-batch page starts from that order. Screenshots and axe at 1366 and 360 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from bulksign.core.extensions import db
from bulksign.doc_templates.template_parties import party_labels, template_parties, template_routing
from bulksign.doc_templates.versions import get_version
from bulksign.models import DocumentTemplate
from tests.support.accounts import STAFF
from tests.support.looks import log_in, look_at, save_html_template
from tests.support.party_editor import name_party

pytestmark = pytest.mark.browser

CONTRACT = (
    "<h1>Employment contract</h1><p>Employee: {{ name }}.</p>"
    "<p>The employee: {{ signature }}</p><p>For the employer: {{ signature_employer }}</p>"
)


def _chip(page, key: str):
    return page.locator(f"#steps .party-chip[data-key={key}]")


def test_a_clerk_names_the_parties_and_orders_them_by_keyboard(users, live_server, page):
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    log_in(page, live_server, *STAFF)
    page.set_viewport_size({"width": 1366, "height": 900})
    save_html_template(page, live_server, name="Employment contract", html=CONTRACT)
    employee, employer = page.locator(".party-def[data-key=recipient]"), page.locator(".party-def[data-key=employer]")
    name_party(employee, labels=("Employee", "Работник"))
    name_party(employer, labels=("Employer", "Работодатель"), person=("Anna Boss", "hr@acme.example"))
    employer.locator("[name=party-email]").press("Tab")
    expect(_chip(page, "employer").locator(".chip-label")).to_have_text("Employer")

    # A party added and taken away again leaves the order as it was.
    page.click("#add-party")
    fresh = page.locator(".party-def").last
    fresh.locator("[name=party-key]").fill("witness")
    fresh.locator("[name=party-key]").press("Tab")
    expect(page.locator("#steps .step:not(.step-new)")).to_have_count(3)
    fresh.locator("[data-remove-party]").click()
    expect(page.locator("#steps .step:not(.step-new)")).to_have_count(2)

    # The keyboard alone: the employer signs first, then both at once, then the employee after.
    _chip(page, "employer").locator("[data-move=earlier]").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#steps .step").first.locator(".chip-label")).to_have_text(["Employer"])
    expect(page.locator("#order-status")).to_have_text("Employer now signs in step 1.")
    _chip(page, "recipient").locator("[data-move=join]").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#steps .step").first.locator(".chip-label")).to_have_text(["Employer", "Employee"])
    assert page.input_value("#routing") == '[["employer","recipient"]]'
    _chip(page, "recipient").locator("[data-move=later]").focus()
    page.keyboard.press("Enter")
    assert page.input_value("#routing") == '[["employer"],["recipient"]]'
    found = look_at(page, live_server, "template-parties-editing")
    assert found == {1366: [], 360: []}, found
    page.set_viewport_size({"width": 1366, "height": 900})
    page.click("#save-parties")
    page.wait_for_selector("text=Saved as version 2")

    template = db.session.query(DocumentTemplate).one()
    db.session.expire_all()
    version = get_version(db.session, template_id=template.id)
    assert party_labels(version, language="ru") == {"recipient": "Работник", "employer": "Работодатель"}
    assert template_routing(version) == [["employer"], ["recipient"]]
    assert [(p.key, p.source, p.email) for p in template_parties(version)][1] == (
        "employer",
        "fixed",
        "hr@acme.example",
    )
    expect(page.locator("#roles")).to_have_text("Employee, Employer")
    found = look_at(page, live_server, "template-parties-saved")
    assert found == {1366: [], 360: []}, found

    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server}/batches/new?template_id={template.id}")
    expect(page.locator("#steps .step:not(.step-new) .chip-label")).to_have_text(["Employer", "Employee"])
    expect(page.locator("#parties legend")).to_have_text(["Who signs as Employer"])
    found = look_at(page, live_server, "new-batch-order")
    assert found == {1366: [], 360: []}, found

    # In Russian, the staff member reads the Russian labels.
    users["staff"].locale = "ru"
    db.session.commit()
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server}/templates/{template.id}")
    expect(page.locator("#roles")).to_have_text("Работник, Работодатель")
    expect(page.locator("#steps .step:not(.step-new) .chip-label")).to_have_text(["Работодатель", "Работник"])
    expect(page.locator("#parties h2")).to_have_text("Стороны и порядок подписания")
    found = look_at(page, live_server, "template-parties-ru")
    assert found == {1366: [], 360: []}, found
    assert problems == []

"""The keyboard alone builds a two-party contract: the rich-text editor's palette, the parties and their order, a
field's condition (Tab, Enter, arrow keys, no mouse), and places, moves and resizes a box on a PDF's page where a
mouse would drag it. Screenshots and axe at 1366 and 360 px."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.browser.test_browser_build_contract import _desktop, _looks_right, _saved
from tests.support.accounts import STAFF
from tests.support.looks import log_in
from tests.support.pdf_files import plain_pdf

pytestmark = pytest.mark.browser


def _tab_to(page, selector: str, *, back: bool = False, limit: int = 120) -> None:
    """Press Tab (or Shift+Tab) until the focus is on ``selector``: reachable by the keyboard, in a sensible order."""
    for _ in range(limit):
        if page.evaluate("s => !!document.activeElement && document.activeElement.matches(s)", selector):
            return
        page.keyboard.press("Shift+Tab" if back else "Tab")
    raise AssertionError(f"{selector} is not reached with {'Shift+Tab' if back else 'Tab'}")


def _press(page, selector: str, *, back: bool = False, answer: str | None = None) -> None:
    """Reach a button with the keyboard and press Enter on it (``answer``: what is typed in the prompt it opens)."""
    _tab_to(page, selector, back=back)
    if answer is not None:
        page.once("dialog", lambda dialog: dialog.accept(answer))
    page.keyboard.press("Enter")


def _choose(page, selector: str, value: str) -> None:
    """Reach a list with the keyboard and step through it with the arrow keys to ``value``."""
    _tab_to(page, selector)
    page.keyboard.press("Home")
    for _ in range(20):
        if page.input_value(selector) == value:
            return
        page.keyboard.press("ArrowDown")
    raise AssertionError(f"{value} is not among {selector}'s options")


def _write(page, text: str) -> None:
    """Type at the end of the rich-text editor's text, coming back to it with Tab."""
    _tab_to(page, "#rich-editor .pell-content")
    page.keyboard.press("Control+End")
    page.keyboard.type(text)


@pytest.mark.slow(seconds=40)
def test_the_keyboard_alone_builds_the_contract(users, live_server, page):
    from bulksign.core.extensions import db
    from bulksign.doc_templates.fields import template_fields
    from bulksign.doc_templates.template_check import check_template
    from bulksign.doc_templates.template_parties import party_labels, template_routing
    from bulksign.doc_templates.versions import get_version
    from bulksign.models import DocumentTemplate

    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    log_in(page, live_server, *STAFF)
    _desktop(page)
    page.goto(f"{live_server}/templates/new")
    _tab_to(page, "input[name=name]")
    page.keyboard.type("Employment contract")
    _press(page, "#tab-rich")
    _write(page, "Between ACME Ltd and ")
    # The palette is just before the editor: Shift+Tab reaches it, Enter inserts where the cursor was, and the
    # cursor comes back to the text after the chip.
    _press(page, "#palette button[data-token='{{ name }}']", back=True)
    page.keyboard.type(", who has children: ")
    _press(page, "#rich-editor button[title='Insert a placeholder']", back=True, answer="children")
    page.keyboard.type(". Last payslip: ")
    _press(page, "#palette button[data-field-type=attachment]", back=True, answer="payslip")
    page.keyboard.type(". Allowance paid to: ")
    _press(page, "#palette button[data-field-type=text]", back=True, answer="allowance")
    page.keyboard.type(". The employee: ")
    _press(page, "#palette button[data-token='{{ signature }}']", back=True)
    expect(page.locator("#rich-editor span.ph")).to_have_text(
        ["{{ name }}", "{{ children }}", "{{ field_payslip }}", "{{ field_allowance }}", "{{ signature }}"]
    )
    # One paragraph, the chips inside it where the cursor was.
    assert page.locator("#rich-editor .pell-content > p").count() == 1
    _looks_right(page, live_server, "keyboard-editor")
    _press(page, "main button[type=submit]")
    _saved(page, 1)

    # The parties, named, a second one added, and the order changed and changed back, with Tab and Enter.
    _tab_to(page, ".party-def[data-key=recipient] [name=party-label-en]")
    page.keyboard.type("Employee")
    page.keyboard.press("Tab")
    page.keyboard.type("Работник")
    _press(page, "#add-party")
    page.keyboard.type("employer")  # the new party's key has the focus
    page.keyboard.press("Tab")
    page.keyboard.type("Employer")
    page.keyboard.press("Tab")
    page.keyboard.type("Работодатель")
    _press(page, ".party-chip[data-key=employer] [data-move=earlier]")
    expect(page.locator("#order-status")).to_have_text("Employer now signs in step 1.")
    assert page.input_value("#routing") == '[["employer"],["recipient"]]'
    _press(page, ".party-chip[data-key=employer] [data-move=later]")
    expect(page.locator("#order-status")).to_have_text("Employer now signs in step 2.")
    _looks_right(page, live_server, "keyboard-parties")
    _press(page, "#save-parties")
    _saved(page, 2)

    # The employer's field and signature, chosen for the employer with the arrow keys.
    _press(page, ".page-head a[href$='/edit']")
    page.wait_for_url("**/edit")
    _press(page, "#tab-rich")
    _write(page, " Position: ")
    _tab_to(page, "#palette-party", back=True)
    page.keyboard.press("ArrowDown")
    assert page.input_value("#palette-party") == "employer"
    _press(page, "#palette button[data-field-type=text]", answer="position")
    page.keyboard.type(". For the employer: ")
    _press(page, "#palette button[data-token='{{ signature_employer }}']", back=True)
    _press(page, "main button[type=submit]")
    _saved(page, 3)

    # The allowance account only when the row's children is above 0.
    _choose(page, "select[name=allowance-when-source]", "column:children")
    _choose(page, "select[name=allowance-when-operator]", "greater_than")
    page.keyboard.press("Tab")
    page.keyboard.type("0")
    _looks_right(page, live_server, "keyboard-fields")
    _press(page, "#fields-form button[type=submit]")
    _saved(page, 4)

    db.session.expire_all()
    version = get_version(db.session, template_id=db.session.scalar(db.select(DocumentTemplate.id)))
    assert [(f.name, f.type, f.role, f.condition and f.condition.to_json()) for f in template_fields(version)] == [
        ("payslip", "attachment", "recipient", None),
        (
            "allowance",
            "text",
            "recipient",
            {"kind": "column", "source": "children", "operator": "greater_than", "value": "0"},
        ),
        ("position", "text", "employer", None),
    ]
    assert party_labels(version, language="ru") == {"recipient": "Работник", "employer": "Работодатель"}
    assert template_routing(version) == [["recipient"], ["employer"]]
    assert not check_template(version, language="en")
    assert problems == []


@pytest.mark.slow(seconds=20)
def test_the_keyboard_alone_places_and_moves_a_box_on_a_pdf(users, live_server, page):
    from bulksign.core.extensions import db
    from bulksign.doc_templates.versions import get_version
    from bulksign.models import DocumentTemplate

    log_in(page, live_server, *STAFF)
    _desktop(page)
    page.goto(f"{live_server}/templates/new")
    page.fill("input[name=name]", "Employment contract")
    pdf = {"name": "contract.pdf", "mimeType": "application/pdf", "buffer": plain_pdf(text="Employment contract")}
    page.set_input_files("input[name=file]", files=[pdf])
    page.click("main button[type=submit]")
    _saved(page, 1)
    _press(page, "#place-fields")
    page.wait_for_url("**/place")
    page.wait_for_function("() => document.querySelector('.pdf-page img').naturalWidth > 0")

    _press(page, "#add-box")
    page.keyboard.type("signature_employer")  # the new box's column has the focus
    before = json.loads(page.input_value("#boxes-json"))[0]
    _tab_to(page, ".box-row [data-role=move]")
    for key, times in (("ArrowDown", 20), ("ArrowRight", 10), ("Shift+ArrowDown", 6)):
        for _ in range(times):
            page.keyboard.press(key)
    after = json.loads(page.input_value("#boxes-json"))[0]
    # A step is half a percent of the A4 page: 10 right, 20 down, and 6 taller (PDF points count y upwards).
    assert after["x"] - before["x"] == pytest.approx(10 * 0.005 * 595.28, abs=0.05)
    assert after["h"] - before["h"] == pytest.approx(6 * 0.005 * 841.89, abs=0.05)
    assert before["y"] - after["y"] == pytest.approx(26 * 0.005 * 841.89, abs=0.05)
    expect(page.locator(".pdf-box.is-signature")).to_have_count(1)
    _looks_right(page, live_server, "keyboard-pdf-box")
    _press(page, "#place-form button[type=submit]")
    _saved(page, 2)

    db.session.expire_all()
    version = get_version(db.session, template_id=db.session.scalar(db.select(DocumentTemplate.id)))
    (saved,) = version.pdf_boxes
    assert {k: saved[k] for k in ("name", "x", "y", "w", "h")} == pytest.approx(
        {k: after[k] for k in ("name", "x", "y", "w", "h")}
    )

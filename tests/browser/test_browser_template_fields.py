"""The template page lists the fields the signer fills in document order, each with its settings to edit;
a refused setting is said at its field and nothing is saved; in both languages, at 1366 and 360 px, axe clean."""

from __future__ import annotations

import pytest

from tests.support.accounts import STAFF
from tests.support.looks import log_in, look_at, save_html_template

pytestmark = pytest.mark.browser

CONTRACT = (
    "<h1>Employment contract</h1><p>Employee: {{ name }}.</p><p>IBAN: {{ field_iban }}</p>"
    "<p>Tax class: {{ field_tax_class }}</p><p>I have read the work rules {{ field_rules }}</p><p>{{ signature }}</p>"
)


@pytest.mark.parametrize(("locale", "heading", "refusal"), [
    ("en", "Fields the signer fills", "is a choice: give it at least one option."),
    ("ru", "Поля, которые заполняет подписант", "это выбор: задайте хотя бы один вариант."),
])  # fmt: skip
def test_the_template_page_edits_the_fields_in_document_order(users, live_server, page, locale, heading, refusal):
    from bulksign.core.extensions import db

    users["staff"].locale = locale
    db.session.commit()
    log_in(page, live_server, *STAFF)
    page.set_viewport_size({"width": 1366, "height": 900})
    save_html_template(page, live_server, name="Employment contract", html=CONTRACT)
    section = page.locator("#fields")
    assert section.locator("h2").inner_text() == heading
    assert section.locator("legend code").all_inner_texts() == ["field_iban", "field_tax_class", "field_rules"]
    assert page.locator("#variables").inner_text() == "email, name"  # a field is never a column the file must have
    assert page.locator("#optional-variables").inner_text() == "—"

    # A choice without options is refused at its field, and what was typed stays.
    page.select_option("select[name=tax_class-type]", "choice")
    page.fill("input[name=iban-label]", "Your IBAN")
    page.click("#fields-form button[type=submit]")
    error = page.locator("#field-tax_class-error")
    assert refusal in error.inner_text()
    assert page.locator("#field-tax_class").get_attribute("aria-describedby") == "field-tax_class-error"
    assert page.locator("input[name=iban-label]").input_value() == "Your IBAN"
    found = look_at(page, live_server, f"template-fields-refused-{locale}")
    assert all(not violations for violations in found.values()), found

    page.set_viewport_size({"width": 1366, "height": 900})
    page.fill("textarea[name=tax_class-options]", "I\nII\nIII")
    page.select_option("select[name=rules-type]", "checkbox")
    page.fill("input[name=iban-pattern]", "[A-Z]{2}[0-9]{2}[A-Z0-9]+")
    page.click("#fields-form button[type=submit]")
    page.wait_for_url("**/templates/*#fields")
    assert page.locator("select[name=tax_class-type]").input_value() == "choice"
    assert page.locator("textarea[name=tax_class-options]").input_value() == "I\nII\nIII"
    assert page.locator("select[name=rules-type]").input_value() == "checkbox"
    assert page.locator("input[name=iban-label]").input_value() == "Your IBAN"
    assert page.locator("input[name=iban-required]").is_checked()
    found = look_at(page, live_server, f"template-fields-{locale}")
    assert all(not violations for violations in found.values()), found

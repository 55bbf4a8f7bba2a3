"""The template page says who signs: a template marking another party's place lists its roles in
document order, in both languages, at 1366 and 360 px."""

from __future__ import annotations

import pytest

from tests.support.accounts import STAFF
from tests.support.looks import log_in, look_at, save_html_template

pytestmark = pytest.mark.browser

TWO_SIDES = (
    "<h1>Act of completed work</h1><p>Contractor: {{ name }}.</p>"
    "<p>Accepted by the customer: {{ signature_customer }}</p><p>The contractor: {{ signature }}</p>"
)


@pytest.mark.parametrize(("locale", "label"), [("en", "Who signs"), ("ru", "Кто подписывает")])
def test_the_template_page_lists_who_signs_in_document_order(users, live_server, page, locale, label):
    from bulksign.core.extensions import db

    users["staff"].locale = locale
    db.session.commit()
    log_in(page, live_server, *STAFF)
    page.set_viewport_size({"width": 1366, "height": 900})
    save_html_template(page, live_server, name="Act of completed work", html=TWO_SIDES)
    roles = page.locator("#roles")
    assert roles.inner_text() == ("Customer, Recipient" if locale == "en" else "Customer, Получатель")
    assert roles.evaluate("dd => dd.previousElementSibling.textContent") == label
    assert page.locator("#variables").inner_text() == "email, name"  # a mark is never a column
    found = look_at(page, live_server, f"template-roles-{locale}")
    assert all(not violations for violations in found.values()), found

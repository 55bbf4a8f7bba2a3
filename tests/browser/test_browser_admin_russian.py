"""The admin pages in Russian, in Chromium: every word ours is Russian, no placeholder is cut, the seal says it once,
and the login page speaks the language of the browser, or the one its last user chose."""

from __future__ import annotations

import json

import pytest

from bulksign.core.extensions import db
from bulksign.documents.seal_keys import seal_key
from bulksign.integrations import webhooks_out
from bulksign.models import WebhookDelivery, utcnow
from tests.support.accounts import ADMIN, STAFF
from tests.support.batchdata import batch_in_states
from tests.support.clock import NOW
from tests.support.looks import log_in, shoot

pytestmark = pytest.mark.browser

#: Inputs whose placeholder text is wider than the room the input gives it (its content box).
CUT_PLACEHOLDERS = """() => {
  const canvas = document.createElement('canvas').getContext('2d');
  return [...document.querySelectorAll('input[placeholder]')].filter(i => i.offsetParent !== null).map(i => {
    const s = getComputedStyle(i);
    canvas.font = `${s.fontStyle} ${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
    const room = i.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
    return {name: i.name, placeholder: i.placeholder, need: canvas.measureText(i.placeholder).width, room};
  }).filter(p => p.need > p.room + 1);
}"""


def _russian(app, user) -> None:
    user.locale = "ru"
    db.session.commit()


def test_admin_pages_in_russian_cut_no_placeholder(app, users, live_server, page):
    _russian(app, users["admin"])
    batch = batch_in_states(db.session, statuses=["sent", "signed"], now=NOW, user_id=users["admin"].id)
    db.session.commit()
    log_in(page, live_server, *ADMIN)
    cut = {}
    for path, name in (
        ("/admin/", "users"),
        ("/admin/mailbox", "mailbox"),
        ("/admin/suppressions/", "suppressions"),
        ("/admin/teams", "teams"),
        ("/admin/webhooks", "webhooks"),
        ("/batches/", "batches"),
        (f"/batches/{batch.id}", "batch"),
    ):
        page.goto(f"{live_server}{path}")
        for width in (1366, 360):
            page.set_viewport_size({"width": width, "height": 900})
            found = page.evaluate(CUT_PLACEHOLDERS)
            if found:
                cut[f"{name}@{width}"] = found
        shoot(page, f"admin-ru-{name}")
    assert cut == {}, json.dumps(cut, ensure_ascii=False, indent=1)


def test_the_webhook_log_filters_and_shows_delivery_states_in_russian(app, users, live_server, page):
    _russian(app, users["admin"])
    endpoint = webhooks_out.create_endpoint(
        db.session,
        url="https://hooks.example.com/in",
        events=["request.signed"],
        user_id=users["admin"].id,
        now=utcnow(),
    )
    db.session.flush()
    for status in ("pending", "delivered", "failed"):
        db.session.add(WebhookDelivery(endpoint_id=endpoint.id, event="request.signed", payload={}, status=status))
    db.session.commit()
    log_in(page, live_server, *ADMIN)
    page.goto(f"{live_server}/admin/webhooks")
    options = page.locator("select[name=status] option").all_inner_texts()
    assert options == ["Все доставки", "в очереди", "доставлено", "ошибка"]
    assert sorted(page.locator("#deliveries .badge").all_inner_texts()) == ["в очереди", "доставлено", "ошибка"]
    with page.expect_navigation():
        page.select_option("select[name=status]", "failed")  # the filter still sends the state's name
    assert page.locator("#deliveries .badge").all_inner_texts() == ["ошибка"]
    shoot(page, "admin-ru-webhooks-filtered")


@pytest.mark.parametrize(("language", "words"), [("en", "Document seal"), ("ru", "Печать документов")])
def test_the_self_signed_seal_is_said_once(app, users, live_server, page, language, words):
    seal_key(app.config)  # the installation's own certificate, as after the first sealed document
    users["admin"].locale = language
    db.session.commit()
    log_in(page, live_server, *ADMIN)
    page.goto(f"{live_server}/admin/")
    seal = page.inner_text("#seal-status")
    assert words in page.inner_text("main")
    assert "(self-signed) (self-signed)" not in seal and seal.count("(self-signed)") == 1
    assert "(самоподписанный)" not in seal
    shoot(page, f"admin-seal-{language}")


def test_the_login_page_speaks_the_browsers_language_then_the_one_its_last_user_chose(browser, app, users, live_server):
    russian = browser.new_context(locale="ru-RU")
    try:
        page = russian.new_page()
        page.goto(f"{live_server}/auth/login")
        assert page.locator("html").get_attribute("lang") == "ru"
        assert page.locator("main button[type=submit]").inner_text() == "Войти"
        shoot(page, "login-ru-browser")
    finally:
        russian.close()
    english = browser.new_context(locale="en-US")
    try:
        page = english.new_page()
        log_in(page, live_server, *STAFF)
        with page.expect_navigation():
            page.select_option("select[name=language]", "ru")
        page.click("header button:has-text('Выйти')")
        page.wait_for_url(f"{live_server}/auth/login")
        # The browser asks for English; the person chose Russian, and the page after logging out remembers it.
        assert page.locator("html").get_attribute("lang") == "ru"
        assert page.locator("main button[type=submit]").inner_text() == "Войти"
        shoot(page, "login-ru-after-logout")
    finally:
        english.close()

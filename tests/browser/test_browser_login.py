"""A newcomer logs in with the demo account in a real browser."""

from __future__ import annotations

import re

import pytest

from tests.support.accounts import ADMIN, STAFF
from tests.support.looks import log_in, look_at, shoot

pytestmark = pytest.mark.browser


def test_demo_login_works_in_a_browser(app, live_server, page):
    app.test_cli_runner().invoke(args=["demo"])
    page.goto(f"{live_server}/")
    assert "/auth/login" in page.url
    page.fill("input[name=email]", "admin@example.com")
    page.fill("input[name=password]", "wrong")
    page.click("button[type=submit]")
    assert page.locator("[role=alert]").inner_text() == "Wrong email or password."
    page.fill("input[name=password]", "bulksign-demo")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server}/")
    assert page.locator("h1").inner_text() == "Dashboard"
    assert page.locator("nav a", has_text="Admin").count() == 1
    page.click("text=Log out")
    page.wait_for_url("**/auth/login")


def test_a_forgotten_password_is_reset_from_the_login_page_in_a_browser(app, users, live_server, page, smtp, run_jobs):
    """Login → "Forgot password?" → the mailed link → a new password → logged in with it."""
    page.goto(f"{live_server}/auth/login")
    found = {"login": look_at(page, live_server, "account-login")}
    page.click("text=Forgot password?")
    page.wait_for_url("**/auth/forgot")
    found["forgot"] = look_at(page, live_server, "account-forgot")
    page.fill("input[name=email]", STAFF[0])
    page.click("button[type=submit]")
    assert "a mail with a link to set a new password is on its way" in page.locator("[role=status]").inner_text()
    found["forgot-sent"] = look_at(page, live_server, "account-forgot-sent")

    run_jobs("mail")
    (mail,) = smtp.to(STAFF[0])
    (link,) = re.findall(r"http://\S+/auth/reset/\S+", mail.text())
    assert link.startswith(live_server)
    page.goto(link)
    assert page.locator("h1").inner_text() == "Set a new password"
    page.fill("input[name=password]", "brand-new-password")
    page.fill("input[name=repeat]", "brand-new-pasword")
    page.click("button[type=submit]")
    assert "The two passwords differ" in page.locator("[role=alert]").inner_text()
    found["reset"] = look_at(page, live_server, "account-reset")
    page.fill("input[name=password]", "brand-new-password")
    page.fill("input[name=repeat]", "brand-new-password")
    page.click("button[type=submit]")
    page.wait_for_url("**/auth/login")
    assert "Your new password is set. Log in with it." in page.locator(".flash").inner_text()
    found["reset-done"] = look_at(page, live_server, "account-reset-done")
    page.fill("input[name=email]", STAFF[0])
    page.fill("input[name=password]", "brand-new-password")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server}/")
    page.click("header .email")
    page.wait_for_url("**/account/")
    assert page.locator("#change-password h2").inner_text() == "Change password"
    found["account"] = look_at(page, live_server, "account-page")
    page.click("text=Log out")
    page.wait_for_url("**/auth/login")

    page.goto(link)
    assert page.locator("h1").inner_text() == "This link no longer works"
    assert "This link was used already" in page.locator("[role=alert]").inner_text()
    found["reset-used"] = look_at(page, live_server, "account-reset-used")
    assert {(name, width): v for name, widths in found.items() for width, v in widths.items() if v} == {}


def test_an_admin_names_a_user_and_the_name_shows_in_the_users_table(app, users, live_server, page):
    """The display name on the admin users page."""
    log_in(page, live_server, *ADMIN)
    page.goto(f"{live_server}/admin/")
    row = page.locator(f"tr[data-user='{STAFF[0]}']")
    row.locator("input[name=display_name]").fill("Anna Schmidt")
    row.locator("button", has_text="Save").click()
    assert "is now called “Anna Schmidt”" in page.locator(".flash").inner_text()
    assert page.locator(f"tr[data-user='{STAFF[0]}'] input[name=display_name]").input_value() == "Anna Schmidt"
    shoot(page, "account-admin-users")

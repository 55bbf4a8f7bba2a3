"""A newcomer logs in with the demo account in a real browser."""

from __future__ import annotations

import pytest

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

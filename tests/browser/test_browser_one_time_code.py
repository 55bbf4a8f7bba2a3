"""A recipient confirms a one-time code in a real Chromium before the document shows, then signs."""

from __future__ import annotations

import io
import re
from datetime import timedelta

import pytest
from pypdf import PdfReader

from bulksign.models import utcnow
from tests.support.looks import shoot
from tests.support.signing_page import agree, signed_bytes
from tests.support.signing_requests import fresh, make_sent_request

pytestmark = pytest.mark.browser


def _shots(page, name: str) -> None:
    """Screenshots at 1366 and 360 px (``shoot``); the phone width must not scroll sideways."""
    shoot(page, name)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), name
    page.set_viewport_size({"width": 1366, "height": 900})


def test_a_recipient_confirms_a_code_then_signs(app, users, live_server, page, smtp, run_jobs):
    problems: list[str] = []  # CSP violations and script errors; the wrong code's page is a 422 on purpose
    page.on(
        "console", lambda m: problems.append(m.text) if m.type == "error" and "status of 422" not in m.text else None
    )
    r = make_sent_request(now=utcnow() - timedelta(minutes=1), owner=users["staff"], one_time_code=True)
    page.goto(f"{live_server}/sign/{r.token}")
    assert page.locator(".card.document").count() == 0, "no document before the code"
    _shots(page, "one-time-code-ask")

    page.click("text=Send me a code")
    page.wait_for_selector("input[name=code]")
    assert "i•••@example.com" in page.inner_text("#code-sent")
    run_jobs("mail")
    (mail,) = smtp.to("ivan@example.com")
    code = re.search(r"\b(\d{6})\b", mail.text()).group(1)

    page.fill("input[name=code]", "000000" if code != "000000" else "111111")
    page.click("#code-form button[type=submit]")
    page.wait_for_selector("text=The code is not right. You have 4 more tries.")
    _shots(page, "one-time-code-wrong")

    page.fill("input[name=code]", f"{code[:3]} {code[3:]}")
    page.click("#code-form button[type=submit]")
    page.wait_for_selector(".card.document")
    agree(page)
    page.click("#sign-button")
    page.wait_for_selector("text=You signed this document")
    assert fresh(r.id).status == "signed"
    # The same link in another browser (a forwarded mail) asks for a code of its own, after signing too.
    other = page.context.browser.new_context().new_page()
    other.goto(f"{live_server}/sign/{r.token}")
    assert other.locator("#send-code-form").count() == 1 and other.locator(".state-signed").count() == 0
    other.context.close()

    run_jobs("pdf")
    page.reload()
    audit = " ".join(PdfReader(io.BytesIO(signed_bytes(page))).pages[-1].extract_text().split())
    for line in (
        "One-time code sent by email to i•••@example.com",
        "Wrong one-time code (4 tries left)",
        "One-time code confirmed",
        "Identity check",
    ):
        assert line in audit, line
    assert problems == []

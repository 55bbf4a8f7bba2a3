"""A two-party signing in a real Chromium: the employee signs from the invitation mail, the employer from
the mail that follows, through the real mails' links; staff see the employer's own remind and resend in the
request's panel meanwhile; the sealed PDF carries both. Screenshots at 1366 and 360 px."""

from __future__ import annotations

import io
import re

import pytest
from playwright.sync_api import expect
from pypdf import PdfReader

from bulksign.core.extensions import db
from bulksign.models import SigningRequest
from tests.browser.test_browser_signing import draw
from tests.signing.test_routing import _mails_to, _sent
from tests.support.accounts import STAFF
from tests.support.looks import log_in, look_at
from tests.support.signing_page import agree, signed_bytes

pytestmark = pytest.mark.browser

LINK = r"http://127\.0\.0\.1:\d+/sign/[A-Za-z0-9_-]+"


def _sign_as(page, live_server, name: str, shot: str) -> None:
    """Read, draw, type the name, agree and sign, as a person would; screenshots before signing."""
    page.wait_for_function("() => [...document.querySelectorAll('.doc-page img')].every(i => i.naturalWidth > 0)")
    found = look_at(page, live_server, shot)
    assert found == {1366: [], 360: []}, found
    page.set_viewport_size({"width": 1366, "height": 900})
    draw(page)
    page.fill("input[name=name]", name)
    agree(page)
    page.click("#sign-button")


def test_the_employee_then_the_employer_sign_through_their_mails(app, users, live_server, page, smtp, run_jobs):
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    request_id = _sent(users, run_jobs)
    batch_id = db.session.get(SigningRequest, request_id).batch_id

    (invitation,) = _mails_to(smtp, "eva@example.com")
    page.goto(re.search(LINK, invitation.text()).group(0))
    assert page.locator("h1").inner_text() == "Employment contract"
    _sign_as(page, live_server, "Eva Employee", "two-party-employee")
    page.wait_for_selector("text=The other parties sign it now")
    found = look_at(page, live_server, "two-party-employee-signed")
    assert found == {1366: [], 360: []}, found

    run_jobs("pdf", "mail")  # the next step: the employer is invited with the employee's signature on the document
    (employer_mail,) = _mails_to(smtp, "hr@acme.example")
    assert "Anna Boss" in employer_mail.text()

    staff = page.context.browser.new_context().new_page()
    log_in(staff, live_server, *STAFF)
    staff.goto(f"{live_server}/batches/{batch_id}")
    staff.locator("a.open-timeline").first.click()
    expect(staff.locator("#parties li[data-role=employer] [data-party-action=resend-employer]")).to_be_visible()
    expect(staff.locator("#parties li[data-role=recipient] .party-actions")).to_have_count(0)
    found = look_at(staff, live_server, "two-party-staff-panel")
    assert found == {1366: [], 360: []}, found
    staff.context.close()

    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(re.search(LINK, employer_mail.text()).group(0))
    assert page.input_value("input[name=name]") == "Anna Boss"
    _sign_as(page, live_server, "Anna Boss", "two-party-employer")
    page.wait_for_selector("text=You signed this document")
    assert db.session.get(SigningRequest, request_id).status == "signed"

    run_jobs("pdf", "mail")
    page.reload()
    found = look_at(page, live_server, "two-party-employer-signed")
    assert found == {1366: [], 360: []}, found
    page.set_viewport_size({"width": 1366, "height": 900})
    text = " ".join(" ".join(p.extract_text().split()) for p in PdfReader(io.BytesIO(signed_bytes(page))).pages)
    assert "Eva Employee" in text and "Anna Boss" in text
    assert "Recipient: Eva Employee <eva@example.com>" in text and "Employer: Anna Boss <hr@acme.example>" in text
    assert problems == []

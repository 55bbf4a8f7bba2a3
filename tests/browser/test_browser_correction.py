"""Correct and resend in a real Chromium: the employer declines a two-party contract, staff correct the position
from the request's panel with a note, and both sign the new version through the mails' links; the old link says
it was replaced. Screenshots of the form and of the replaced link at 1366 and 360 px."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from bulksign.core.extensions import db
from bulksign.models import SigningRequest
from tests.batches.test_corrections import CONTRACT, FILE
from tests.browser.test_browser_signing import draw
from tests.browser.test_browser_two_party_signing import LINK
from tests.signing.test_routing import _mails_to, _sent
from tests.support.accounts import STAFF
from tests.support.looks import ARTIFACTS, WIDTHS, log_in, look_at
from tests.support.signing_page import agree

pytestmark = pytest.mark.browser


def _link(mail) -> str:
    return re.search(LINK, mail.text()).group(0)


def _signs(page, link: str, name: str) -> None:
    """Draw, type the name, agree and sign, as a person would."""
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(link)
    draw(page)
    page.fill("input[name=name]", name)
    agree(page)
    page.click("#sign-button")


@pytest.mark.slow(seconds=40)
def test_a_declined_two_party_contract_is_corrected_and_signed_by_both(app, users, live_server, page, smtp, run_jobs):
    request_id = _sent(users, run_jobs, html=CONTRACT, file=FILE)
    batch_id = db.session.get(SigningRequest, request_id).batch_id
    signer = page.context.browser.new_context().new_page()

    (invitation,) = _mails_to(smtp, "eva@example.com")
    _signs(signer, _link(invitation), "Eva Employee")
    signer.wait_for_selector("text=The other parties sign it now")
    run_jobs("pdf", "mail")
    employer_v1 = _link(_mails_to(smtp, "hr@acme.example")[0])
    signer.goto(employer_v1)
    signer.click("text=I do not want to sign")
    signer.fill("textarea[name=reason]", "Wrong job")
    signer.click("button:has-text('Decline')")
    signer.wait_for_selector("text=You declined to sign this document")
    run_jobs("mail")

    log_in(page, live_server, *STAFF)
    page.goto(f"{live_server}/batches/{batch_id}")
    page.locator("a.open-timeline").first.click()
    form = page.locator(f"#correction-{request_id}")
    expect(form).to_have_attribute("open", "")  # a declined request offers it at once
    expect(form.locator("input[name=value-position]")).to_have_value("Accountant")
    form.locator("input[name=value-position]").fill("Engineer")
    form.locator("textarea[name=note]").fill("The position was wrong: Engineer, as agreed.")
    form.scroll_into_view_if_needed()
    found = look_at(page, live_server, "correction-form")
    assert found == {1366: [], 360: []}, found
    for width in WIDTHS:  # the form alone, tall enough that the side panel at 1366 px shows all of it
        page.set_viewport_size({"width": width, "height": 1800})
        form.screenshot(path=str(ARTIFACTS / f"correction-form-alone-{width}.png"))
    page.set_viewport_size({"width": 1366, "height": 900})
    page.click(f"#correct-{request_id}")
    expect(page.locator(f"#request-result-{request_id}")).to_contain_text("new version")

    run_jobs("pdf", "mail")
    invitations = [m for m in smtp.of_kind("invitation") if "eva@example.com" in m.rcpt_tos]
    employee_v2 = _link(invitations[-1])
    assert employee_v2 != _link(invitation)
    signer.goto(employee_v2)
    signer.click("text=Read the text in large print")
    expect(signer.locator(".doc-text")).to_contain_text("joins ACME as Engineer.")
    expect(signer.locator(".doc-text")).not_to_contain_text("Accountant")
    _signs(signer, employee_v2, "Eva Employee")
    signer.wait_for_selector("text=The other parties sign it now")
    run_jobs("pdf", "mail")
    employer_v2 = _link([m for m in smtp.of_kind("party-invitation") if "hr@acme.example" in m.rcpt_tos][-1])
    assert employer_v2 != employer_v1
    _signs(signer, employer_v2, "Anna Boss")
    signer.wait_for_selector("text=You signed this document")
    run_jobs("pdf", "mail")

    signer.goto(employer_v1)
    expect(signer.locator("h1")).to_have_text("This document was replaced by a newer version")
    found = look_at(signer, live_server, "correction-replaced-link")
    assert found == {1366: [], 360: []}, found
    signer.context.close()

    page.goto(f"{live_server}/batches/{batch_id}")
    expect(page.locator("#table .badge-signed")).to_have_count(1)
    assert db.session.get(SigningRequest, request_id).status == "signed"

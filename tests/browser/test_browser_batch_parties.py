"""A two-party batch's page in a real Chromium: each row's parties, the signed count per role, "waiting
for employer" and a request's parties in its panel; English and Russian, 1366 and 360 px (the table as cards)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from bulksign.batches.bounce_reports import BounceReport
from bulksign.batches.bounces import record_bounce
from bulksign.core.extensions import db
from bulksign.models import SigningRequest
from tests.support.accounts import STAFF
from tests.support.clock import NOW
from tests.support.looks import log_in, look_at
from tests.support.partydata import P, make_two_party_batch

pytestmark = pytest.mark.browser

WORDS = {
    "en": {
        "row": "Recipient has signed · Employer invited",
        "counts": "Employer: 1 of 6 signed",
        "filter": "waiting for Employer",
        "panel": "has declined",
    },
    "ru": {
        "row": "Получатель подписал · Работодатель приглашён",
        "counts": "Работодатель: подписали 1 из 6",
        "filter": "ожидают подписи: Работодатель",
        "panel": "отказался",
    },
}


def test_the_batch_page_shows_each_rows_parties_the_counts_per_role_and_waiting_for_a_role(
    app, users, live_server, page
):
    batch_id = make_two_party_batch(db.session, now=NOW, user_id=users["staff"].id, name="Employment contracts")
    log_in(page, live_server, *STAFF)
    for language, words in WORDS.items():
        users["staff"].locale = language
        db.session.commit()
        page.set_viewport_size({"width": 1366, "height": 900})
        page.goto(f"{live_server}/batches/{batch_id}")
        rows = page.locator("table.recipients tbody tr")
        expect(rows).to_have_count(6)
        assert words["row"] in rows.nth(2).locator("td.parties").inner_text().replace("\n", " ").replace("\xa0", " ")
        assert words["counts"] in page.locator("#role-counts").inner_text()
        found = look_at(page, live_server, f"batch-parties-{language}")
        assert found == {1366: [], 360: []}, found

        page.set_viewport_size({"width": 1366, "height": 900})
        page.select_option("#filter-waiting-for", label=words["filter"])
        expect(rows).to_have_count(3)
        page.wait_for_url(f"**/batches/{batch_id}?waiting_for=employer")
        page.locator("a.open-timeline").first.click()
        expect(page.locator("#parties")).to_be_visible()
        page.goto(f"{live_server}/batches/{batch_id}?waiting_for=recipient")
        expect(rows).to_have_count(2)
        page.locator("a.open-timeline").nth(1).click()
        expect(page.locator("#parties li")).to_have_count(2)
        found = look_at(page, live_server, f"batch-parties-waiting-{language}")
        assert found == {1366: [], 360: []}, found
        # A declined party's request is closed: it waits for nobody, and its panel says who declined.
        page.goto(f"{live_server}/batches/{batch_id}")
        page.locator("a.open-timeline").nth(4).click()
        expect(page.locator("#parties li[data-role=employer]")).to_contain_text(words["panel"])


def test_a_request_both_of_whose_parties_bounced_offers_each_its_own_resend(app, users, live_server, page):
    """The employee's and the employer's invitations both came back: the panel names both, offers the address
    correction and resend to each, and says the request stays bounced until the last is resent."""
    rows = (("opened", P.OPENED, P.INVITED),)
    batch_id = make_two_party_batch(
        db.session, now=NOW, user_id=users["staff"].id, name="Employment contracts", rows=rows
    )
    (employee,) = db.session.scalars(select(SigningRequest.email).where(SigningRequest.batch_id == batch_id))
    for address in (employee, "hr@example.com"):
        record_bounce(
            db.session, report=BounceReport(email=address, message_id=None, reason="550 no such user"), now=NOW
        )
    db.session.commit()
    log_in(page, live_server, *STAFF)
    page.goto(f"{live_server}/batches/{batch_id}")
    page.locator("a.open-timeline").first.click()
    expect(page.locator("#parties li[data-role=employer] [data-party-action=resend-employer]")).to_be_visible()
    expect(page.locator("#parties li[data-role=employer] [data-party-action=email-employer]")).to_be_visible()
    # Its address is dead: no reminder to it, only the resend once corrected.
    expect(page.locator("#parties li[data-role=employer] [data-party-action=remind-employer]")).to_have_count(0)
    advice = page.get_by_text("What you can do:").locator("..")
    expect(advice).to_contain_text("stays bounced until the last of them is resent")
    expect(advice).to_contain_text("Employer")
    found = look_at(page, live_server, "batch-parties-both-bounced")
    assert found == {1366: [], 360: []}, found

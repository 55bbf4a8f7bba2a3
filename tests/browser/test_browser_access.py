"""Teams in a real Chromium: an admin builds a team on the admin page; an owner shares a batch and names who is told."""

from __future__ import annotations

import pytest

from bulksign.core.extensions import db
from bulksign.models import Batch, Team, utcnow
from bulksign.people.teams import add_member, create_team
from bulksign.people.users import create_user
from tests.support.accounts import ADMIN, DEFAULT_TEAM, STAFF
from tests.support.batchdata import batch_in_states
from tests.support.clock import NOW
from tests.support.looks import ARTIFACTS, log_in

pytestmark = pytest.mark.browser


def _shots(page, name: str, part: str = "body") -> None:
    """The page at desktop and phone width, for a person to look at; ``part`` fits the phone's width."""
    ARTIFACTS.mkdir(exist_ok=True)
    for width, height in ((1366, 900), (360, 740)):
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)
    assert page.locator(part).evaluate("e => e.scrollWidth <= window.innerWidth + 1"), name
    page.set_viewport_size({"width": 1366, "height": 900})


def test_an_admin_creates_a_team_adds_a_member_and_sees_who_did_it(app, users, live_server, page):
    create_user(db.session, email="clerk@example.com", password="clerk-password", role="staff", now=utcnow())
    db.session.commit()
    log_in(page, live_server, *ADMIN)
    page.goto(f"{live_server}/admin/")
    page.click("text=Teams, roles and membership changes")
    page.fill("input[name=name]", "Accounting")
    page.click("text=Create team")
    page.wait_for_selector("text=Team Accounting created")
    row = page.locator("#teams tr[data-team=Accounting]")
    row.locator("input[name=email]").fill("clerk@example.com")
    row.locator("button:has-text('Add')").click()
    page.wait_for_selector("text=clerk@example.com is now in Accounting")
    assert "clerk@example.com" in page.locator("#teams tr[data-team=Accounting]").inner_text()
    role_row = page.locator("#roles tr", has_text="clerk@example.com")
    role_row.locator("select[name=role]").select_option("manager")
    role_row.locator("button:has-text('Change')").click()
    page.wait_for_selector("text=clerk@example.com is now manager")
    changes = page.locator("#access-changes").inner_text()
    assert "role staff → manager" in changes and "added to Accounting" in changes and "admin@example.com" in changes
    _shots(page, "admin-teams")
    # The users page shows the latest changes too; a user's email leads to their changes alone.
    page.goto(f"{live_server}/admin/")
    assert "role staff → manager" in page.locator("#access-changes").inner_text()
    page.click("#users a:has-text('clerk@example.com')")
    page.wait_for_selector("text=Only the changes of clerk@example.com")
    assert page.locator("#access-changes tbody tr").count() == 3  # created, added, role
    _shots(page, "admin-access-changes-of-a-user")


def test_an_owner_shares_a_batch_with_another_team_and_names_who_gets_the_notices(app, users, live_server, page):
    hr = create_team(db.session, name="HR", now=utcnow())
    reader = create_user(
        db.session, email="reader@example.com", password="reader-password", role="viewer", now=utcnow()
    )
    add_member(db.session, team=hr, user=reader, by=None, now=utcnow())
    db.session.commit()
    batch_id = batch_in_states(
        db.session, statuses=["sent", "signed"], now=NOW, name="Salaries Q4", user_id=users["staff"].id
    ).id
    log_in(page, live_server, *STAFF)
    page.goto(f"{live_server}/batches/{batch_id}")
    page.click("#batch-access summary")
    assert DEFAULT_TEAM in page.locator("#batch-access summary").inner_text()
    page.fill("#batch-access input[name=email]", "reader@example.com")
    page.click("#batch-access button:has-text('Share')")
    page.wait_for_selector("text=reader@example.com can now see this batch")
    page.click("#batch-access summary")
    page.select_option("#batch-notify-to", "other")
    page.fill("#batch-access input[name=notify_email]", "head-of-hr@example.com")
    page.click("#batch-access button:has-text('Save')")
    page.wait_for_selector("text=Notices about this batch go to head-of-hr@example.com")
    page.click("#batch-access summary")
    # On a phone the panel, like the recipients table below it (stacked), must not scroll sideways.
    _shots(page, "batch-access", part="#batch-access")
    db.session.expire_all()
    assert db.session.get(Batch, batch_id).notify_email == "head-of-hr@example.com"
    assert db.session.get(Team, hr.id) is not None


def test_the_new_batch_form_offers_the_owner_the_teams_managers_or_another_address(app, users, live_server, page):
    boss = create_user(db.session, email="boss@example.com", password="boss-password", role="manager", now=utcnow())
    team = db.session.scalar(db.select(Team).where(Team.name == DEFAULT_TEAM))
    add_member(db.session, team=team, user=boss, by=None, now=utcnow())
    db.session.commit()
    batch_in_states(db.session, statuses=[], now=NOW, name="Earlier", user_id=users["staff"].id)  # a template to use
    log_in(page, live_server, *STAFF)
    page.goto(f"{live_server}/batches/new")
    choice = page.locator("#notify-to")
    assert choice.input_value() == "owner"
    assert choice.locator("option").all_inner_texts() == [
        "me (the owner)",
        f"boss@example.com (manager, {DEFAULT_TEAM})",
        "another address…",
    ]
    # The address is asked for only once "another address" is chosen.
    other = page.locator("#create-form input[name=notify_email]")
    assert other.is_hidden()
    choice.select_option("other")
    other.fill("auditor@example.com")
    _shots(page, "new-batch-another-address", part="#create-form fieldset.notice-choice")
    choice.select_option("boss@example.com")
    page.locator("#create-form fieldset.notice-choice").scroll_into_view_if_needed()
    _shots(page, "new-batch-notices", part="#create-form")

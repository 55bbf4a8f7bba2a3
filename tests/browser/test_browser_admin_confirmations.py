"""Destructive actions ask first, in Chromium: in place with htmx, as a page of its own without JavaScript."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from bulksign.core.extensions import db
from bulksign.models import SigningRequest, utcnow
from tests.support.accounts import ADMIN, STAFF
from tests.support.batchdata import batch_in_states
from tests.support.looks import log_in, look_at, shoot

pytestmark = pytest.mark.browser


def _cancelled(batch_id: int) -> int:
    db.session.expire_all()
    return db.session.scalar(
        select(func.count())
        .select_from(SigningRequest)
        .where(SigningRequest.batch_id == batch_id, SigningRequest.status == "cancelled")
    )


@pytest.mark.parametrize("language", ["en", "ru"])
def test_cancel_batch_after_the_sending_asks_in_place_and_keep_it_leaves_it_alone(
    app, users, live_server, page, language
):
    users["staff"].locale = language
    batch = batch_in_states(
        db.session,
        statuses=["sent", "opened", "signed"],
        now=utcnow(),
        user_id=users["staff"].id,
        batch_status="awaiting_signatures",
    )
    db.session.commit()
    batch_id = batch.id
    log_in(page, live_server, *STAFF)
    page.goto(f"{live_server}/batches/{batch_id}")
    page.click("#cancel-batch")
    step = page.locator("#cancel-batch-step #confirm-step")
    step.wait_for()
    assert page.url.endswith(f"/batches/{batch_id}")  # in place: the page did not change
    said = {
        "en": "2 recipients have not signed yet: their links stop working at once and they can no longer sign.",
        "ru": "2 получателя ещё не подписали: ссылки сразу перестанут работать, и подписать будет нельзя.",
    }[language]
    assert said in step.inner_text()
    problems = {w: v for w, v in look_at(page, live_server, f"confirm-cancel-batch-{language}").items() if v}
    assert problems == {}
    page.set_viewport_size({"width": 1366, "height": 900})
    page.click("#confirm-no")  # "Keep it as it is"
    assert page.locator("#cancel-batch-step").inner_html().strip() == ""
    assert _cancelled(batch_id) == 0
    page.click("#cancel-batch")
    page.fill("#cancel-batch-step textarea[name=reason]", "The terms changed")  # the step asks why
    page.click("#cancel-batch-step #confirm-yes")
    page.wait_for_selector(".flash-success")
    assert _cancelled(batch_id) == 2
    reasons = db.session.scalars(select(SigningRequest.cancel_reason).where(SigningRequest.status == "cancelled"))
    assert list(reasons) == ["The terms changed"] * 2
    assert page.locator("#cancel-batch").count() == 0  # nothing left to cancel


def test_without_javascript_the_question_is_a_page_of_its_own(browser, app, users, live_server):
    batch = batch_in_states(db.session, statuses=["sent", "sent"], now=utcnow(), user_id=users["staff"].id)
    db.session.commit()
    batch_id = batch.id
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        log_in(page, live_server, *STAFF)
        page.goto(f"{live_server}/batches/{batch_id}")
        page.click("#cancel-batch")
        page.wait_for_selector("#confirm-step")
        assert "Cancel the batch Contracts?" in page.inner_text("h2#confirm-title")
        shoot(page, "confirm-cancel-batch-no-js")
        assert _cancelled(batch_id) == 0
        page.click("#confirm-yes")
        page.wait_for_selector(".flash-success")
        assert _cancelled(batch_id) == 2
    finally:
        context.close()


def test_an_admin_resets_a_password_only_after_saying_yes(app, users, live_server, page):
    log_in(page, live_server, *ADMIN)
    page.goto(f"{live_server}/admin/")
    page.locator("#users tr[data-user='staff@example.com'] button:has-text('Reset password')").click()
    page.wait_for_selector("#confirm-step")
    assert page.inner_text("#confirm-title") == "Reset the password of staff@example.com?"
    assert page.locator("#secret").count() == 0
    problems = {w: v for w, v in look_at(page, live_server, "confirm-reset-password").items() if v}
    assert problems == {}
    page.click("#confirm-no")
    page.wait_for_url(f"{live_server}/admin/")
    page.locator("#users tr[data-user='staff@example.com'] button:has-text('Reset password')").click()
    page.click("#confirm-yes")
    page.wait_for_selector("#secret")

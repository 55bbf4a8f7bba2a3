"""An address change waiting for approval in a real Chromium: the approver sees old → new on the batch page's
approval panel and on the request's panel, at 1366 and 360 px in English and Russian, and approves it."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.models import AddressChange, SigningRequest
from tests.batches import test_approval
from tests.batches.test_address_change_approval import NEW, _keys
from tests.batches.test_approval import MANAGER, _create, _post
from tests.support.looks import log_in, look_at

pytestmark = pytest.mark.browser

#: The fixture: the users' team requires approval, with a manager in it.
team = test_approval.team


@pytest.mark.parametrize(
    "language, words",
    [
        ("en", {"title": "Address changes waiting for approval", "approved": "Approved: the address is now"}),
        ("ru", {"title": "Смены адреса ждут одобрения", "approved": "Одобрено: теперь адрес"}),
    ],
)
def test_the_approver_sees_the_old_and_the_new_address_and_approves(
    app, client, team, smtp, run_jobs, live_server, page, language, words
):
    team["manager"].locale = language
    db.session.commit()
    keys = _keys(team)
    batch_id = _create(client, keys["staff"])["id"]
    assert _post(client, f"/api/v1/batches/{batch_id}/approve", keys["manager"]).status_code == 200
    run_jobs("pdf", "mail")
    anna = db.session.scalar(
        select(SigningRequest.id).where(SigningRequest.batch_id == batch_id, SigningRequest.email == "anna@example.com")
    )
    note = "Her work mailbox was closed when she left on parental leave; she asked for her private one."
    asked = _post(client, f"/api/v1/requests/{anna}/email", keys["staff"], json={"email": NEW, "note": note})
    assert asked.status_code == 202

    log_in(page, live_server, *MANAGER)
    page.goto(f"{live_server}/batches/{batch_id}")
    panel = page.locator("#address-changes")
    assert panel.locator("h2").inner_text() == words["title"]
    change = panel.locator("li.address-change")
    assert change.locator(".old-address").inner_text() == "anna@example.com"
    assert change.locator(".new-address").inner_text() == NEW
    assert note in change.inner_text()
    found = look_at(page, live_server, f"address-change-batch-{language}")
    assert found == {1366: [], 360: []}, found

    page.set_viewport_size({"width": 1366, "height": 900})
    page.click(f"#r{anna} a.open-timeline")
    own = page.locator("#request-address-changes li.address-change")
    own.wait_for()
    assert (own.locator(".old-address").inner_text(), own.locator(".new-address").inner_text()) == (
        "anna@example.com",
        NEW,
    )
    found = look_at(page, live_server, f"address-change-panel-{language}")
    assert found == {1366: [], 360: []}, found

    own.locator("[data-change-action=approve]").click()
    page.wait_for_selector(".flash-success")
    assert words["approved"] in page.locator(".flash-success").inner_text()
    assert page.locator("#address-changes").count() == 0
    look_at(page, live_server, f"address-change-approved-{language}")
    db.session.expire_all()
    assert db.session.scalar(select(AddressChange.status)) == "approved"
    run_jobs("mail")
    assert len(smtp.to(NEW)) == 1

"""A batch waiting for approval in a real Chromium: what the approver sees at 1366 and 360 px in
English and Russian, rejecting with a reason, and approving."""

from __future__ import annotations

import pytest

from bulksign.core.extensions import db
from bulksign.models import Batch
from tests.batches.test_approval import MANAGER, _create, _key, team  # noqa: F401 (team is a fixture)
from tests.support.looks import log_in, look_at

pytestmark = pytest.mark.browser


@pytest.mark.parametrize(
    "language, words",
    [
        ("en", {"status": "waiting for approval", "will": "2 invitations to sign", "rejected": "rejected by"}),
        ("ru", {"status": "ждёт одобрения", "will": "2 приглашения подписать", "rejected": "отклонена:"}),
    ],
)
def test_the_approver_checks_a_waiting_batch_then_rejects_one_and_approves_another(
    app,
    client,
    team,  # noqa: F811
    live_server,
    page,
    language,
    words,  # noqa: F811
):
    team["manager"].locale = language
    db.session.commit()
    creator = _key(team["staff"])
    first, second = _create(client, creator)["id"], _create(client, creator)["id"]

    log_in(page, live_server, *MANAGER)
    page.goto(f"{live_server}/batches/{first}")
    assert page.locator("#batch-status").inner_text() == words["status"]
    assert words["will"] in page.locator("#approval-counts").inner_text()
    assert page.locator("#approval-samples li").count() == 2
    assert page.locator(".reminder-actions").count() == 0
    assert page.locator("#preparing").count() == 0  # nothing is being prepared while it waits
    found = look_at(page, live_server, f"batch-awaiting-approval-{language}")
    assert found == {1366: [], 360: []}, found

    page.fill("#reject-reason", "The salary column is last month's.")
    page.click("#reject-batch")
    page.wait_for_selector("#approval-history")
    assert words["rejected"] in page.locator("#approval-history").inner_text()
    assert "salary column" in page.locator("#approval-history").inner_text()
    look_at(page, live_server, f"batch-rejected-{language}")

    page.goto(f"{live_server}/batches/{second}")
    page.click("#approve-batch")
    page.wait_for_selector("#approval-history")
    assert page.locator("#approve-batch").count() == 0
    db.session.expire_all()
    assert (db.session.get(Batch, first).status, db.session.get(Batch, second).status) == ("cancelled", "processing")


def test_a_manager_receives_the_approval_mail_and_approves_from_it(
    app,
    client,
    team,  # noqa: F811
    live_server,
    page,
    smtp,
    run_jobs,
):
    import re

    batch_id = _create(client, _key(team["staff"]))["id"]
    run_jobs("mail")
    (asked,) = smtp.of_kind("approval-requested")
    assert asked.rcpt_tos == [MANAGER[0]]
    link = re.search(r"https?://\S+/batches/\d+#approval", asked.text()).group(0)
    path = link.split("/batches/", 1)[1]

    log_in(page, live_server, *MANAGER)
    page.goto(f"{live_server}/")
    assert page.locator('#attention [data-kind="approval"] .n').inner_text() == "1"
    page.goto(f"{live_server}/batches/{path}")
    assert "version 1" in page.locator("#approval-facts").inner_text()
    look_at(page, live_server, "approval-from-mail")
    page.click("#approve-batch")
    page.wait_for_selector("#approval-history")
    db.session.expire_all()
    assert db.session.get(Batch, batch_id).status == "processing"

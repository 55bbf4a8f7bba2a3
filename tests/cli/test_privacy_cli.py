"""``flask teams retention`` and ``flask privacy …`` as an operator types them."""

from __future__ import annotations

from bulksign.core.extensions import db
from bulksign.signing.recipient_actions import decline, open_request
from tests.support.clock import NOW
from tests.support.signing_requests import fresh, make_sent_request


def _cli(app, *args):
    return app.test_cli_runner().invoke(args=list(args))


def test_a_team_s_retention_is_shown_set_and_checked(app, users):
    assert "signed kept for ever; unsigned kept 90 days" in _cli(app, "teams", "retention", "Default").output
    done = _cli(app, "teams", "retention", "default", "--keep-signed-days", "3650", "--keep-unsigned-days", "30")
    assert done.exit_code == 0 and "signed kept 3650 days after signing; unsigned kept 30 days" in done.output
    again = _cli(app, "teams", "retention", "Default", "--keep-signed-days", "forever")
    assert "signed kept for ever; unsigned kept 30 days" in again.output
    bad = _cli(app, "teams", "retention", "Default", "--keep-unsigned-days", "0")
    assert bad.exit_code == 1 and "from 1 to 36500" in bad.output
    assert _cli(app, "teams", "retention", "Nope").exit_code == 1


def test_hold_preview_purge_and_erase(app, users):
    r = make_sent_request(now=NOW, owner=users["staff"])
    open_request(db.session, request_id=r.id, now=NOW, ip=None, user_agent=None)
    decline(db.session, request_id=r.id, now=NOW, reason="No", ip=None, user_agent=None)
    # NOW is a month ago by the wall clock: the declined request's 7 days are over.
    assert _cli(app, "teams", "retention", "Default", "--keep-unsigned-days", "7").exit_code == 0
    assert f"batch {r.batch_id} November contracts: 0 signed, 1 unsigned" in _cli(app, "privacy", "preview").output

    assert _cli(app, "privacy", "hold", str(r.batch_id)).exit_code == 2  # a reason is required
    assert "is on legal hold" in _cli(app, "privacy", "hold", str(r.batch_id), "--reason", "Case 12").output
    assert "0 requests in 0 batches are due" in _cli(app, "privacy", "preview").output
    assert "Purged 0 requests" in _cli(app, "privacy", "purge").output
    erased = _cli(app, "privacy", "erase", "IVAN@example.com").output
    assert f"kept: request {r.id}" in erased and "legal hold: Case 12" in erased and "0 erased, 1 kept" in erased

    assert "no longer on legal hold" in _cli(app, "privacy", "release", str(r.batch_id), "--reason", "Closed").output
    erased = _cli(app, "privacy", "erase", "ivan@example.com").output
    assert f"erased: request {r.id}" in erased and "1 erased, 0 kept" in erased
    assert fresh(r.id).purged_at is not None and "ivan" not in erased.split("erased:")[0]
    assert _cli(app, "privacy", "release", "999", "--reason", "x").exit_code == 1

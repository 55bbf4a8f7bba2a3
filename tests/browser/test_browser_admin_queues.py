"""The Queues page (rq-dashboard) in a real Chromium: it loads under its own policy, and staff do not find it."""

from __future__ import annotations

import pytest

from bulksign.work.queues import QUEUE_NAMES, get_queue
from tests.support.accounts import ADMIN, STAFF
from tests.support.batches import worker_env
from tests.support.looks import log_in, shoot
from tests.support.processes import start, stop

pytestmark = pytest.mark.browser


def _watched(page) -> list[str]:
    """Console errors and CSP violations of the page from now on (there must be none)."""
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    return problems


def test_an_admin_opens_queues_from_the_menu_and_sees_the_apps_queues_and_a_worker(
    app, users, live_server, page, tmp_path
):
    # A job in each queue registers it (the worker below listens on "default" and runs that one).
    for name in QUEUE_NAMES:
        get_queue(name).enqueue("bulksign.jobs.periodic.rollup_batches", job_id=f"probe-{name}")
    worker = start(["jobs", "worker", "default"], env=worker_env(app), log=tmp_path / "worker.log")
    try:
        page.add_init_script(
            "document.addEventListener('securitypolicyviolation',"
            " e => console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI))"
        )
        problems = _watched(page)
        log_in(page, live_server, *ADMIN)
        page.click("header nav a:has-text('Queues')")
        page.wait_for_url(f"{live_server}/admin/rq/")
        # rq-dashboard fills its tables from JSON with templates it compiles in the page (eval).
        queues = page.locator("#queues")
        for name in QUEUE_NAMES:
            queues.locator("td", has_text=name).first.wait_for()
        assert "Loading" not in queues.inner_text()
        shoot(page, "admin-queues")
        page.set_viewport_size({"width": 1366, "height": 900})  # the phone width folds rq-dashboard's menu away
        page.click("#navbar-dashboard a:has-text('Workers')")
        # The worker registers once its process has started: a few seconds on a busy machine.
        page.locator("#workers tbody tr", has_text="default").first.wait_for(timeout=60_000)
        assert "Loading" not in page.locator("#workers").inner_text()
        shoot(page, "admin-queues-workers")
        assert problems == []
    finally:
        stop(worker)


def test_staff_neither_see_queues_in_the_menu_nor_open_it(app, users, live_server, page):
    # 403 as every admin page answers staff (tests/views/test_security_sweep.py holds all admin routes to it).
    log_in(page, live_server, *STAFF)
    assert page.locator("header nav a:has-text('Queues')").count() == 0
    for path in ("/admin/rq/", "/admin/rq/0/data/queues.json", "/admin/rq/static/js/underscore-umd-min.js"):
        response = page.goto(f"{live_server}{path}")
        assert response.status == 403, path
    assert "RQ-dashboard" not in page.content()
    shoot(page, "admin-queues-staff-refused")


def test_only_the_queues_pages_may_eval(client, auth):
    """The looser policy is rq-dashboard's alone: a staff page and an admin page keep the strict one."""
    auth.login_admin()
    assert "'unsafe-eval'" in client.get("/admin/rq/").headers["Content-Security-Policy"]
    assert "'unsafe-eval'" in client.get("/admin/rq/0/data/queues.json").headers["Content-Security-Policy"]
    for path in ("/admin/", "/batches/", "/admin/mailbox"):
        policy = client.get(path).headers["Content-Security-Policy"]
        assert "unsafe-eval" not in policy and "script-src 'self';" in policy, path

"""Admin-only areas: rq-dashboard, the users page (accounts, passwords, API keys), /metrics."""

from __future__ import annotations

import re

import pytest
from flask import g
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.models import ApiKey, User
from bulksign.work.queues import get_queue
from tests.support.batchdata import batch_in_states
from tests.support.clock import NOW
from tests.support.web import csrf_from

RQ_URLS = [
    "/admin/rq/",
    "/admin/rq/0/data/queues.json",
    "/admin/rq/0/data/workers.json",
    "/admin/rq/static/css/main.css",
    "/admin/rq/0/view/workers",
]


@pytest.mark.parametrize("url", RQ_URLS)
def test_rq_dashboard_sends_anonymous_visitors_to_the_login(client, users, url):
    response = client.get(url)
    assert response.status_code == 302 and "/auth/login" in response.headers["Location"]


@pytest.mark.parametrize("url", RQ_URLS)
def test_rq_dashboard_is_forbidden_to_staff(client, auth, url):
    auth.login()
    assert client.get(url).status_code == 403
    assert client.post("/admin/rq/queue/default/queued/empty").status_code == 403


def test_rq_dashboard_works_for_admins_and_its_actions_need_no_csrf_token(client, auth):
    get_queue("default").enqueue("bulksign.jobs.periodic.rollup_batches", job_id="probe-1")
    auth.login_admin()
    assert client.get("/admin/rq/").status_code == 200
    queues = client.get("/admin/rq/0/data/queues.json").get_json()
    assert any(q["name"] == "default" and q["count"] == 1 for q in queues["queues"])
    assert client.post("/admin/rq/queue/default/queued/empty").status_code == 200
    assert get_queue("default").count == 0


def _admin_page(client):
    return client.get("/admin/")


def test_admin_creates_a_staff_account_that_can_log_in(client, auth):
    auth.login_admin()
    page = _admin_page(client)
    response = client.post(
        "/admin/users",
        data={"email": "New@Example.com", "password": "long-enough-1", "role": "staff", "csrf_token": csrf_from(page)},
        follow_redirects=True,
    )
    assert "new@example.com created" in response.get_data(as_text=True)
    short = client.post(
        "/admin/users",
        data={"email": "x@example.com", "password": "short", "role": "staff", "csrf_token": csrf_from(page)},
        follow_redirects=True,
    )
    assert "at least 8 characters" in short.get_data(as_text=True)
    auth.logout()
    assert auth.login("new@example.com", "long-enough-1").status_code == 302


def test_password_reset_shows_the_new_password_once(client, auth, users):
    auth.login_admin()
    page = _admin_page(client)
    shown = client.post(
        f"/admin/users/{users['staff'].id}/password", data={"csrf_token": csrf_from(page), "confirmed": "1"}
    )
    password = re.search(r'<code id="secret"[^>]*>([^<]+)</code>', shown.get_data(as_text=True)).group(1)
    auth.logout()
    assert auth.login("staff@example.com", password).status_code == 302


def test_a_disabled_account_cannot_log_in_and_admins_cannot_disable_themselves(client, auth, users):
    auth.login_admin()
    page = _admin_page(client)
    client.post(
        f"/admin/users/{users['staff'].id}/disabled",
        data={"disabled": "1", "csrf_token": csrf_from(page), "confirmed": "1"},
    )
    own = client.post(
        f"/admin/users/{users['admin'].id}/disabled",
        data={"disabled": "1", "csrf_token": csrf_from(page)},
        follow_redirects=True,
    )
    assert "cannot disable your own account" in own.get_data(as_text=True)
    auth.logout()
    assert auth.login().status_code == 401


def test_api_key_is_shown_once_works_and_stops_working_when_revoked(app, client, auth, users):
    program = app.test_client()  # a program using the key, not the admin's browser
    auth.login_admin()
    page = _admin_page(client)
    shown = client.post(
        f"/admin/users/{users['staff'].id}/api-keys", data={"name": "erp", "csrf_token": csrf_from(page)}
    )
    secret = re.search(r'<code id="secret"[^>]*>([^<]+)</code>', shown.get_data(as_text=True)).group(1)
    headers = {"Authorization": f"Bearer {secret}"}
    assert program.get("/api/v1/me", headers=headers).get_json()["email"] == "staff@example.com"
    assert secret not in _admin_page(client).get_data(as_text=True)
    key = db.session.scalar(select(ApiKey))
    g.pop("_login_user", None)  # the test's app context is shared with the clients: forget the key's user
    revoked = client.post(f"/admin/api-keys/{key.id}/revoke", data={"csrf_token": csrf_from(page), "confirmed": "1"})
    assert revoked.status_code == 302
    assert program.get("/api/v1/me", headers=headers).status_code == 401


def test_users_page_is_for_admins_only(client, auth):
    auth.login()
    assert client.get("/admin/").status_code == 403
    # With the form token a staff member's own pages carry, so the refusal is about the role, not the form.
    csrf = csrf_from(client.get("/templates/new"))
    assert client.post("/admin/users", data={"csrf_token": csrf}).status_code == 403


def test_metrics_from_loopback_without_a_token(client, users):
    batch_in_states(db.session, statuses=["sent", "sent", "signed", "bounced"], now=NOW)
    get_queue("pdf").enqueue("bulksign.jobs.periodic.rollup_batches")
    text = client.get("/metrics", environ_base={"REMOTE_ADDR": "127.0.0.1"}).get_data(as_text=True)
    assert 'bulksign_requests{status="sent"} 2.0' in text
    assert 'bulksign_queue_jobs{queue="pdf",state="queued"} 1.0' in text
    assert "bulksign_reminders_sent_total 0.0" in text
    assert client.get("/metrics", environ_base={"REMOTE_ADDR": "10.1.2.3"}).status_code == 403


def test_metrics_with_a_token_need_the_token_even_from_loopback(make_app):
    app = make_app(METRICS_TOKEN="s3cret-metrics")
    with app.app_context():
        client = app.test_client()
        assert client.get("/metrics").status_code == 403
        assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 403
        ok = client.get(
            "/metrics", headers={"Authorization": "Bearer s3cret-metrics"}, environ_base={"REMOTE_ADDR": "10.1.2.3"}
        )
        assert ok.status_code == 200 and "bulksign_requests" in ok.get_data(as_text=True)


def test_users_are_listed_with_their_state(client, auth, users):
    auth.login_admin()
    html = _admin_page(client).get_data(as_text=True)
    assert all(u.email in html for u in db.session.scalars(select(User)))


def test_the_queues_link_is_in_the_navigation_for_admins_only(client, auth):
    auth.login()
    assert "/admin/rq/" not in client.get("/batches/").get_data(as_text=True)
    auth.logout()
    auth.login_admin()
    g.pop("_login_user", None)
    assert 'href="/admin/rq/"' in client.get("/batches/").get_data(as_text=True)


def test_metrics_behind_a_local_reverse_proxy_judge_the_forwarded_visitor(make_app):
    app = make_app(PROXY_HOPS=1)
    with app.app_context():
        client = app.test_client()
        assert client.get("/metrics", headers={"X-Forwarded-For": "198.51.100.7"}).status_code == 403
        assert client.get("/metrics", headers={"X-Forwarded-For": "127.0.0.1"}).status_code == 200


def test_the_api_keys_section_links_to_the_api_reference(client, auth):
    auth.login_admin()
    page = _admin_page(client).get_data(as_text=True)
    keys = page.index("API keys")
    assert 'href="/api/docs"' in page[keys : keys + 400]
    assert client.get("/api/docs").status_code == 200

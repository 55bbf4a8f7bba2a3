"""Security sweep: who may reach which route, CSRF, cookies, brute force, escaping, injection, traversal, leaks.

Everything runs on the real app (PostgreSQL, Redis, wkhtmltopdf, aiosmtpd, RQ workers). The route
walks read ``app.url_map``, so a new route is checked (or fails) without anyone editing this file.
"""
from __future__ import annotations

import re
import subprocess

import pytest
from werkzeug.routing import Rule

from bulksign.extensions import csrf, db
from tests.conftest import csrf_from

#: Routes open to anonymous visitors, each reviewed: add a route here only after deciding it may be public.
EXPECTED_PUBLIC = {
    "auth.login",  # the login form
    "health.healthz",  # load balancer probe: says ok or names the broken service, nothing else
    "metrics.metrics",  # its own rule: a bearer METRICS_TOKEN, or loopback when none is set
    "signing.page", "signing.document", "signing.signed_copy", "signing.sign_document",
    "signing.decline_document",  # the token in the URL is the credential
    "tracking.pixel",  # HMAC of the request id; always a GIF
    "verify.verify",  # anyone may check a document
    "webhooks.bounces",  # shared secret (404 when none is configured)
}
#: Blueprints that take no CSRF token, each reviewed: API (bearer key, no ambient cookie), inbound webhooks
#: (shared secret), rq-dashboard (its JavaScript posts without a token; admins only, same-origin checked).
EXPECTED_CSRF_EXEMPT = {"api", "api_batch_actions", "api_dashboard", "api_reminders", "api_templates",
                        "api_uploads", "webhooks", "rq_dashboard"}
ADMIN_BLUEPRINTS = ("admin", "rq_dashboard")
STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}
ARGUMENT_VALUES = {"instance_number": 0, "per_page": 10, "page": 1, "order": "asc", "registry_name": "failed",
                   "queue_name": "default", "filename": "js/app.js", "token": "x" * 43, "name": "1.gif"}


def _url(rule: Rule, **given) -> str:
    values = {arg: given.get(arg, ARGUMENT_VALUES.get(arg, 1)) for arg in rule.arguments}
    return rule.build(values, append_unknown=False)[1]


def _open(client, rule: Rule, method: str, **kwargs):
    """One request to the rule; a rule werkzeug canonicalises (308 to its twin with defaults) is followed once."""
    response = client.open(_url(rule), method=method, **kwargs)
    if response.status_code == 308:
        response = client.open(response.headers["Location"], method=method, **kwargs)
    return response


def _methods(rule: Rule) -> list[str]:
    return sorted(rule.methods - {"HEAD", "OPTIONS"})


def _is_public(app, endpoint: str) -> bool:
    return endpoint == "static" or getattr(app.view_functions[endpoint], "_bulksign_public", False)


def _rules(app, *, public: bool | None = None, blueprints: tuple[str, ...] | None = None):
    for rule in app.url_map.iter_rules():
        if public is not None and _is_public(app, rule.endpoint) != public:
            continue
        blueprint = rule.endpoint.rpartition(".")[0]
        if blueprints is not None and blueprint not in blueprints:
            continue
        yield rule


# --- who may reach what --------------------------------------------------------------------------

def test_the_public_routes_are_exactly_the_reviewed_list(app):
    public = {rule.endpoint for rule in _rules(app, public=True)} - {"static"}
    assert public == EXPECTED_PUBLIC


def test_every_other_route_refuses_anonymous_visitors_pages_to_login_api_with_401_json(app, client):
    token = csrf_from(client.get("/auth/login"))  # a valid token: the refusal must come from the login check
    checked = 0
    for rule in _rules(app, public=False):
        for method in _methods(rule):
            url = _url(rule)
            response = _open(client, rule, method, data={"csrf_token": token})
            where = (method, rule.rule, response.status_code)
            if url.startswith("/api/"):
                assert response.status_code == 401 and response.is_json, where
                assert response.get_json()["error"], where
            else:
                assert response.status_code == 302, where
                assert response.headers["Location"].startswith("/auth/login?next="), where
            checked += 1
    assert checked > 60


def test_htmx_fragments_refuse_anonymous_visitors_with_401_and_a_redirect_header(app, client):
    response = client.get("/batches/1/progress", headers={"HX-Request": "true"})
    assert response.status_code == 401 and response.headers["HX-Redirect"].startswith("/auth/login")


def test_public_routes_with_their_own_secret_refuse_without_it(make_app, users):
    app = make_app(BOUNCE_WEBHOOK_SECRET="bounce-secret", METRICS_TOKEN="metrics-token")
    client = app.test_client()
    assert client.post("/webhooks/bounces", json={"type": "bounce"}).status_code == 401
    assert client.post("/webhooks/bounces?token=wrong", json={}).status_code == 401
    assert client.get("/metrics").status_code == 403
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 403
    assert client.get("/metrics", headers={"Authorization": "Bearer metrics-token"}).status_code == 200
    # Not configured: the bounce endpoint does not exist at all.
    assert make_app().test_client().post("/webhooks/bounces", json={}).status_code == 404


def test_every_admin_route_refuses_staff_with_403(app, client, auth):
    auth.login()
    token = csrf_from(client.get("/"))
    checked = set()
    for rule in _rules(app, blueprints=ADMIN_BLUEPRINTS):
        for method in _methods(rule):
            response = _open(client, rule, method, data={"csrf_token": token})
            assert response.status_code == 403, (method, rule.rule, response.status_code)
            checked.add(rule.endpoint)
    assert {"admin.index", "admin.webhooks", "admin.create_webhook", "admin.mailbox", "admin.create_staff",
            "rq_dashboard.queues_overview", "rq_dashboard.static", "rq_dashboard.list_queues",
            "rq_dashboard.requeue_all", "rq_dashboard.empty_queue"} <= checked
    # rq-dashboard's own static files and JSON, by their real paths.
    for path in ("/admin/rq/static/js/jquery-3.5.1.min.js", "/admin/rq/0/data/queues.json", "/admin/rq/favicon.ico"):
        assert client.get(path).status_code == 403, path


def test_metrics_refuse_a_logged_in_staff_user_without_the_token(make_app, users):
    app = make_app(METRICS_TOKEN="metrics-token")
    client = app.test_client()
    page = client.get("/auth/login")
    client.post("/auth/login", data={"email": "staff@example.com", "password": "staff-password",
                                     "csrf_token": csrf_from(page)})
    assert client.get("/").status_code == 200
    assert client.get("/metrics").status_code == 403


# --- CSRF ---------------------------------------------------------------------------------------

def test_the_csrf_exemptions_are_exactly_the_reviewed_list(app):
    exempt = {bp.name for bp in csrf._exempt_blueprints} | set(csrf._exempt_views)
    assert exempt == EXPECTED_CSRF_EXEMPT


def test_every_state_changing_form_route_refuses_a_request_without_a_token(app, client, auth):
    auth.login_admin()
    checked = 0
    for rule in app.url_map.iter_rules():
        blueprint = rule.endpoint.rpartition(".")[0]
        if blueprint in EXPECTED_CSRF_EXEMPT:
            continue
        for method in sorted(set(rule.methods) & STATE_CHANGING):
            response = _open(client, rule, method, data={"anything": "1"})
            assert response.status_code == 400, (method, rule.rule, response.status_code)
            assert b"form expired" in response.data, (method, rule.rule)
            forged = _open(client, rule, method, data={"csrf_token": "forged"})
            assert forged.status_code == 400, (method, rule.rule, forged.status_code)
            checked += 1
    assert checked >= 20


def test_rq_dashboard_actions_refuse_cross_site_requests(app, client, auth):
    """Its buttons post without a CSRF token, so a request from another site must be told apart by its Origin."""
    from bulksign.extensions import get_queue

    get_queue("default").enqueue("bulksign.jobs.periodic.rollup_batches", job_id="probe-1")
    auth.login_admin()
    evil = {"Origin": "https://evil.example"}
    assert client.post("/admin/rq/queue/default/queued/empty", headers=evil).status_code == 403
    # A plain link (GET, which SameSite=Lax lets through) must not change anything either.
    assert client.get("/admin/rq/requeue/default").status_code == 405
    assert get_queue("default").count == 1
    same = {"Origin": "http://localhost"}
    assert client.post("/admin/rq/queue/default/queued/empty", headers=same).status_code == 200
    assert get_queue("default").count == 0


# --- cookies and brute force ---------------------------------------------------------------------

def _cookie(response, name: str) -> str:
    headers = [h for h in response.headers.getlist("Set-Cookie") if h.startswith(name + "=")]
    assert headers, f"no {name} cookie set"
    return headers[-1]


@pytest.mark.parametrize("secure", [False, True])
def test_session_and_remember_cookies_are_httponly_lax_and_secure_behind_tls(make_app, users, secure):
    app = make_app(SESSION_COOKIE_SECURE=secure)
    client = app.test_client()
    base = "https://localhost" if secure else "http://localhost"
    page = client.get("/auth/login", base_url=base)
    # Over https Flask-WTF also wants a same-site Referer, as a browser sends.
    response = client.post("/auth/login", base_url=base, headers={"Referer": f"{base}/auth/login"}, data={
        "email": "staff@example.com", "password": "staff-password", "remember": "1", "csrf_token": csrf_from(page)})
    assert response.status_code == 302
    for name in ("session", "remember_token"):
        cookie = _cookie(response, name)
        assert "HttpOnly" in cookie and "SameSite=Lax" in cookie, cookie
        assert ("Secure" in cookie) == secure, cookie


def test_login_signing_and_verify_are_rate_limited_with_a_friendly_page(make_app, users):
    app = make_app(LOGIN_RATE_LIMIT="3 per minute", SIGNING_RATE_LIMIT="3 per minute")
    client = app.test_client()
    token = csrf_from(client.get("/auth/login"))
    logins = [client.post("/auth/login", data={"email": "staff@example.com", "password": "guess",
                                               "csrf_token": token}) for _ in range(4)]
    assert [r.status_code for r in logins] == [401, 401, 401, 429]
    assert b"Too many attempts" in logins[-1].data and b"Traceback" not in logins[-1].data
    guesses = [client.get(f"/sign/{'g' * 42}{i}") for i in range(4)]
    assert [r.status_code for r in guesses] == [404, 404, 404, 429]
    assert b"Too many requests from your network" in guesses[-1].data
    # /verify shares the recipients' budget: a guesser cannot switch to it.
    assert client.get("/verify").status_code == 429
    assert client.post(f"/sign/{'g' * 43}/sign", data={"name": "x", "csrf_token": token}).status_code == 429

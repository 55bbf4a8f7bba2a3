"""Staff login, logout, roles, CSRF and the default-deny rule."""

from __future__ import annotations

import pytest

from bulksign.core.extensions import db
from tests.support.accounts import ADMIN, STAFF
from tests.support.web import csrf_from


def test_staff_log_in_and_see_the_dashboard(client, auth):
    response = auth.login()
    assert response.status_code == 302 and response.headers["Location"] == "/"
    page = client.get("/")
    assert b"Dashboard" in page.data and STAFF[0].encode() in page.data


@pytest.mark.parametrize(("email", "password"), [(STAFF[0], "wrong-password"), ("nobody@example.com", STAFF[1])])
def test_wrong_password_and_unknown_user_get_the_same_answer(client, auth, email, password):
    response = auth.login(email, password)
    assert response.status_code == 401
    assert b"Wrong email or password." in response.data
    assert b"Dashboard" not in client.get("/", follow_redirects=True).data


def test_login_ignores_case_and_spaces_in_the_email(client, auth):
    assert auth.login("  Staff@Example.COM ", STAFF[1]).status_code == 302


def test_a_disabled_account_cannot_log_in(client, auth, users):
    users["staff"].disabled = True
    db.session.commit()
    assert auth.login().status_code == 401


def test_logout_ends_the_session(client, auth):
    auth.login()
    auth.logout()
    response = client.get("/")
    assert response.status_code == 302 and "/auth/login" in response.headers["Location"]


def test_login_without_csrf_token_is_refused_with_a_page(client, users):
    response = client.post("/auth/login", data={"email": STAFF[0], "password": STAFF[1]})
    assert response.status_code == 400
    assert b"The form expired" in response.data and b"Traceback" not in response.data


def test_logout_without_csrf_token_is_refused(client, auth):
    auth.login()
    assert client.post("/auth/logout").status_code == 400
    assert client.get("/").status_code == 200


def test_login_redirects_only_within_the_site(client, users):
    page = client.get("/auth/login")
    response = client.post(
        "/auth/login?next=//evil.example.com/x",
        data={"email": STAFF[0], "password": STAFF[1], "csrf_token": csrf_from(page)},
    )
    assert response.headers["Location"] == "/"


def test_failed_logins_are_rate_limited(make_app, users):
    app = make_app(LOGIN_RATE_LIMIT="3 per minute")
    client = app.test_client()
    page = client.get("/auth/login")
    token = csrf_from(page)
    codes = [
        client.post("/auth/login", data={"email": STAFF[0], "password": "bad", "csrf_token": token}).status_code
        for _ in range(4)
    ]
    assert codes == [401, 401, 401, 429]
    limited = client.post("/auth/login", data={"email": STAFF[0], "password": STAFF[1], "csrf_token": token})
    assert limited.status_code == 429 and b"Too many attempts" in limited.data
    assert 0 < int(limited.headers["Retry-After"]) <= 60


def test_admin_pages_refuse_staff_and_send_anonymous_to_login(client, auth):
    anonymous = client.get("/admin/")
    assert anonymous.status_code == 302 and "/auth/login" in anonymous.headers["Location"]
    auth.login()
    assert client.get("/admin/").status_code == 403
    auth.logout()
    auth.login_admin()
    page = client.get("/admin/")
    assert page.status_code == 200 and STAFF[0].encode() in page.data


def test_every_non_public_route_refuses_anonymous_visitors(app, client):
    public = {"static", "auth.login", "health.healthz"}
    checked = 0
    for rule in app.url_map.iter_rules():
        view = app.view_functions[rule.endpoint]
        if rule.endpoint in public or getattr(view, "_bulksign_public", False):
            continue
        url = rule.build({arg: 1 for arg in rule.arguments}, append_unknown=False)[1] if rule.arguments else rule.rule
        method = "GET" if "GET" in rule.methods else sorted(rule.methods - {"HEAD", "OPTIONS"})[0]
        response = client.open(url, method=method)
        assert response.status_code in (302, 400, 401), (rule.rule, response.status_code)
        if response.status_code == 302:
            assert "/auth/login" in response.headers["Location"]
        checked += 1
    assert checked >= 3


def test_the_staff_user_picks_russian_and_the_page_follows(client, auth, users):
    auth.login()
    page = client.get("/")
    client.post("/auth/language", data={"language": "ru", "next": "/", "csrf_token": csrf_from(page)})
    assert db.session.get(type(users["staff"]), users["staff"].id).locale == "ru"


def test_api_needs_a_valid_bearer_key(client, users, app):
    from bulksign.models import utcnow
    from bulksign.people.users import create_api_key

    assert client.get("/api/v1/me").status_code == 401
    assert client.get("/api/v1/me", headers={"Authorization": "Bearer nope"}).get_json()["error"]["message"]
    key = create_api_key(db.session, user=users["admin"], name="ci", now=utcnow())
    db.session.commit()
    response = client.get("/api/v1/me", headers={"Authorization": f"Bearer {key.secret}"})
    assert response.status_code == 200 and response.get_json()["email"] == ADMIN[0]
    assert key.secret not in str(key.key.key_hash)

"""/healthz for load balancers, and error pages that are pages of the app."""

from __future__ import annotations

from flask import abort


def test_healthz_is_ok_when_database_and_redis_answer(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok", "checks": {"database": "ok", "redis": "ok"}}


def test_healthz_is_503_and_names_redis_when_it_is_down(make_app):
    app = make_app(REDIS_URL="redis://127.0.0.1:1/0")
    response = app.test_client().get("/healthz")
    assert response.status_code == 503
    body = response.get_json()
    assert body["checks"]["database"] == "ok" and "refused" in body["checks"]["redis"].lower()


def test_unknown_page_is_a_friendly_404(client, auth):
    auth.login()
    response = client.get("/no/such/page")
    assert response.status_code == 404 and b"There is nothing at this address." in response.data


def test_an_unexpected_error_is_a_page_without_a_stack_trace(make_app):
    app = make_app()

    @app.get("/boom-for-test")
    def boom():
        raise RuntimeError("secret internals")

    boom._bulksign_public = True
    response = app.test_client().get("/boom-for-test")
    assert response.status_code == 500
    assert b"Something went wrong" in response.data
    assert b"secret internals" not in response.data and b"Traceback" not in response.data


def test_api_errors_are_json(make_app):
    app = make_app()

    @app.get("/api/v1/teapot-for-test")
    def teapot():
        abort(404, "No such thing.")

    teapot._bulksign_public = True
    response = app.test_client().get("/api/v1/teapot-for-test")
    assert response.status_code == 404


def test_every_response_carries_a_request_id(client):
    assert len(client.get("/healthz").headers["X-Request-ID"]) == 32

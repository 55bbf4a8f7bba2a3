"""Unhandled errors reach Sentry (a real HTTP endpoint on loopback) with their request or job id, and no secrets."""

from __future__ import annotations

import json

import pytest
import sentry_sdk
from flask import g
from rq import Retry

from bulksign.core.error_tracking import scrub
from bulksign.work.queues import get_queue
from tests.support.sentry import SentryServer
from tests.support.workers import run_burst_worker

TOKEN = "Zx9SecretSigningToken_abc123"
WEBHOOK_SECRET = "bounce-shared-secret-42"
API_KEY = "bsk_live_api_key_do_not_leak"
COOKIE = "stolen-session-cookie"


@pytest.fixture
def sentry():
    server = SentryServer()
    server.start()
    yield server
    sentry_sdk.get_client().close(timeout=2)
    sentry_sdk.get_global_scope().set_client(None)  # the SDK is process-wide: later tests run without it
    server.stop()


@pytest.fixture
def tracked_app(make_app, sentry):
    app = make_app(SENTRY_DSN=sentry.dsn, SENTRY_ENVIRONMENT="staging", BOUNCE_WEBHOOK_SECRET=WEBHOOK_SECRET)
    with app.app_context():
        yield app


def explode(request_id: int) -> None:
    """A job that fails every time, naming a recipient and a signing link in its message."""
    raise RuntimeError(f"could not mail alice@example.com the link http://app/sign/{TOKEN} for {request_id}")


def _sent(sentry: SentryServer, count: int) -> list[dict]:
    sentry_sdk.flush(timeout=10)
    assert len(sentry.events) == count, [e.get("exception") for e in sentry.events]
    return sentry.events


def _assert_no_secrets(sentry: SentryServer) -> None:
    everything = b"".join(sentry.raw)
    for secret in (TOKEN, WEBHOOK_SECRET, API_KEY, COOKIE, "alice@example.com"):
        assert secret.encode() not in everything, secret


def test_an_error_in_a_view_reaches_sentry_with_its_request_id_and_without_the_token(tracked_app, sentry, monkeypatch):
    def broken_lookup(*args, **kwargs):
        raise RuntimeError(f"token lookup failed for /sign/{TOKEN}?token={WEBHOOK_SECRET} (alice@example.com)")

    monkeypatch.setattr("bulksign.views.recipient.signing.find_by_token", broken_lookup)
    client = tracked_app.test_client()
    client.set_cookie("session", COOKIE)
    response = client.get(
        f"/sign/{TOKEN}?token={WEBHOOK_SECRET}",
        headers={"Authorization": f"Bearer {API_KEY}", "X-Request-ID": "req0123456789abc"},
    )
    assert response.status_code == 500

    (event,) = _sent(sentry, 1)
    assert event["tags"]["request_id"] == "req0123456789abc" == response.headers["X-Request-ID"]
    assert event["environment"] == "staging" and event["release"].startswith("bulksign@")
    assert event["exception"]["values"][-1]["type"] == "RuntimeError"
    assert "/sign/<token>" in event["request"]["url"]
    _assert_no_secrets(sentry)


def test_an_error_in_the_bounce_webhook_keeps_its_token_out_of_sentry(tracked_app, sentry, monkeypatch):
    def broken_parse(payload):
        raise ValueError("provider changed its format")

    monkeypatch.setattr("bulksign.views.webhooks_in.parse_bounce", broken_parse)
    response = tracked_app.test_client().post(f"/webhooks/bounces?token={WEBHOOK_SECRET}", json={"email": "a@b.c"})
    assert response.status_code == 500

    (event,) = _sent(sentry, 1)
    assert event["tags"]["request_id"] == response.headers["X-Request-ID"]
    assert "token=<redacted>" in event["request"]["query_string"]
    _assert_no_secrets(sentry)


def test_a_failing_job_reaches_sentry_when_retried_and_when_it_finally_fails(tracked_app, sentry):
    # Enqueued while answering a request (as staff actions do): the job's errors name that request.
    with tracked_app.test_request_context("/batches/1/remind", method="POST"):
        g.request_id = "req0fromthepage1"
        job = get_queue("default").enqueue("tests.core.test_error_tracking.explode", 7, retry=Retry(max=1))
    run_burst_worker("default")

    retried, failed = _sent(sentry, 2)
    assert retried["level"] == "warning" and failed["level"] == "error"
    assert retried["tags"]["job_id"] == failed["tags"]["job_id"] == job.id
    assert retried["tags"]["request_id"] == failed["tags"]["request_id"] == "req0fromthepage1"
    assert "/sign/<token>" in failed["exception"]["values"][-1]["value"]
    _assert_no_secrets(sentry)


def test_an_error_in_the_scheduler_reaches_sentry(tracked_app, sentry, monkeypatch):
    class BrokenScheduler:
        def __init__(self, **kwargs):
            pass

        def run(self):
            raise RuntimeError("scheduler lost its mind")

    monkeypatch.setattr("bulksign.jobs.schedule.periodic_scheduler_class", lambda: BrokenScheduler)
    result = tracked_app.test_cli_runner().invoke(args=["jobs", "scheduler"])
    assert isinstance(result.exception, RuntimeError)

    (event,) = _sent(sentry, 1)
    assert event["exception"]["values"][-1]["value"] == "scheduler lost its mind"


def test_recipients_addresses_are_kept_only_when_pii_is_allowed(app):
    event = {
        "exception": {"values": [{"value": "refused <bob@example.org>"}]},
        "request": {
            "url": f"http://x/sign/{TOKEN}",
            "headers": {"Cookie": "a=b", "X-Api-Key": API_KEY},
            "data": {"password": "hunter2"},
        },
        "extra": {"mail": {"html_body": "<p>Dear Bob</p>", "to": "bob@example.org"}},
    }
    hidden = json.dumps(scrub(json.loads(json.dumps(event)), send_pii=False))
    shown = json.dumps(scrub(json.loads(json.dumps(event)), send_pii=True))
    assert "bob@example.org" not in hidden and "bob@example.org" in shown
    for text in (hidden, shown):
        assert TOKEN not in text and API_KEY not in text and "hunter2" not in text and "Dear Bob" not in text
        assert "a=b" not in text


def test_no_dsn_means_no_sentry(make_app):
    make_app(SENTRY_DSN="")
    assert sentry_sdk.get_client().is_active() is False


# Handled failures that only the operator can mend reach Sentry, one issue per kind of failure.


def _fingerprints(sentry: SentryServer) -> list[list[str]]:
    sentry_sdk.flush(timeout=10)
    return [event.get("fingerprint") for event in sentry.events]


def test_unwritable_storage_fails_the_renders_and_is_one_sentry_issue(make_app, sentry, tmp_path):
    from bulksign.batches.rendering import render_chunk
    from tests.support.batches import make_batch, request_ids, requests_of
    from tests.support.clock import NOW

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    app = make_app(SENTRY_DSN=sentry.dsn, STORAGE_URL=str(blocker / "storage"), RENDER_MAX_ATTEMPTS=1)
    with app.app_context():
        batch = make_batch(now=NOW, recipients=3)
        first, *rest = request_ids(batch)
        assert render_chunk([first], app=app) == "failed 1"
        assert render_chunk(rest, app=app) == "failed 2"
        assert all(
            r.status == "failed" and "Could not write the document to storage" in r.error_message
            for r in requests_of(batch)
        )

    # Two chunks, two events; whatever the keys in their messages, one fingerprint: one issue.
    assert _fingerprints(sentry) == [["storage-write", "local"]] * 2
    assert [e["extra"]["failed_items"] for e in sentry.events] == [1, 2]
    assert {e["exception"]["values"][-1]["type"] for e in sentry.events} == {"StorageError"}
    assert all(e["tags"]["stage"] == "render" and e["level"] == "error" for e in sentry.events)


def test_a_template_error_is_for_staff_and_not_for_sentry(make_app, sentry, tmp_path):
    from bulksign.batches.rendering import render_chunk
    from tests.support.batches import make_batch, request_ids, requests_of
    from tests.support.clock import NOW

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    app = make_app(SENTRY_DSN=sentry.dsn, STORAGE_URL=str(blocker / "storage"), RENDER_MAX_ATTEMPTS=1)
    with app.app_context():
        # The first row's salary (1000) divides by zero: staff mend that; the second row meets the broken storage.
        batch = make_batch(now=NOW, recipients=2, html="<p>{{ 1 // (salary|int - 1000) }}</p>")
        assert render_chunk(request_ids(batch), app=app) == "failed 2"
        template_error, storage_error = requests_of(batch)
        # Said once, with the reason in plain words (the sandbox's message already starts with it).
        assert template_error.error_message.count("could not be filled in") == 1
        assert "divides by zero" in template_error.error_message
        assert "Could not write the document to storage" in storage_error.error_message

    # Only the storage's failure was sent, counting one item: the template error stays on the batch page.
    (event,) = _sent(sentry, 1)
    assert event["fingerprint"] == ["storage-write", "local"] and event["extra"]["failed_items"] == 1
    assert "ZeroDivisionError" not in json.dumps(event)


def test_a_mail_server_refusing_our_login_is_its_own_sentry_issue(make_app, sentry):
    from bulksign.work.pipeline import enqueue_renders
    from tests.support.batches import make_batch, request_ids, requests_of, run_worker
    from tests.support.clock import NOW
    from tests.support.smtp import SmtpServer

    server = SmtpServer(login=("bulksign", "the-right-one"))
    server.start()
    try:
        app = make_app(
            SENTRY_DSN=sentry.dsn, MAIL_PORT=server.port, MAIL_USERNAME="bulksign", MAIL_PASSWORD="a-stale-one"
        )
        with app.app_context():
            batch = make_batch(now=NOW, recipients=2)
            enqueue_renders(request_ids(batch))
            run_worker(app, "pdf", "mail")
            assert all("535" in r.error_message for r in requests_of(batch))
    finally:
        server.stop()

    assert server.received == []
    fingerprints = _fingerprints(sentry)
    assert fingerprints and set(map(tuple, fingerprints)) == {("smtp-auth", "127.0.0.1")}
    assert {e["exception"]["values"][-1]["type"] for e in sentry.events} == {"SMTPAuthenticationError"}
    _assert_no_secrets(sentry)

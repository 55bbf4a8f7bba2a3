"""Logs are structured and never carry a signing token."""

from __future__ import annotations

import http.client
import json
import logging
import subprocess
import sys
from pathlib import Path

import requests

from bulksign.core.config import BASE_DIR
from bulksign.core.logs import JsonFormatter, redact_path, redact_query
from tests.support.processes import first_answer
from tests.support.services import free_port

ROOT = BASE_DIR


def test_secret_query_values_are_redacted():
    assert redact_query("token=s3cret&x=1") == "token=<redacted>&x=1"
    assert redact_query("status=sent&q=Token") == "status=sent&q=Token"
    # A search for a person's address shows its domain only.
    assert redact_query("q=anna.karenina%40example.com&page=2") == "q=***@example.com&page=2"
    assert redact_query("q=Anna+anna%40mail.example.org") == "q=Anna+***@mail.example.org"


def test_signing_paths_are_redacted():
    assert redact_path("/sign/abcDEF123") == "/sign/<token>"
    assert redact_path("/sign/abcDEF123/document") == "/sign/<token>/document"
    assert redact_path("/batches/3") == "/batches/3"
    assert redact_path("//sign/abcDEF123") == redact_path("/%73ign/abcDEF123") == "/sign/<token>"
    assert redact_query("%74oken=s3cret") == "%74oken=<redacted>"


def test_a_log_line_is_one_json_object_with_the_fields():
    record = logging.LogRecord("bulksign.x", logging.INFO, __file__, 1, "batch finished", None, None)
    record.fields = {"batch_id": 7}
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "batch finished" and line["batch_id"] == 7 and line["level"] == "info"


def test_gunicorn_access_log_hides_signing_tokens_and_the_bounce_secret(tmp_path, pg_url, redis_server, _schema):
    port = free_port()
    env = {
        "DATABASE_URL": pg_url,
        "REDIS_URL": redis_server.url,
        "SECRET_KEY": "x",
        "BULKSIGN_VAR_DIR": str(tmp_path),
        "PATH": "/usr/bin:/bin",
    }
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("gunicorn")), "--bind", f"127.0.0.1:{port}", "--workers", "1", "wsgi:app"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        secret = "SecretTokenValue1234567890abcdefghijklmnop"
        assert first_answer(f"http://127.0.0.1:{port}/sign/{secret}?x=1").status_code == 404
        # Providers that only take a URL carry the bounce webhook's secret in ?token=.
        assert (
            requests.post(f"http://127.0.0.1:{port}/webhooks/bounces?token={secret}", json={}, timeout=30).status_code
            == 404
        )
        # The same routes spelt the way the router reads them but a prefix check does not; sent byte for
        # byte (requests would normalise %74 to t).
        for method, target in [
            ("GET", p)
            for p in (
                f"//sign/{secret}",
                f"/sign/%{ord(secret[0]):x}{secret[1:]}",
                f"/%73ign/{secret}",
                f"/%73ign/{secret}/document",
                f"/t/1.{secret}.gif",
                f"//t/1.{secret}.gif",
            )
        ] + [
            ("POST", f"/webhooks/bounces?{q}")
            for q in (f"%74oken={secret}", f"TOKEN={secret}", f"%74%6Fken={secret}&x=1")
        ]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request(method, target, body=b"{}", headers={"Content-Type": "application/json"})
            assert conn.getresponse().status < 500, target
            conn.close()
    finally:
        proc.terminate()
        output = proc.communicate(timeout=15)[0]
    assert "/sign/<token>" in output and "/webhooks/bounces?token=<redacted>" in output
    assert "/webhooks/bounces?%74oken=<redacted>" in output
    assert secret not in output and secret[1:] not in output


def test_the_access_log_survives_a_request_gunicorn_answers_itself_after_killing_its_worker():
    """gunicorn logs the 500 of a timed-out worker with an environ that has no PATH_INFO nor QUERY_STRING."""
    from datetime import timedelta
    from types import SimpleNamespace

    from gunicorn.config import Config

    from bulksign.core.gunicorn_logging import RedactingLogger

    logger = RedactingLogger(Config())
    environ = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": "/sign/SecretTokenValue",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
    }
    resp = SimpleNamespace(status="500 Internal Server Error", headers=[], sent=0)
    atoms = logger.atoms(resp, SimpleNamespace(headers=[]), environ, timedelta(seconds=30))
    assert atoms["s"] == "500" and not atoms["U"] and "SecretTokenValue" not in str(atoms["U"])


def test_the_development_servers_request_lines_hide_tokens_however_the_path_is_spelt():
    from bulksign.views.recipient.recipient_headers import RedactSigningTokens

    for path in ("/sign/SecretTok3n", "//sign/SecretTok3n", "/%73ign/SecretTok3n", "/sign/%53ecretTok3n/document"):
        record = logging.LogRecord(
            "werkzeug", logging.INFO, __file__, 1, '127.0.0.1 - - "GET %s HTTP/1.1" 200 -', (path,), None
        )
        RedactSigningTokens().filter(record)
        assert "ecretTok3n" not in record.getMessage() and "/sign/<token>" in record.getMessage(), path

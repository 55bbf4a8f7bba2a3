"""Behind PgBouncer in transaction pooling (how the README deploys it): every process stays correct.

The suite's app connects through a private PgBouncer (``pool_mode = transaction``, see
``tests/support/pgbouncer.py``), so every test runs on it; these tests aim at what a pooler breaks.
"""

from __future__ import annotations

from datetime import timedelta

from bulksign.core.extensions import db
from bulksign.models import utcnow
from tests.support.signing_requests import make_sent_request

#: psycopg prepares a statement server-side after it ran this many times on one connection.
PSYCOPG_PREPARE_THRESHOLD = 5


def test_a_signing_link_opens_again_and_again_from_two_processes_behind_pgbouncer(app, users, make_app):
    """Two processes (web hosts, a worker) share PgBouncer's server connections one transaction at a time."""
    sent = make_sent_request(now=utcnow() - timedelta(minutes=5), owner=users["staff"])
    web_a, web_b = app.test_client(), make_app().test_client()
    for _ in range(PSYCOPG_PREPARE_THRESHOLD + 2):
        for client in (web_a, web_b):
            response = client.get(f"/sign/{sent.token}")
            assert response.status_code == 200, response.data[-500:]
            assert "Employment contract" in response.get_data(as_text=True)


def test_the_app_keeps_no_prepared_statements_on_the_server(app, users):
    make_sent_request(now=utcnow(), owner=users["staff"])
    with db.engine.connect() as conn:
        for _ in range(PSYCOPG_PREPARE_THRESHOLD + 2):
            conn.exec_driver_sql("SELECT count(*) FROM signing_requests WHERE status = %s", ("sent",))
        prepared = conn.exec_driver_sql("SELECT count(*) FROM pg_prepared_statements").scalar()
    assert prepared == 0

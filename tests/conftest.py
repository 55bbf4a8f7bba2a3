"""Fixtures on real services: PostgreSQL, Redis, an SMTP server, RQ workers, a live server, Chromium."""

from __future__ import annotations

import os
import tempfile
import threading
import warnings

import pytest

# Embedded defaults (secret key file, storage, mailbox) go to a throw-away folder, never the checkout.
os.environ.setdefault("BULKSIGN_VAR_DIR", tempfile.mkdtemp(prefix="bulksign-var-"))

from bulksign.app import create_app  # noqa: E402
from bulksign.core.extensions import db  # noqa: E402
from bulksign.models import utcnow  # noqa: E402
from bulksign.people.users import create_user  # noqa: E402
from tests.support.accounts import ADMIN, DEFAULT_TEAM, STAFF  # noqa: E402
from tests.support.pgbouncer import PgBouncer  # noqa: E402
from tests.support.services import PG_ADMIN_URL, RedisServer, postgres_database  # noqa: E402
from tests.support.smtp import SmtpServer  # noqa: E402
from tests.support.url_builders import install as share_url_builders  # noqa: E402
from tests.support.web import AuthActions  # noqa: E402

share_url_builders()


def pytest_collection_modifyitems(items):
    """Slow tests first, the slowest (``slow(seconds=...)``) before the others: shared between processes
    (``make test``), the soak then runs beside the short tests instead of starting last and leaving one
    process working alone for minutes."""

    def expected_seconds(item) -> float:
        marker = item.get_closest_marker("slow")
        return 0 if marker is None else marker.kwargs.get("seconds", 10)

    items.sort(key=expected_seconds, reverse=True)


@pytest.fixture(scope="session")
def pg_url():
    with postgres_database() as url:
        yield url


@pytest.fixture(scope="session")
def pgbouncer():
    """A private PgBouncer in transaction pooling in front of the test server."""
    bouncer = PgBouncer(PG_ADMIN_URL)
    bouncer.start()
    yield bouncer
    bouncer.stop()


@pytest.fixture(scope="session")
def app_db_url(pg_url, pgbouncer):
    """What the app under test connects to: the test database through PgBouncer, as the README deploys it."""
    return pgbouncer.url_for(pg_url)


@pytest.fixture(scope="session")
def redis_server():
    server = RedisServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def smtp_server():
    server = SmtpServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def smtp(smtp_server):
    smtp_server.reset()
    yield smtp_server
    smtp_server.reset()


@pytest.fixture(scope="session")
def _schema(app_db_url, redis_server, tmp_path_factory):
    app = create_app(_test_config(app_db_url, redis_server, 2525, tmp_path_factory.mktemp("schema")))
    with app.app_context():
        db.create_all()
        tables = [t.name for t in reversed(db.metadata.sorted_tables)]
        db.engine.dispose()
    return tables


def _test_config(database_url, redis_server, smtp_port, folder) -> dict:
    return {
        "TESTING": True,
        "SECRET_KEY": "test-secret-key",
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_server.url,
        "APP_URL": "http://127.0.0.1:5000",
        "MAIL_SERVER": "127.0.0.1",
        "MAIL_PORT": smtp_port,
        "MAIL_TIMEOUT_SECONDS": 5,
        "MAIL_RATE_PER_MINUTE": 0,
        "STORAGE_URL": str(folder / "storage"),
        "VAR_DIR": str(folder),
        "LOG_JSON": False,
        # scrypt costs 0.24 s a hash here; the suite makes users and logs in hundreds of times.
        "PASSWORD_HASH_METHOD": "pbkdf2:sha256:1000",
        # Route walks and the API fuzzer call from one address many times a minute; tests/test_api_contract.py
        # checks the limit itself with a small one.
        "API_RATE_LIMIT": "100000 per minute",
    }


@pytest.fixture(scope="session")
def _cleaning_engine(pg_url):
    """One connection for emptying the tables before each test: connecting anew took ten times the DELETEs."""
    from sqlalchemy import create_engine

    engine = create_engine(pg_url, pool_size=1, pool_pre_ping=True)
    yield engine
    engine.dispose()


@pytest.fixture
def make_app(_cleaning_engine, app_db_url, redis_server, smtp_server, _schema, tmp_path):
    """Build an app on the test services; ``make_app(MAIL_RATE_PER_MINUTE=60)`` changes settings."""
    created = []

    def factory(**overrides):
        config = _test_config(app_db_url, redis_server, smtp_server.port, tmp_path)
        config.update(overrides)
        app = create_app(config)
        created.append(app)
        return app

    with db_cleaned(_cleaning_engine, redis_server, _schema, tmp_path):
        yield factory
    for app in created:
        with app.app_context():
            db.session.remove()
            db.engine.dispose()


class db_cleaned:
    """Empty every table and Redis before a test, so each test starts from nothing.

    DELETE, children first, then sequences back to 1: as clean as ``TRUNCATE ... RESTART IDENTITY`` but
    ~35x cheaper on tables this small (TRUNCATE replaces each table's files: 0.18 s a test, 3 minutes a suite).
    All in one round trip on the session's one connection: 15 ms instead of 170 ms a test on a loaded machine.
    """

    def __init__(self, engine, redis_server, tables, folder):
        self.engine, self.redis_server, self.tables, self.folder = engine, redis_server, tables, folder

    def __enter__(self):
        from redis import Redis

        from tests.support.processes import kill_left_over

        for command in kill_left_over(f"REDIS_URL={self.redis_server.url}"):
            warnings.warn(f"an earlier test left this running, killed: {command}", stacklevel=1)

        with self.engine.begin() as conn:
            conn.exec_driver_sql(
                "".join(f"DELETE FROM {table};" for table in self.tables)
                + "SELECT setval(c.oid, 1, false) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE c.relkind = 'S' AND n.nspname = current_schema()"
            )
        Redis.from_url(self.redis_server.url).flushall()

    def __exit__(self, *exc):
        return False


@pytest.fixture
def app(make_app):
    app = make_app()
    with app.app_context():
        yield app


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def users(app):
    """An admin and a staff user, by role, both in the team "Default" (as the migration leaves an installation)."""
    from bulksign.people.teams import add_member, create_team

    admin = create_user(db.session, email=ADMIN[0], password=ADMIN[1], role="admin", now=utcnow())
    staff = create_user(db.session, email=STAFF[0], password=STAFF[1], role="staff", now=utcnow())
    team = create_team(db.session, name=DEFAULT_TEAM, now=utcnow())
    for user in (admin, staff):
        add_member(db.session, team=team, user=user, by=None, now=utcnow())
    db.session.commit()
    return {"admin": admin, "staff": staff}


@pytest.fixture
def auth(client, users):
    return AuthActions(client)


@pytest.fixture
def run_jobs(app):
    """Run real RQ workers in burst mode until the given queues are empty; returns how many jobs ran."""
    from tests.support.workers import run_burst_worker

    return run_burst_worker


@pytest.fixture
def live_server(app):
    """The app served over real HTTP on a free loopback port (threaded), for browsers and HTTP clients."""
    from werkzeug.serving import make_server

    from tests.support.services import free_port

    port = free_port()
    app.config["APP_URL"] = f"http://127.0.0.1:{port}"
    server = make_server("127.0.0.1", port, app, threaded=True)
    # shutdown() waits for the loop's next look at its stop flag: every half second by default, per test.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield app.config["APP_URL"]
    server.shutdown()
    thread.join(timeout=10)


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium driven by Playwright (no browser download)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"),
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()

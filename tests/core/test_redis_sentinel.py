"""Redis behind Sentinel: a failover mid-batch loses no recipient and sends nobody a second Message-ID."""

from __future__ import annotations

from collections import defaultdict

import pytest
from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from sqlalchemy import select

from bulksign.core.extensions import db, get_redis, limiter
from bulksign.jobs.periodic import reconcile_stuck_work
from bulksign.models import OutgoingMail, utcnow
from bulksign.work.pipeline import enqueue_renders
from bulksign.work.scheduler_ticks import KEY as SCHEDULER_TICK_KEY
from tests.support.batches import make_batch, request_ids, requests_of, worker_env
from tests.support.clock import NOW
from tests.support.processes import start, stop, terminate_and_time, wait_for
from tests.support.sentinel import SentinelSetup


@pytest.fixture
def sentinel():
    setup = SentinelSetup()
    setup.start()
    yield setup
    setup.stop()


def test_every_redis_user_reaches_the_master_the_sentinel_names(make_app, sentinel):
    app = make_app(REDIS_URL=sentinel.url)
    master = Redis(port=sentinel.master.port)
    with app.app_context():
        get_redis().set("bulksign:probe", "1")
        assert master.get("bulksign:probe") == b"1"
        assert app.redis_conn.get("bulksign:probe") == b"1"  # rq-dashboard's connection
        client = app.test_client()
        auth_client_login(client)
        assert client.get("/admin/rq/").status_code == 200
        # Rate limits count in the master too (Flask-Limiter's own Sentinel storage).
        assert type(limiter.storage).__name__ == "RedisSentinelStorage"
        assert any(key.startswith(b"LIMITS") for key in master.keys("*"))


def auth_client_login(client):
    from bulksign.people.users import create_user
    from tests.support.accounts import ADMIN
    from tests.support.web import csrf_from

    create_user(db.session, email=ADMIN[0], password=ADMIN[1], role="admin", now=utcnow())
    db.session.commit()
    page = client.get("/auth/login")
    client.post("/auth/login", data={"email": ADMIN[0], "password": ADMIN[1], "csrf_token": csrf_from(page)})


@pytest.mark.slow(seconds=40)
def test_a_batch_completes_through_a_failover_without_a_second_invitation(make_app, smtp, sentinel, tmp_path):
    settings = {
        "RENDER_CHUNK_SIZE": 2,
        "SEND_CHUNK_SIZE": 2,
        "MAIL_RATE_PER_MINUTE": 120,
        "RETRY_BACKOFF_SECONDS": 1,
        "RECONCILE_AFTER_SECONDS": 3,
    }
    app = make_app(REDIS_URL=sentinel.url, **settings)
    with app.app_context():
        batch = make_batch(now=NOW, recipients=20)
        enqueue_renders(request_ids(batch))
        env = {**worker_env(app), **{k: str(v) for k, v in settings.items()}}
        workers = start(
            ["jobs", "worker", "--processes", "2", "pdf", "mail", "default"], env=env, log=tmp_path / "workers.log"
        )
        scheduler = start(["jobs", "scheduler", "--interval", "1"], env=env, log=tmp_path / "scheduler.log")
        try:
            # Two a second at most (the throttle): the batch takes ten seconds to mail, so the master dies mid-batch.
            wait_for(
                lambda: [r.status for r in requests_of(batch)].count("sent") >= 3,
                timeout=120,
                what="the first invitations to go out",
            )
            assert [r.status for r in requests_of(batch)].count("sent") < 20
            sentinel.fail_over()

            def done() -> bool:
                # The reconciler (a periodic job; here called directly, often) re-queues what Redis lost.
                try:
                    reconcile_stuck_work(now=utcnow())
                except RedisConnectionError:
                    pass  # the client is still finding the new master
                return {r.status for r in requests_of(batch)} == {"sent"}

            # A chunk whose worker died with the old master looks alive to the reconciler until its last beat
            # is half a minute old (pipeline.BEAT_TRUST_SECONDS): then it is queued again.
            wait_for(done, timeout=300, what="the batch to be sent after the failover", every=1)
            promoted = Redis(port=sentinel.replica.port)
            wait_for(
                lambda: float(promoted.get(SCHEDULER_TICK_KEY) or 0) > utcnow().timestamp() - 10,
                timeout=60,
                what="the scheduler to tick on the promoted master",
            )
            assert terminate_and_time(workers) < 10 and terminate_and_time(scheduler) < 10
        finally:
            stop(workers)
            stop(scheduler)

        invitations = {m.message_id for m in db.session.scalars(select(OutgoingMail).filter_by(kind="invitation"))}
        per_recipient = defaultdict(set)
        for message in smtp.of_kind("invitation"):
            per_recipient[message.rcpt_tos[0]].add(message.message_id)
        # Everyone got their invitation; a second one (a crash between the send and its record) would carry
        # the same Message-ID: nobody holds two different ones.
        assert len(per_recipient) == 20 and all(len(ids) == 1 for ids in per_recipient.values())
        assert set().union(*per_recipient.values()) == invitations


def test_a_malformed_sentinel_url_is_one_clear_line_naming_the_variable(tmp_path):
    import os
    import subprocess
    import sys

    from bulksign.core.config import BASE_DIR

    result = subprocess.run(
        [sys.executable, "-m", "flask", "jobs", "worker", "--burst"],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            "FLASK_APP": "wsgi",
            "DATABASE_URL": f"sqlite:///{tmp_path}/x.db",
            "REDIS_URL": "redis+sentinel://127.0.0.1/bulksign",
        },
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "Configuration error: REDIS_URL sentinel '127.0.0.1' must be host:port, "
        "got 'redis+sentinel://127.0.0.1/bulksign'"
    )

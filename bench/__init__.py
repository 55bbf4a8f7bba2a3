"""Benchmarks: each ``bench/bench_*.py`` defines ``run(*, small: bool) -> list[Figure]``.

``make bench`` (``python -m bench``) runs them all at full size and prints one table; the test
suite runs each with ``small=True`` so CI proves they still work. Targets live here, not in
timed tests: these machines are noisy, so each figure carries a ratio to a baseline measured in
the same run where there is one.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    #: What was measured, e.g. "validate 100k rows".
    name: str
    value: float
    unit: str
    #: The target as text, e.g. "< 8 s"; empty when there is none.
    target: str = ""
    #: Whether the value meets the target (None: no target).
    ok: bool | None = None
    #: value / baseline measured in the same run, where there is a baseline.
    ratio: float | None = None
    baseline: str = ""


@contextlib.contextmanager
def bench_app(*, pgbouncer: bool = False, **overrides):
    """An app on a fresh PostgreSQL database and a private Redis, with the schema created; cleaned up after.

    ``pgbouncer``: the app (and the workers given ``worker_env(app)``) reach the database through a
    private PgBouncer in transaction pooling, as the README deploys it.
    """
    import os
    import tempfile

    os.environ.setdefault("BULKSIGN_VAR_DIR", tempfile.mkdtemp(prefix="bulksign-bench-"))
    from bulksign import create_app
    from bulksign.extensions import db
    from tests.support.pgbouncer import PgBouncer
    from tests.support.services import PG_ADMIN_URL, RedisServer, postgres_database

    redis = RedisServer()
    redis.start()
    bouncer = PgBouncer(PG_ADMIN_URL) if pgbouncer else None
    try:
        if bouncer:
            bouncer.start()
        with postgres_database() as url, tempfile.TemporaryDirectory(prefix="bulksign-bench-") as folder:
            config = {"DATABASE_URL": bouncer.url_for(url) if bouncer else url, "REDIS_URL": redis.url, "SECRET_KEY": "bench", "VAR_DIR": folder,
                      "STORAGE_URL": f"{folder}/storage", "MAIL_RATE_PER_MINUTE": 0, "LOG_JSON": False,
                      "MAIL_SERVER": "127.0.0.1", "MAIL_PORT": 1}
            config.update(overrides)
            app = create_app(config)
            with app.app_context():
                db.create_all()
                try:
                    yield app
                finally:
                    db.session.remove()
                    db.engine.dispose()
    finally:
        if bouncer:
            bouncer.stop()
        redis.stop()


def docs_per_second(render, n: int, concurrency: int) -> float:
    """How many PDFs ``render(i)`` makes per second, called ``n`` times on ``concurrency`` threads."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    started = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        for pdf in pool.map(render, range(n)):
            assert pdf.startswith(b"%PDF")
    return n / (time.monotonic() - started)


def stop_processes(processes) -> None:
    """SIGTERM each process, then wait for it (30 s at most, then SIGKILL)."""
    import subprocess

    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def peak_rss_mb() -> float:
    """This process's peak resident memory so far."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

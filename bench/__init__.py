"""Benchmarks: each ``bench/bench_*.py`` defines ``run(*, small: bool) -> list[Figure]``.

``make bench`` (``python -m bench``) runs them all at full size and prints one table; the test
suite runs each with ``small=True`` so CI proves they still work. Targets live here, not in
timed tests: these machines are noisy, so each figure carries a ratio to a baseline measured in
the same run where there is one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement


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
    from bulksign.app import create_app
    from bulksign.core.extensions import db
    from tests.support.pgbouncer import PgBouncer
    from tests.support.services import PG_ADMIN_URL, RedisServer, postgres_database

    redis = RedisServer()
    redis.start()
    bouncer = PgBouncer(PG_ADMIN_URL) if pgbouncer else None
    try:
        if bouncer:
            bouncer.start()
        with postgres_database() as url, tempfile.TemporaryDirectory(prefix="bulksign-bench-") as folder:
            config = {
                "DATABASE_URL": bouncer.url_for(url) if bouncer else url,
                "REDIS_URL": redis.url,
                "SECRET_KEY": "bench",
                "VAR_DIR": folder,
                "STORAGE_URL": f"{folder}/storage",
                "MAIL_RATE_PER_MINUTE": 0,
                "LOG_JSON": False,
                "MAIL_SERVER": "127.0.0.1",
                "MAIL_PORT": 1,
            }
            config.update(overrides)
            app = create_app(config)
            # A bench that counts the database's queries reads them off this PgBouncer (``PgBouncer.queries``).
            app.extensions["bench_pgbouncer"] = bouncer
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


@dataclass(frozen=True)
class Settled:
    """Where the requests a bench waited for stand when it stopped waiting."""

    #: How many reached the status waited for.
    reached: int
    #: How many ended elsewhere (failed, bounced, cancelled …): they will not reach it without staff.
    stopped: int
    #: How many were still on their way at the deadline (0 unless it passed).
    pending: int
    #: The first few distinct reasons of the stopped ones, each with how many requests gave it.
    reasons: tuple[str, ...] = ()

    def problems(self) -> str:
        """For a figure's target column: what kept requests from the goal, or empty."""
        parts = [f"{self.stopped} stopped: " + "; ".join(self.reasons)] if self.stopped else []
        if self.pending:
            parts.append(f"{self.pending} still pending at the deadline")
        return " (" + ", ".join(parts) + ")" if parts else ""


def wait_for_requests(
    where: ColumnElement[bool], *, total: int, goal: str, deadline: float, poll: Callable[[int], None] | None = None
) -> Settled:
    """Wait until each of the ``total`` requests matching ``where`` (a SQLAlchemy condition) is in ``goal`` or in a
    final state (failed, bounced …), or until ``deadline`` (``time.monotonic()``); ``poll(reached)`` runs on each
    look. A failed request never reaches ``goal``: waiting on it would only spend the deadline."""
    import time

    from sqlalchemy import func, select

    from bulksign.core.extensions import db
    from bulksign.models import SigningRequest
    from bulksign.models.status import FINAL

    final = {str(s) for s in FINAL} - {goal}
    while True:
        db.session.rollback()  # a fresh snapshot: the workers commit in other processes
        counts = dict(
            db.session.execute(
                select(SigningRequest.status, func.count()).where(where).group_by(SigningRequest.status)
            ).all()
        )
        reached, stopped = counts.get(goal, 0), sum(counts.get(s, 0) for s in final)
        if poll is not None:
            poll(reached)
        if reached + stopped >= total or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    reasons = (
        db.session.execute(
            select(SigningRequest.status, SigningRequest.error_message, func.count())
            .where(where, SigningRequest.status.in_(final))
            .group_by(SigningRequest.status, SigningRequest.error_message)
            .order_by(func.count().desc())
            .limit(3)
        ).all()
        if stopped
        else []
    )
    return Settled(
        reached=reached,
        stopped=stopped,
        pending=max(total - reached - stopped, 0),
        reasons=tuple(f"{count} {status}: {message or 'no reason given'}" for status, message, count in reasons),
    )


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

"""Figures that processes count as they work (requests, jobs, mails, throttle waits, memory), kept in Redis.
More in docs/architecture/ops.md."""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, cast
from weakref import WeakKeyDictionary

from flask import Flask, g, request
from redis import Redis
from redis.exceptions import RedisError

from bulksign.core.extensions import db, get_redis

logger = logging.getLogger(__name__)

PREFIX = "bulksign:telemetry:"
#: Per-process gauges (memory, database pool): one JSON field per process.
PROCESSES_KEY = PREFIX + "processes"
#: A process that has not reported for this long is gone (an idle RQ worker reports every ~7 min).
PROCESS_STALE_SECONDS = 600
#: A process refreshes its gauges at most this often.
PROCESS_REFRESH_SECONDS = 10
#: After a Redis error, figures are dropped without trying for this long.
PAUSE_AFTER_FAILURE_SECONDS = 30
_SEP = "\x1f"
#: Per Redis client (its connection pool): until when figures for it are dropped untried.
_paused_until: WeakKeyDictionary = WeakKeyDictionary()


def _paused(redis: Redis) -> bool:
    return time.monotonic() < _paused_until.get(redis.connection_pool, 0.0)


def _failed(redis: Redis, exc: Exception) -> None:
    _paused_until[redis.connection_pool] = time.monotonic() + PAUSE_AFTER_FAILURE_SECONDS
    logger.warning("telemetry not recorded, pausing for %s s: %s", PAUSE_AFTER_FAILURE_SECONDS, exc)


@dataclass(frozen=True)
class Family:
    #: Name as exposed; counters get ``_total`` appended by the exposition.
    name: str
    help: str
    #: ``counter`` or ``histogram``.
    kind: str
    labels: tuple[str, ...] = ()
    #: Upper bounds of a histogram's buckets (seconds), ``+Inf`` implied.
    buckets: tuple[float, ...] = ()

    @property
    def key(self) -> str:
        return PREFIX + self.name


SECONDS_FAST = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
SECONDS_SLOW = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)

HTTP_DURATION = Family(
    "bulksign_http_request_duration_seconds",
    "Time to answer a request, by endpoint",
    "histogram",
    ("endpoint", "method"),
    SECONDS_FAST,
)
HTTP_REQUESTS = Family(
    "bulksign_http_requests",
    "Requests answered, by endpoint and status class (2xx, 4xx, 5xx …)",
    "counter",
    ("endpoint", "method", "status"),
)
JOB_DURATION = Family(
    "bulksign_job_duration_seconds", "Time one RQ job took, by queue", "histogram", ("queue",), SECONDS_SLOW
)
JOBS = Family(
    "bulksign_jobs", "RQ jobs run, by queue and outcome (succeeded, retried, failed)", "counter", ("queue", "outcome")
)
MAILS = Family(
    "bulksign_mails",
    "Mails handed to the SMTP server, by kind and outcome (sent, deferred, bounced, failed, cancelled)",
    "counter",
    ("kind", "status"),
)
MAIL_REPORTS = Family(
    "bulksign_mail_reports", "Reports from the mail provider's webhook (bounce, complaint)", "counter", ("type",)
)
THROTTLE_WAIT = Family("bulksign_mail_throttle_wait_seconds", "Seconds senders waited for the mail throttle", "counter")
THROTTLE_SLOTS = Family(
    "bulksign_mail_throttle_slots", "Throttle slots asked for, by outcome (won, timed_out)", "counter", ("outcome",)
)
PDF_RENDER = Family(
    "bulksign_pdf_render_seconds",
    "Time one recipient's PDF took to render (fill in and convert)",
    "histogram",
    (),
    (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)

FAMILIES: tuple[Family, ...] = (
    HTTP_DURATION,
    HTTP_REQUESTS,
    JOB_DURATION,
    JOBS,
    MAILS,
    MAIL_REPORTS,
    THROTTLE_WAIT,
    THROTTLE_SLOTS,
    PDF_RENDER,
)


class Figures:
    """Figures gathered and written in one pipelined round trip: ``with record(redis) as f: f.count(...)``."""

    def __init__(self, redis: Redis):
        self.redis = redis
        self.pipe = redis.pipeline(transaction=False)

    def count(self, family: Family, labels: tuple[str, ...] = (), amount: float = 1) -> None:
        field = _SEP.join(labels)
        if isinstance(amount, int):
            self.pipe.hincrby(family.key, field, amount)
        else:
            self.pipe.hincrbyfloat(family.key, field, amount)

    def observe(self, family: Family, labels: tuple[str, ...], seconds: float) -> None:
        # One field per bucket (not cumulative) and one for the sum; the reader adds them up.
        bucket = next((str(le) for le in family.buckets if seconds <= le), "+Inf")
        self.pipe.hincrby(family.key, _SEP.join(labels + (bucket,)), 1)
        self.pipe.hincrbyfloat(family.key, _SEP.join(labels + ("sum",)), seconds)

    def __enter__(self) -> Figures:
        return self

    def __exit__(self, exc_type, *_) -> Literal[False]:
        if exc_type is None:
            self.write()
        return False

    def write(self) -> None:
        """Write what was gathered so far (dropped if Redis fails), and gather anew."""
        if len(self.pipe) and not _paused(self.redis):
            try:
                self.pipe.execute()
            except RedisError as exc:
                _failed(self.redis, exc)
        self.pipe.reset()


def record(redis: Redis) -> Figures:
    """Figures for ``redis``, written when the ``with`` block ends (dropped if Redis fails)."""
    return Figures(redis)


@dataclass(frozen=True)
class Histogram:
    #: (upper bound, cumulative count) including ``+Inf``.
    buckets: tuple[tuple[str, int], ...]
    sum: float


def read(redis: Redis, families: Iterable[Family] = FAMILIES) -> dict[str, dict[tuple[str, ...], float | Histogram]]:
    """Every family's values by label values: a number for counters, a ``Histogram`` for histograms."""
    families = tuple(families)
    pipe = redis.pipeline(transaction=False)
    for family in families:
        pipe.hgetall(family.key)
    found: dict[str, dict[tuple[str, ...], float | Histogram]] = {}
    for family, raw in zip(families, pipe.execute()):
        fields = [(k.decode().split(_SEP) if k else [], float(v)) for k, v in raw.items()]
        if family.kind == "counter":
            found[family.name] = {tuple(parts) if family.labels else (): value for parts, value in fields}
            continue
        per_labels: dict[tuple[str, ...], dict[str, float]] = {}
        for parts, value in fields:
            per_labels.setdefault(tuple(parts[:-1]), {})[parts[-1]] = value
        found[family.name] = {labels: _histogram(family, values) for labels, values in per_labels.items()}
    return found


def _histogram(family: Family, values: dict[str, float]) -> Histogram:
    running, buckets = 0, []
    for le in [str(b) for b in family.buckets] + ["+Inf"]:
        running += int(values.get(le, 0))
        buckets.append((le, running))
    return Histogram(tuple(buckets), values.get("sum", 0.0))


def process_id() -> str:
    """This process, as a label: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


def resident_bytes() -> int | None:
    """This process's resident memory (Linux ``/proc``), or None where that is not available."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class ProcessReporter:
    """Refreshes one process's gauges (memory, database connections in use), at most every few seconds.

    One per app (web) or per worker, so a process playing both parts (the tests) reports both.
    """

    def __init__(self, role: str):
        self.role = role
        self.last = 0.0

    @property
    def field(self) -> str:
        return _SEP.join((process_id(), self.role))

    def report(self, redis: Redis, *, pool_in_use: int | None) -> None:
        now = time.time()
        if now - self.last < PROCESS_REFRESH_SECONDS or _paused(redis):
            return
        self.last = now
        try:
            redis.hset(PROCESSES_KEY, self.field, json.dumps({"rss": resident_bytes(), "pool": pool_in_use, "at": now}))
        except RedisError as exc:
            _failed(redis, exc)

    def forget(self, redis: Redis) -> None:
        """The process is stopping: its gauges go now rather than when they turn stale."""
        try:
            redis.hdel(PROCESSES_KEY, self.field)
        except RedisError:
            pass


@dataclass(frozen=True)
class ProcessFigures:
    process: str
    role: str
    rss_bytes: int | None
    pool_in_use: int | None


def processes(redis: Redis, *, now: float | None = None) -> list[ProcessFigures]:
    """The live processes' last figures; those silent for ``PROCESS_STALE_SECONDS`` are forgotten."""
    now = time.time() if now is None else now
    live, stale = [], []
    for field, raw in sorted(cast("dict[bytes, bytes]", redis.hgetall(PROCESSES_KEY)).items()):
        data = json.loads(raw)
        if now - data["at"] > PROCESS_STALE_SECONDS:
            stale.append(field.decode())
        else:
            process, _, role = field.decode().partition(_SEP)
            live.append(ProcessFigures(process, role, data["rss"], data["pool"]))
    if stale:
        redis.hdel(PROCESSES_KEY, *stale)
    return live


def pool_in_use(engine) -> int | None:
    """Database connections this process has checked out of its pool (None for pools that do not count)."""
    checkedout = getattr(engine.pool, "checkedout", None)
    return checkedout() if checkedout else None


def init_app(app: Flask) -> None:
    """Time and count every request by endpoint (the route's name: never a token from the URL)."""
    reporter = ProcessReporter("web")

    @app.before_request
    def _start_clock():
        g.telemetry_started = time.perf_counter()

    @app.after_request
    def _count_request(response):
        started = g.pop("telemetry_started", None)
        if started is None:
            return response
        endpoint = request.url_rule.endpoint if request.url_rule else "unmatched"
        labels = (endpoint, request.method)
        redis = get_redis()
        with record(redis) as figures:
            figures.observe(HTTP_DURATION, labels, time.perf_counter() - started)
            figures.count(HTTP_REQUESTS, labels + (f"{response.status_code // 100}xx",))
        reporter.report(redis, pool_in_use=pool_in_use(db.engine))
        return response

"""``GET /metrics`` with a 100,000-request batch in PostgreSQL (small: 5,000): a scrape must not grow with the rows.

Figures: the scrape's p95 with the big batch against the same scrape with an empty database and
against ``GET /healthz``, all measured in this run through the app's test client.
"""

from __future__ import annotations

import statistics
import time

from bench import Figure, bench_app
from bench.bench_dashboard import _statuses

TARGET_MS = 50


def _p95_ms(client, path: str, n: int) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        response = client.get(path, environ_base={"REMOTE_ADDR": "127.0.0.1"})
        times.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"GET {path} answered HTTP {response.status_code}")
    return statistics.quantiles(times, n=20)[18] if len(times) >= 20 else max(times)


def run(*, small: bool) -> list[Figure]:
    from bulksign.core.extensions import db
    from bulksign.models import utcnow
    from tests.support.batchdata import batch_in_states

    rows, repeats = (5_000, 20) if small else (100_000, 100)
    with bench_app() as app:
        client = app.test_client()
        for path in ("/healthz", "/metrics"):  # warm up
            _p95_ms(client, path, 3)
        empty = _p95_ms(client, "/metrics", repeats)
        batch_in_states(db.session, statuses=_statuses(rows), now=utcnow(), name="Bench batch")
        db.session.commit()
        healthz = _p95_ms(client, "/healthz", repeats)
        full = _p95_ms(client, "/metrics", repeats)
    return [
        Figure(
            f"GET /metrics p95 ({rows:,} requests)",
            full,
            "ms",
            target=f"< {TARGET_MS} ms",
            ok=full < TARGET_MS,
            ratio=full / empty if empty else None,
            baseline="the same scrape, empty database",
        ),
        Figure(
            "GET /metrics p95, empty database",
            empty,
            "ms",
            ratio=empty / healthz if healthz else None,
            baseline="GET /healthz p95",
        ),
        Figure("GET /healthz p95 (baseline)", healthz, "ms"),
    ]

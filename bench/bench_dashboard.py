"""Dashboard speed with a 100,000-request batch in PostgreSQL (small: 5,000), over real HTTP.

The app runs under gunicorn in a subprocess on a free loopback port; this process is the client.
Figures: p95 of the batch page, a filtered page of the recipients table and the progress
fragment, each against ``GET /healthz`` p95 measured in the same run (the baseline).
"""

from __future__ import annotations

import http.client
import os
import random
import re
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from urllib.parse import urlencode

from bench import Figure, bench_app

TARGETS_MS = {"batch page": 150, "filtered table page": 150, "progress fragment": 30}
#: Realistic mid-campaign mix.
MIX = (
    ["sent"] * 30
    + ["opened"] * 20
    + ["signed"] * 35
    + ["declined"] * 2
    + ["expired"] * 3
    + ["bounced"] * 2
    + ["failed"] * 1
    + ["pending"] * 4
    + ["generated"] * 3
)


def _statuses(n: int) -> list[str]:
    rng = random.Random(7)
    return [rng.choice(MIX) for _ in range(n)]


@contextmanager
def _served(app, port: int):
    env = {
        **os.environ,
        "DATABASE_URL": app.config["DATABASE_URL"],
        "REDIS_URL": app.config["REDIS_URL"],
        "SECRET_KEY": app.config["SECRET_KEY"],
        "BULKSIGN_VAR_DIR": app.config["VAR_DIR"],
        "STORAGE_URL": app.config["STORAGE_URL"],
        "LOG_JSON": "false",
        "LOGIN_RATE_LIMIT": "1000 per minute",
    }
    cwd = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "--config",
            "/dev/null",
            "--workers",
            "2",
            "--threads",
            "2",
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
            "wsgi:app",
        ],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.2)
        else:
            raise RuntimeError("the app did not start within 30 s")
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


class _Client:
    """One keep-alive HTTP connection with a session cookie, like a browser tab."""

    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.cookie = ""
        #: The last response's ETag, if it had one.
        self.etag: str | None = None

    def request(
        self, method: str, path: str, body: str | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, str]:
        headers = {**(headers or {}), **({"Cookie": self.cookie} if self.cookie else {})}
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        self.conn.request(method, path, body=body, headers=headers)
        response = self.conn.getresponse()
        data = response.read().decode("utf-8", "replace")
        self.etag = response.headers.get("ETag")
        for value in response.headers.get_all("Set-Cookie") or []:
            if value.startswith("session="):
                self.cookie = value.split(";", 1)[0]
        return response.status, data

    def login(self, email: str, password: str) -> None:
        _, page = self.request("GET", "/auth/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
        status, _ = self.request(
            "POST", "/auth/login", urlencode({"email": email, "password": password, "csrf_token": token})
        )
        if status != 302:
            raise RuntimeError(f"login failed with HTTP {status}")

    def timings_ms(self, path: str, n: int) -> tuple[float, float]:
        """(median, p95) of ``n`` GETs, in milliseconds."""
        times = []
        for _ in range(n):
            started = time.perf_counter()
            status, _ = self.request("GET", path)
            times.append((time.perf_counter() - started) * 1000)
            if status != 200:
                raise RuntimeError(f"GET {path} answered HTTP {status}")
        p95 = statistics.quantiles(times, n=20)[18] if len(times) >= 20 else max(times)
        return statistics.median(times), p95


def run(*, small: bool) -> list[Figure]:
    from sqlalchemy import text

    from bulksign.core.extensions import db
    from bulksign.models import utcnow
    from bulksign.people.users import create_user
    from tests.support.batchdata import batch_in_states
    from tests.support.services import free_port

    rows, repeats = (5_000, 20) if small else (100_000, 100)
    with bench_app() as app:
        user = create_user(db.session, email="bench@example.com", password="bench-password", role="admin", now=utcnow())
        db.session.commit()
        batch = batch_in_states(db.session, statuses=_statuses(rows), now=utcnow(), name="Bench batch", user_id=user.id)
        batch_id = batch.id
        db.session.commit()
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE signing_requests"))
        port = free_port()
        with _served(app, port):
            client = _Client(port)
            client.login("bench@example.com", "bench-password")
            paths = {
                "batch page": f"/batches/{batch_id}",
                "filtered table page": f"/batches/{batch_id}/requests?status=sent&sort=email",
                "progress fragment": f"/batches/{batch_id}/progress",
            }
            for path in ["/healthz", *paths.values()]:  # warm up caches and connections
                client.timings_ms(path, 3)
            base_median, baseline = client.timings_ms("/healthz", repeats)
            figures = []
            for name, path in paths.items():
                median, value = client.timings_ms(path, repeats)
                target = TARGETS_MS[name]
                figures.append(
                    Figure(
                        f"{name} p95 ({rows:,} requests)",
                        value,
                        "ms",
                        target=f"< {target} ms",
                        ok=value < target,
                        ratio=value / baseline if baseline else None,
                        baseline="GET /healthz p95",
                    )
                )
                figures.append(
                    Figure(
                        f"{name} median",
                        median,
                        "ms",
                        ratio=median / base_median if base_median else None,
                        baseline="GET /healthz median",
                    )
                )
            figures.append(Figure("GET /healthz p95 (baseline)", baseline, "ms"))
            figures.append(Figure("GET /healthz median (baseline)", base_median, "ms"))
    return figures

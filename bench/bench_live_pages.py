"""What open batch pages cost once sending ended: 50 browser tabs poll the progress fragment of a 10,000-request
batch (small: 10 tabs, 1,000 requests), as the page does (every 3 s, with the rows on screen).

Measured over real HTTP (gunicorn in a subprocess, through PgBouncer): the web processes' CPU and the queries
per second PgBouncer passed on, first with every poll rendered in full (the baseline, in the same run), then with
the conditional polls the page sends (If-None-Match, answered 304 while the batch's version stands).
"""

from __future__ import annotations

import http.client
import os
import threading
import time

from bench import Figure, bench_app
from bench.bench_dashboard import _Client, _served, _statuses

POLL_SECONDS = 3
#: Rows the table shows on screen, sent with each poll.
ON_SCREEN = 50


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and its children (the gunicorn master and its workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as found:
            children = [int(c) for c in found.read().split()]
    except OSError:
        children = []
    for each in [pid, *children]:
        try:
            with open(f"/proc/{each}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _polling(clients: list[_Client], path: str, *, seconds: float, conditional: bool) -> dict[int, int]:
    """Each client polls ``path`` every ``POLL_SECONDS`` (started apart, as tabs are) for ``seconds``; status →
    how many answers."""
    answers: dict[int, int] = {}
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def tab(index: int, client: _Client) -> None:
        time.sleep(POLL_SECONDS * index / len(clients))
        tag = client.etag  # the page's first render gave it
        while time.monotonic() < stop:
            started = time.monotonic()
            headers = {"If-None-Match": tag} if conditional and tag else None
            try:
                status, _ = client.request("GET", path, headers=headers)
            except (http.client.RemoteDisconnected, ConnectionError):
                # gunicorn closes a connection idle for longer than its keep-alive (2 s): a tab opens another.
                client.conn.close()
                status, _ = client.request("GET", path, headers=headers)
            if status == 200:
                tag = client.etag
            with lock:
                answers[status] = answers.get(status, 0) + 1
            time.sleep(max(0.0, POLL_SECONDS - (time.monotonic() - started)))

    threads = [threading.Thread(target=tab, args=(i, c)) for i, c in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def run(*, small: bool) -> list[Figure]:
    from sqlalchemy import select, text

    from bulksign.core.extensions import db
    from bulksign.models import SigningRequest, utcnow
    from bulksign.people.users import create_user
    from tests.support.batchdata import batch_in_states
    from tests.support.services import free_port

    rows, tabs, seconds = (1_000, 10, 3) if small else (10_000, 50, 30)
    with bench_app(pgbouncer=True) as app:
        bouncer = app.extensions["bench_pgbouncer"]
        user = create_user(db.session, email="bench@example.com", password="bench-password", role="admin", now=utcnow())
        db.session.commit()
        statuses = [s for s in _statuses(rows * 2) if s not in ("pending", "generated")][:rows]
        batch = batch_in_states(
            db.session,
            statuses=statuses,
            now=utcnow(),
            name="Live bench",
            user_id=user.id,
            batch_status="awaiting_signatures",
        )
        batch_id = batch.id
        shown = db.session.scalars(
            select(SigningRequest.id).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
        ).all()[:ON_SCREEN]
        db.session.commit()
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE signing_requests"))
        path = f"/batches/{batch_id}/progress?" + "&".join(f"shown={i}" for i in shown)
        port = free_port()
        with _served(app, port) as process:
            clients = [_Client(port) for _ in range(tabs)]
            for client in clients:
                client.login("bench@example.com", "bench-password")
                client.request("GET", path)  # warm up
            figures = []
            measured = {}
            for name, conditional in (("every poll rendered (baseline)", False), ("conditional polls (304)", True)):
                cpu, queries, started = _cpu_seconds(process.pid), bouncer.queries(), time.monotonic()
                answers = _polling(clients, path, seconds=seconds, conditional=conditional)
                wall = time.monotonic() - started
                measured[name] = (
                    100 * (_cpu_seconds(process.pid) - cpu) / wall,
                    (bouncer.queries() - queries) / wall,
                    answers,
                )
            base_cpu, base_queries, _ = measured["every poll rendered (baseline)"]
            for name, (cpu, queries, answers) in measured.items():
                polls = sum(answers.values())
                label = f"{tabs} tabs on a {rows:,}-request batch, {name}"
                figures.append(
                    Figure(
                        f"{label}: web CPU",
                        cpu,
                        "% of a core",
                        ratio=cpu / base_cpu if base_cpu else None,
                        baseline="every poll rendered",
                    )
                )
                figures.append(
                    Figure(
                        f"{label}: database queries",
                        queries,
                        "per s",
                        ratio=queries / base_queries if base_queries else None,
                        baseline="every poll rendered",
                    )
                )
                figures.append(
                    Figure(f"{label}: polls answered 304", answers.get(304, 0) / polls if polls else 0, "share")
                )
    return figures

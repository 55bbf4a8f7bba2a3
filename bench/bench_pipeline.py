"""The whole dispatch pipeline (render → store → invitation → SMTP) against a bare wkhtmltopdf loop.

A batch of N recipients (10,000; small: 60) with the throttle off goes through real worker
processes (``flask jobs worker``: PDF_CONCURRENCY on ``pdf``, one on ``mail``) to a local aiosmtpd sink,
with the database behind PgBouncer in transaction pooling as deployed (``BENCH_PIPELINE_POOLER=none``:
straight to PostgreSQL, to compare). In the same
run, the same documents are rendered by a bare loop of wkhtmltopdf with the same options and
the same concurrency, half before the pipeline runs and half after. Worker memory is sampled from /proc: growth from 10 % of the batch to its end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench import Figure, bench_app, docs_per_second, stop_processes, wait_for_requests

ROOT = Path(__file__).resolve().parent.parent
CLAUSES = "".join(
    f"<h2>{i}. Clause</h2><p>{'The Employee shall perform the duties of the position with care and diligence. ' * 6}</p>"
    for i in range(1, 13)
)


def _contract() -> str:
    html = (ROOT / "bulksign/cli/demo_files/contract.html").read_text()
    return html.replace("</body>", CLAUSES + "</body>")  # about two pages, like a real contract


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _stat(pid: int) -> tuple[str, float, float] | None:
    """(command, own CPU seconds, CPU seconds of its reaped children) of a live process, from /proc."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (
        raw[raw.index("(") + 1 : raw.rindex(")")],
        (int(fields[11]) + int(fields[12])) / tick,
        (int(fields[13]) + int(fields[14])) / tick,
    )


def _tree(pid: int) -> list[int]:
    """``pid`` and its live descendants (a worker is a supervising parent with the real worker below it)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for children in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo.extend(int(c) for c in children.read_text().split())
            except OSError:
                pass
    return found


def _reaped_cpu() -> float:
    """CPU seconds of this process's reaped children (the bare loop's wkhtmltopdf runs)."""
    times = os.times()
    return times.children_user + times.children_system


def _database_pids(database: str) -> list[int]:
    """PgBouncer (a child of this process) and the PostgreSQL backends now serving ``database``."""
    import psycopg

    from tests.support.services import PG_ADMIN_URL

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        backends = [row[0] for row in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (database,))]
    return _children_named("pgbouncer") + backends


def _worker_pids() -> list[int]:
    """The RQ workers' own processes (below their supervising parents): the ones whose memory grows."""
    from rq import Worker

    from bulksign.core.extensions import get_redis

    return [w.pid for w in Worker.all(connection=get_redis())]


def _children_named(name: str) -> list[int]:
    return [pid for pid in _tree(os.getpid())[1:] if (_stat(pid) or ("",))[0] == name]


def _cpu_snapshot(roles: dict[str, list[int]]) -> dict[tuple[str, int], tuple[float, float]]:
    """(role, pid) → (own CPU, reaped children's CPU) for every process of each role's trees, wkhtmltopdf left out
    (a render worker's reaped children are the wkhtmltopdf runs: that is what ``reaped`` counts)."""
    snapshot = {}
    for role, roots in roles.items():
        for root in roots:
            for pid in _tree(root):
                stat = _stat(pid)
                if stat is not None and stat[0] != "wkhtmltopdf":
                    snapshot[(role, pid)] = stat[1:]
    return snapshot


def _cpu_spent(before: dict, after: dict) -> dict[str, tuple[float, float]]:
    """Role → (own CPU, reaped children's CPU) spent between two snapshots (processes started since count whole)."""
    spent: dict[str, tuple[float, float]] = {}
    for (role, pid), (own, reaped) in after.items():
        own0, reaped0 = before.get((role, pid), (0.0, 0.0))
        total = spent.get(role, (0.0, 0.0))
        spent[role] = (total[0] + own - own0, total[1] + reaped - reaped0)
    return spent


class _Sink:
    """Counts messages; keeps nothing (10,000 mails must not fill the bench's memory)."""

    def __init__(self):
        self.count = 0

    async def handle_DATA(self, server, session, envelope):
        self.count += 1
        return "250 OK"


def _create_batch(app, n: int, *, email: str = "bench@example.com", prefix: str = "r") -> int:
    """A committed pending batch of ``n`` recipients (``<prefix><i>@example.com``) by a new staff user ``email``."""
    from sqlalchemy import insert

    from bulksign.batches import counts as batch_counts
    from bulksign.core.extensions import db
    from bulksign.doc_templates.versions import create_template
    from bulksign.models import Batch, SigningRequest, utcnow
    from bulksign.people.users import create_user

    now = utcnow()
    user = create_user(db.session, email=email, password="bench-password", role="staff", now=now)
    saved = create_template(db.session, name="Employment agreement", html=_contract(), user=user, now=now)
    batch = Batch(
        name="bench", template_version_id=saved.version.id, created_by_id=user.id, total_count=n, created_at=now
    )
    db.session.add(batch)
    db.session.flush()
    db.session.execute(
        insert(SigningRequest),
        [
            {
                "batch_id": batch.id,
                "row_number": i + 2,
                "email": f"{prefix}{i}@example.com",
                "name": f"Recipient {i}",
                "data": {
                    "contract_number": f"C-{i}",
                    "city": "Riga",
                    "position": "Engineer",
                    "salary": "4200",
                    "start_date": "2027-01-01",
                },
                "status": "pending",
                "status_changed_at": now,
                "created_at": now,
            }
            for i in range(n)
        ],
    )
    batch_counts.rebuild(db.session, batch_ids=[batch.id])
    db.session.commit()
    return batch.id


def _bare_loop(html: str, n: int, concurrency: int) -> float:
    """docs/s of wkhtmltopdf alone (same options, same concurrency)."""
    from bulksign.documents.pdf import render_pdf

    return docs_per_second(lambda _: render_pdf(html, timeout=60), n, concurrency)


def start_workers(app, queue_sets) -> list[subprocess.Popen]:
    """A ``flask jobs worker`` process on each set of queues, on the app's services, quiet."""
    from tests.support.batches import worker_env

    return [
        subprocess.Popen(
            [sys.executable, "-m", "flask", "jobs", "worker", *queues],
            cwd=ROOT,
            env=worker_env(app),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for queues in queue_sets
    ]


def _wait_for_workers(count: int, *, timeout: float) -> None:
    from rq import Worker

    from bulksign.core.extensions import get_redis

    deadline = time.monotonic() + timeout
    while len(Worker.all(connection=get_redis())) < count:
        if time.monotonic() > deadline:
            raise RuntimeError("the bench workers did not start")
        time.sleep(0.1)


def run(*, small: bool) -> list[Figure]:
    from aiosmtpd.controller import Controller
    from sqlalchemy import select

    from bulksign.core.extensions import db
    from bulksign.doc_templates.jinja_sandbox import render_html
    from bulksign.documents.rendering import document_context
    from bulksign.models import SigningRequest
    from bulksign.work.pipeline import enqueue_renders
    from tests.support.services import free_port

    # BENCH_PIPELINE_RECIPIENTS: a mid-size run when 10,000 does not fit the time at hand.
    n = 60 if small else int(os.environ.get("BENCH_PIPELINE_RECIPIENTS", "10000"))
    pooled = os.environ.get("BENCH_PIPELINE_POOLER", "pgbouncer") != "none"
    sink = _Sink()
    port = free_port()
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        with bench_app(MAIL_PORT=port, pgbouncer=pooled) as app:
            concurrency = app.config["PDF_CONCURRENCY"]
            batch_id = _create_batch(app, n)
            sample = db.session.scalars(select(SigningRequest).limit(1)).first()
            html = render_html(
                db.session.get(type(sample.batch), batch_id).template_version.html, document_context(sample)
            )
            ids = list(db.session.scalars(select(SigningRequest.id).where(SigningRequest.batch_id == batch_id)))
            db.session.commit()
            # The baseline runs half before and half after the pipeline: a machine whose speed drifts
            # during the run (other tenants, thermal) weighs on both sides alike.
            bare_n = min(n, 40 if small else 2000) // 2
            bare_cpu = _reaped_cpu()
            bare_before = _bare_loop(html, bare_n, concurrency)
            bare_cpu = _reaped_cpu() - bare_cpu

            # Workers start (imports, connections) before the clock does: the figure is throughput.
            # As deployed: PDF_CONCURRENCY render workers and one mail worker (the throttle is global anyway).
            workers = start_workers(app, [("pdf",)] * concurrency + [("mail",)])
            _wait_for_workers(len(workers), timeout=60)
            # Each role's processes: the worker trees (supervisor, worker, RQ's scheduler), the database side
            # (PgBouncer and the server backends of this database), Redis. Imports and start-up are not counted.
            database = app.config["DATABASE_URL"].rsplit("/", 1)[1]
            roles = {
                "render": [w.pid for w in workers[:-1]],
                "mail": [workers[-1].pid],
                "redis": _children_named("redis-server"),
            }
            idle_cpu = _cpu_snapshot({**roles, "database": _database_pids(database)})
            worker_pids = _worker_pids()
            started = time.monotonic()
            enqueue_renders(ids)
            warm: dict[int, float] = {}
            last: dict[int, float] = {}

            def sample_memory(sent: int) -> None:
                for pid in worker_pids:
                    rss = _rss_mb(pid)
                    if rss is not None:
                        last[pid] = rss
                        if sent >= n // 10:
                            warm.setdefault(pid, rss)

            settled = wait_for_requests(
                SigningRequest.batch_id == batch_id,
                total=n,
                goal="sent",
                deadline=started + (300 if small else 3600),
                poll=sample_memory,
            )
            sent = settled.reached
            elapsed = time.monotonic() - started
            # What the pipeline adds around the renderer, per document: unlike docs/s, a busy machine barely moves it.
            busy = _cpu_spent(idle_cpu, _cpu_snapshot({**roles, "database": _database_pids(database)}))
            per_doc = {role: own / max(sent, 1) for role, (own, _) in busy.items()}
            wkhtmltopdf_cpu = busy["render"][1] / max(sent, 1)
            stop_processes(workers)
            pipeline_rate = sent / elapsed
            bare_after = _bare_loop(html, bare_n, concurrency)
            bare_rate = 2 / (1 / bare_before + 1 / bare_after)
    finally:
        controller.stop()

    growth = max((last[pid] - warm[pid] for pid in warm if pid in last), default=0.0)
    ratio = pipeline_rate / bare_rate
    label = f"{n:,} recipients" + (" (small)" if small else "")
    through = "through PgBouncer" if pooled else "straight to PostgreSQL"
    return [
        Figure(
            f"pipeline docs/s, {label}, {concurrency} pdf workers + 1 mail worker, {through}",
            pipeline_rate,
            "docs/s",
            "≥ 0.9 × bare",
            ratio >= 0.9,
            ratio,
            f"bare wkhtmltopdf {bare_rate:.1f} docs/s ({bare_n} docs before: "
            f"{bare_before:.1f}, {bare_n} after: {bare_after:.1f})",
        ),
        Figure(
            f"invitations delivered, {label}",
            sink.count,
            "mails",
            f"= {n}{settled.problems()}",
            sink.count >= n and sent == n,
        ),
        Figure(
            f"render workers' own CPU per document (wkhtmltopdf not counted), {label}", per_doc["render"] * 1000, "ms"
        ),
        Figure(f"mail worker's CPU per invitation, {label}", per_doc["mail"] * 1000, "ms"),
        Figure(
            f"database CPU per document (PostgreSQL backends + PgBouncer), {label}", per_doc["database"] * 1000, "ms"
        ),
        Figure(f"Redis CPU per document, {label}", per_doc["redis"] * 1000, "ms"),
        Figure(
            f"wkhtmltopdf CPU per document in the pipeline, {label}",
            wkhtmltopdf_cpu * 1000,
            "ms",
            "",
            None,
            wkhtmltopdf_cpu / (bare_cpu / max(bare_n, 1)),
            f"bare {bare_cpu / max(bare_n, 1) * 1000:.1f} ms",
        ),
        Figure(f"worker memory growth, 10 % → 100 % of {label}", max(growth, 0.0), "MB", "< 30 MB", growth < 30),
    ]


if __name__ == "__main__":
    for figure in run(small="--small" in sys.argv):
        print(figure)
    os._exit(0)

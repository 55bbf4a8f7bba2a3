"""The whole dispatch pipeline (render → store → invitation → SMTP) against a bare wkhtmltopdf loop.

A batch of N recipients (by default 600, three times, and 10,000: ``SIZES``; ``BENCH_PIPELINE_RECIPIENTS`` for
one other size; small: 60) with the throttle off goes through real worker processes (``flask jobs worker``:
PDF_CONCURRENCY on ``pdf``, MAIL_WORKERS on ``mail``, as the README deploys them) to a local aiosmtpd sink, with
the database behind PgBouncer in transaction pooling as deployed (``BENCH_PIPELINE_POOLER=none``: straight to
PostgreSQL, to compare). In the same run, the same documents are rendered by a bare loop of wkhtmltopdf with the
same options and the same concurrency, half before the pipeline runs and half after. Target: ≥ 2.5 × the bare
loop's docs/s, at 600 and at 10,000 recipients, on the contract with a doctype and on the same contract as staff
paste it (no doctype, the body beginning with ``<h1>``).

CPU is counted per document and role (render workers, mail workers, PostgreSQL's backends of this database,
PgBouncer, Redis, and wkhtmltopdf), each against what the bare loop spends per document: unlike docs/s, a busy
machine barely moves it. wkhtmltopdf runs in bwrap's sandbox, whose outer process exits without reaping the
namespace's init (which reaped wkhtmltopdf): the converter's CPU then reached no parent's account. This process
is made their subreaper and reaps them (``process_cpu.Orphans``), so ``os.times()`` counts them. Worker memory is
sampled from /proc: growth from 10 % of the batch to its end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from bench import Figure, bench_app, docs_per_second, process_cpu, stop_processes, wait_for_requests

ROOT = Path(__file__).resolve().parent.parent
#: Mail workers, as the README deploys them (``--processes 2 mail``): one sends a mail at a time, each its SMTP
#: exchange and its commit in turn, and was the pipeline's limit here (10,000 recipients: 71.6 docs/s with one,
#: the cores a quarter idle; 84.4 with two).
MAIL_WORKERS = 2
CLAUSES = "".join(
    f"<h2>{i}. Clause</h2><p>{'The Employee shall perform the duties of the position with care and diligence. ' * 6}</p>"
    for i in range(1, 13)
)


def _contract() -> str:
    html = (ROOT / "bulksign/cli/demo_files/contract.html").read_text()
    return html.replace("</body>", CLAUSES + "</body>")  # about two pages, like a real contract


def _pasted_contract() -> str:
    """The same contract as staff paste or export it: no doctype (quirks mode), the body beginning with <h1>."""
    return _contract().replace("<!doctype html>\n", "")


#: The templates the pipeline is measured on, each in its own run (``BENCH_PIPELINE_TEMPLATES=pasted``: one).
TEMPLATES = {"doctype": ("with a doctype", _contract), "pasted": ("without a doctype, <h1> first", _pasted_contract)}


def _worker_pids() -> list[int]:
    """The RQ workers' own processes (below their supervising parents): the ones whose memory grows."""
    from rq import Worker

    from bulksign.core.extensions import get_redis

    return [w.pid for w in Worker.all(connection=get_redis())]


class _Sink:
    """Counts messages; keeps nothing (10,000 mails must not fill the bench's memory)."""

    def __init__(self):
        self.count = 0

    async def handle_DATA(self, server, session, envelope):
        self.count += 1
        return "250 OK"


def _create_batch(app, n: int, *, email: str = "bench@example.com", prefix: str = "r", html: str | None = None) -> int:
    """A committed pending batch of ``n`` recipients (``<prefix><i>@example.com``) by a new staff user ``email``."""
    from sqlalchemy import insert

    from bulksign.batches import counts as batch_counts
    from bulksign.core.extensions import db
    from bulksign.doc_templates.versions import create_template
    from bulksign.models import Batch, SigningRequest, utcnow
    from bulksign.people.users import create_user

    now = utcnow()
    user = create_user(db.session, email=email, password="bench-password", role="staff", now=now)
    saved = create_template(db.session, name="Employment agreement", html=html or _contract(), user=user, now=now)
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


def start_workers(app, queues: list[tuple[str, ...]]) -> list[subprocess.Popen]:
    """A ``flask jobs worker`` on each of ``queues`` (one tuple of queue names per worker), registered with RQ (or
    stopped again, and the error raised)."""
    from tests.support.batches import worker_env

    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "flask", "jobs", "worker", *names],
            cwd=ROOT,
            env=worker_env(app),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for names in queues
    ]
    try:
        _wait_for_workers(len(workers), timeout=60)
    except BaseException:
        stop_processes(workers)
        raise
    return workers


def _wait_for_workers(count: int, *, timeout: float) -> None:
    from rq import Worker

    from bulksign.core.extensions import get_redis

    deadline = time.monotonic() + timeout
    while len(Worker.all(connection=get_redis())) < count:
        if time.monotonic() > deadline:
            raise RuntimeError("the bench workers did not start")
        time.sleep(0.1)


#: The sizes measured by default: the issue's two, the smaller one several times (its run lasts seconds, so a
#: machine's drift moves one run's ratio by ±10 %: the median of its runs is reported, with each run's ratio).
SIZES = {600: 3, 10_000: 1}


def run(*, small: bool) -> list[Figure]:
    chosen = os.environ.get("BENCH_PIPELINE_TEMPLATES", ",".join(TEMPLATES)).split(",")
    # BENCH_PIPELINE_RECIPIENTS: one size (run once) when the default ones do not fit the time at hand.
    given = os.environ.get("BENCH_PIPELINE_RECIPIENTS")
    sizes = {60: 1} if small else {int(given): 1} if given else SIZES
    figures = []
    for key in chosen:
        kind, template = TEMPLATES[key]
        for n, rounds in sizes.items():
            figures += _median_run(
                [
                    _measure(n=n, small=small, template=template(), kind=kind, email=f"bench-{key}@example.com")
                    for _ in range(rounds)
                ]
            )
    return figures


def _median_run(runs: list[list[Figure]]) -> list[Figure]:
    """The figures of the run whose docs/s ratio is the median, its first figure naming every run's ratio; a
    figure with a target fails if it failed in any run."""
    if len(runs) == 1:
        return runs[0]
    ordered = sorted(runs, key=lambda run_figures: run_figures[0].ratio or 0.0)
    middle = ordered[len(ordered) // 2]
    failed = {index for run_figures in runs for index, figure in enumerate(run_figures) if figure.ok is False}
    head, *rest = middle
    ratios = ", ".join(f"{run_figures[0].ratio:.2f}" for run_figures in runs)
    return [
        replace(head, name=f"{head.name}, median of {len(runs)} runs", baseline=f"{head.baseline}; runs: {ratios}"),
        *(replace(figure, ok=False) if index in failed else figure for index, figure in enumerate(rest, start=1)),
    ]


def _measure(*, n: int, small: bool, template: str, kind: str, email: str) -> list[Figure]:
    from aiosmtpd.controller import Controller
    from sqlalchemy import select

    from bulksign.batches.rendering import document_context
    from bulksign.core.extensions import db
    from bulksign.doc_templates.jinja_sandbox import render_html
    from bulksign.models import SigningRequest
    from bulksign.work.pipeline import enqueue_renders
    from tests.support.services import free_port

    pooled = os.environ.get("BENCH_PIPELINE_POOLER", "pgbouncer") != "none"
    sink = _Sink()
    port = free_port()
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        with bench_app(MAIL_PORT=port, pgbouncer=pooled) as app:
            concurrency = app.config["PDF_CONCURRENCY"]
            batch_id = _create_batch(app, n, html=template, email=email)
            sample = db.session.scalars(select(SigningRequest).limit(1)).first()
            html = render_html(
                db.session.get(type(sample.batch), batch_id).template_version.html, document_context(sample)
            )
            ids = list(db.session.scalars(select(SigningRequest.id).where(SigningRequest.batch_id == batch_id)))
            db.session.commit()
            # The baseline runs half before and half after the pipeline: a machine whose speed drifts
            # during the run (other tenants, thermal) weighs on both sides alike.
            bare_n = min(n, 40 if small else 2000) // 2
            # Adopted only while CPU is counted: the workers' own children, orphaned when they stop, go to init.
            with process_cpu.Orphans() as orphans:
                bare_cpu = process_cpu.reaped_cpu()
                bare_before = _bare_loop(html, bare_n, concurrency)
                orphans.reap()
                bare_cpu = process_cpu.reaped_cpu() - bare_cpu

                # Workers start (imports, connections) before the clock does: the figure is throughput.
                # As deployed: PDF_CONCURRENCY render workers and MAIL_WORKERS mail workers.
                workers = start_workers(app, [("pdf",)] * concurrency + [("mail",)] * MAIL_WORKERS)
                # Each role's processes: the worker trees (supervisor, worker, RQ's scheduler), the database side
                # (the server's backends of this database, PgBouncer), Redis. Imports and start-up are not counted.
                database = app.config["DATABASE_URL"].rsplit("/", 1)[1]
                roles = {
                    "render": [w.pid for w in workers[:concurrency]],
                    "mail": [w.pid for w in workers[concurrency:]],
                    "pgbouncer": process_cpu.children_named("pgbouncer"),
                    "redis": process_cpu.children_named("redis-server"),
                }
                idle_cpu = process_cpu.cpu_snapshot({**roles, "postgres": process_cpu.backend_pids(database)})
                orphans.reap()
                orphaned_cpu = process_cpu.reaped_cpu()
                worker_pids = _worker_pids()
                started = time.monotonic()
                enqueue_renders(ids)
                warm: dict[int, float] = {}
                last: dict[int, float] = {}

                def sample_memory(sent: int) -> None:
                    orphans.reap()  # the render workers' sandboxes, as they end (this process runs none now)
                    for pid in worker_pids:
                        rss = process_cpu.rss_mb(pid)
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
                busy = process_cpu.cpu_spent(
                    idle_cpu, process_cpu.cpu_snapshot({**roles, "postgres": process_cpu.backend_pids(database)})
                )
                orphans.reap()
                # wkhtmltopdf: the sandboxes' inits reaped here, and the outer bwraps the render workers reaped.
                wkhtmltopdf_cpu = process_cpu.reaped_cpu() - orphaned_cpu + busy["render"][1]
            stop_processes(workers)
            pipeline_rate = sent / elapsed
            bare_after = _bare_loop(html, bare_n, concurrency)
            bare_rate = 2 / (1 / bare_before + 1 / bare_after)
    finally:
        controller.stop()

    growth = max((last[pid] - warm[pid] for pid in warm if pid in last), default=0.0)
    ratio = pipeline_rate / bare_rate
    goal = 2.5
    label = f"{n:,} recipients, a contract {kind}" + (" (small)" if small else "")
    through = "through PgBouncer" if pooled else "straight to PostgreSQL"
    done = max(sent, 1)
    bare_ms = bare_cpu / max(bare_n, 1) * 1000
    per_doc_ms = {role: own / done * 1000 for role, (own, _) in busy.items()}
    per_doc_ms["wkhtmltopdf"] = wkhtmltopdf_cpu / done * 1000
    roles_shown = [
        ("render", "render workers' own CPU (wkhtmltopdf not counted)"),
        ("wkhtmltopdf", "wkhtmltopdf (and its sandbox) CPU"),
        ("mail", "mail workers' CPU"),
        ("postgres", "PostgreSQL backends' CPU"),
        ("pgbouncer", "PgBouncer CPU"),
        ("redis", "Redis CPU"),
    ]
    total_ms = sum(per_doc_ms[role] for role, _ in roles_shown)
    return [
        Figure(
            f"pipeline docs/s, {label}, {concurrency} pdf workers + {MAIL_WORKERS} mail workers, {through}",
            pipeline_rate,
            "docs/s",
            f"≥ {goal:g} × bare",
            ratio >= goal,
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
        *(
            Figure(
                f"{name} per document, {label}",
                per_doc_ms[role],
                "ms",
                "",
                None,
                per_doc_ms[role] / bare_ms if bare_ms else None,
                f"bare loop's wkhtmltopdf {bare_ms:.1f} ms",
            )
            for role, name in roles_shown
        ),
        # The bare loop keeps every core busy: where the pipeline does too, docs/s can be at most bare's × this inverse.
        Figure(
            f"whole pipeline's CPU per document (the rows above), {label}",
            total_ms,
            "ms",
            "",
            None,
            total_ms / bare_ms if bare_ms else None,
            f"bare loop's wkhtmltopdf {bare_ms:.1f} ms (all cores busy: ≤ {bare_ms / total_ms:.2f} × bare docs/s)",
        ),
        Figure(f"worker memory growth, 10 % → 100 % of {label}", max(growth, 0.0), "MB", "< 30 MB", growth < 30),
    ]


if __name__ == "__main__":
    for figure in run(small="--small" in sys.argv):
        print(figure)
    os._exit(0)

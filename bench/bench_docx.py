"""Word templates: the render pipeline, one by one and together, against a bare loop converting the same filled
.docx, all warm.

A batch of N recipients (1,000; small: 6) on a two-page Word contract (tests/support/docx_files) goes
through real render workers (``flask jobs worker pdf``, PDF_CONCURRENCY of them, each with its own warm
LibreOffice: a first wave of documents warms them before the clock starts) until every request is
generated: claim, docxtpl fill, LibreOffice conversion, storage, settle; one conversion a document
(``RENDER_TOGETHER=false``). Then a batch of M (400, ``BENCH_DOCX_TOGETHER_RECIPIENTS``; small: 12) goes through
fresh workers with ``RENDER_TOGETHER`` on: each chunk of ``RENDER_CHUNK_SIZE`` (small: 4) is merged, converted
once, split and every part checked (``documents.docx_together``). In the same run a bare loop
converts the first recipient's filled .docx as many times as the pipeline converts documents, with the same
concurrency, each thread with its own warm converter (``bulksign.documents.libreoffice``), half before the pipeline and
half after. CPU is counted per role from
/proc, as in ``bench_pipeline``: the render workers' own, their LibreOffice's (in a session of its own below
each worker), the database's (PostgreSQL backends: this pipeline sends no mail and uses no pooler), and the bare
loop's LibreOffice, to show what the pipeline adds around the converter.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench import Figure, Settled, bench_app, docs_per_second, stop_processes, wait_for_requests
from bench.bench_pipeline import start_workers
from bench.process_cpu import backend_pids, children_named, process_stat, tree


def _create_batch(user, version_id: int, n: int, *, offset: int = 0) -> int:
    from sqlalchemy import insert

    from bulksign.batches import counts as batch_counts
    from bulksign.core.extensions import db
    from bulksign.models import Batch, SigningRequest, utcnow

    now = utcnow()
    batch = Batch(name="bench", template_version_id=version_id, created_by_id=user.id, total_count=n, created_at=now)
    db.session.add(batch)
    db.session.flush()
    db.session.execute(
        insert(SigningRequest),
        [
            {
                "batch_id": batch.id,
                "row_number": i + 2,
                "email": f"r{offset + i}@example.com",
                "name": f"Получатель {offset + i}",
                "data": {"number": f"C-{i}", "city": "Москва", "role": "Инженер", "salary": "4200"},
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


def _bare_loop(filled: bytes, n: int, converters: list) -> float:
    """docs/s of LibreOffice alone: the same filled .docx, one warm converter per thread."""
    return docs_per_second(lambda i: converters[i % len(converters)].convert(filled, timeout=60), n, len(converters))


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except ProcessLookupError:
        return None


def _cpu_snapshot(workers: list[int], database: str) -> dict[tuple[str, int], float]:
    """(role, pid) → CPU seconds so far: a worker's tree is "render" in its session and "libreoffice" in the
    session LibreOffice gets; "database" is the PostgreSQL backends."""
    snapshot = {}
    for root in workers:
        session = _session(root)
        for pid in tree(root):
            stat = process_stat(pid)
            if stat is not None:
                snapshot[("render" if _session(pid) == session else "libreoffice", pid)] = stat[1]
    for pid in [*backend_pids(database), *children_named("pgbouncer")]:
        stat = process_stat(pid)
        if stat is not None:
            snapshot[("database", pid)] = stat[1]
    return snapshot


class _CpuWatch:
    """CPU seconds per role spent while it watches, from ``snapshot()`` ((role, pid) → CPU seconds so far) every
    0.2 s. A LibreOffice retired after LIBREOFFICE_MAX_DOCUMENTS is killed as a group and reaped by nobody of
    ours, so only repeated looks see what it spent: what it spent after the last look is lost."""

    def __init__(self, snapshot: Callable[[], dict[tuple[str, int], float]]):
        self._snapshot = snapshot
        self._before = snapshot()
        self._seen = dict(self._before)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(0.2):
            self._seen.update(self._snapshot())

    def stop(self) -> dict[str, float]:
        self._done.set()
        self._thread.join()
        self._seen.update(self._snapshot())
        spent: dict[str, float] = {}
        for (role, pid), cpu in self._seen.items():
            spent[role] = spent.get(role, 0.0) + cpu - self._before.get((role, pid), 0.0)
        return spent


def _converters_snapshot(converters: list) -> dict[tuple[str, int], float]:
    """The bare loop's LibreOffice trees: ("libreoffice", pid) → CPU seconds so far."""
    return {
        ("libreoffice", pid): (process_stat(pid) or ("", 0.0, 0.0))[1]
        for converter in converters
        if converter.pid
        for pid in tree(converter.pid)
    }


def _generate(ids: list[int], *, deadline: float) -> Settled:
    """Queue the renders of ``ids`` and wait until each is generated or failed (or the deadline passed)."""
    from bulksign.models import SigningRequest
    from bulksign.work.pipeline import enqueue_renders

    enqueue_renders(ids)
    return wait_for_requests(SigningRequest.id.in_(ids), total=len(ids), goal="generated", deadline=deadline)


@dataclass(frozen=True)
class _Pipeline:
    """One pass of the pipeline: documents generated, how, in how long, and the CPU each role spent on them."""

    settled: Settled
    elapsed: float
    busy: dict[str, float]

    @property
    def rate(self) -> float:
        return self.settled.reached / self.elapsed

    def per_doc(self, role: str) -> float:
        return self.busy.get(role, 0.0) / max(self.settled.reached, 1) * 1000


def _pipeline(app, ids: list[int], warm_ids: list[int], *, together: bool, chunk: int, small: bool) -> _Pipeline:
    """Render ``ids`` on fresh render workers (``RENDER_TOGETHER`` as ``together``, ``chunk`` documents a job),
    once ``warm_ids`` have started each worker's LibreOffice."""
    saved = {name: os.environ.get(name) for name in ("RENDER_TOGETHER", "RENDER_CHUNK_SIZE")}
    os.environ.update(RENDER_TOGETHER=str(together).lower(), RENDER_CHUNK_SIZE=str(chunk))
    app.config.update(RENDER_TOGETHER=together, RENDER_CHUNK_SIZE=chunk)
    workers = []
    try:
        workers = start_workers(app, [("pdf",)] * app.config["PDF_CONCURRENCY"])
        _generate(warm_ids, deadline=time.monotonic() + 300)  # each worker starts its LibreOffice here
        database = app.config["DATABASE_URL"].rsplit("/", 1)[1]
        watch = _CpuWatch(lambda: _cpu_snapshot([w.pid for w in workers], database))
        started = time.monotonic()
        settled = _generate(ids, deadline=started + (300 if small else 3600))
        elapsed = time.monotonic() - started
        return _Pipeline(settled, elapsed, watch.stop())
    finally:
        stop_processes(workers)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run(*, small: bool) -> list[Figure]:
    from bulksign.batches.rendering import document_context
    from bulksign.core.extensions import db
    from bulksign.doc_templates import docx_templates
    from bulksign.doc_templates.versions import create_template
    from bulksign.documents import libreoffice
    from bulksign.models import SigningRequest, utcnow
    from bulksign.people.users import create_user
    from tests.support import docx_files
    from tests.support.batches import request_ids

    n = 6 if small else int(os.environ.get("BENCH_DOCX_RECIPIENTS", "1000"))
    n_together = 12 if small else int(os.environ.get("BENCH_DOCX_TOGETHER_RECIPIENTS", "400"))
    source = docx_files.contract()
    # Small: one worker, one document per job one by one and 4 together; each LibreOffice start costs seconds.
    with bench_app(**({"RENDER_CHUNK_SIZE": 1, "PDF_CONCURRENCY": 1} if small else {})) as app:
        concurrency, chunk = app.config["PDF_CONCURRENCY"], app.config["RENDER_CHUNK_SIZE"]
        together_chunk = 4 if small else chunk
        user = create_user(db.session, email="bench@example.com", password="bench-password", role="staff", now=utcnow())
        version = create_template(
            db.session, name="Договор", html="", kind="docx", file=source, user=user, now=utcnow()
        ).version
        db.session.commit()
        warm_ids = request_ids(_create_batch(user, version.id, concurrency * chunk, offset=n))
        ids = request_ids(_create_batch(user, version.id, n))
        warm_together = request_ids(_create_batch(user, version.id, concurrency * together_chunk, offset=2 * n))
        together_ids = request_ids(_create_batch(user, version.id, n_together, offset=3 * n))
        sample = db.session.get(SigningRequest, ids[0])
        filled = docx_templates.fill(source, document_context(sample))
        db.session.commit()

        converters = [libreoffice.Converter() for _ in range(concurrency)]
        try:
            for converter in converters:  # warm, as the workers will be
                converter.convert(filled, timeout=120)
            # As many documents as the pipeline converts, so each converter reaches the same age: LibreOffice
            # slows as it serves (84 ms of CPU per contract at its start, 100 ms after 300 documents).
            bare_n = max(n // 2, concurrency)
            watch = _CpuWatch(lambda: _converters_snapshot(converters))
            bare_before = _bare_loop(filled, bare_n, converters)
            bare_cpu = watch.stop()["libreoffice"]
            alone = _pipeline(app, ids, warm_ids, together=False, chunk=chunk, small=small)
            together = _pipeline(app, together_ids, warm_together, together=True, chunk=together_chunk, small=small)
            watch = _CpuWatch(lambda: _converters_snapshot(converters))
            bare_after = _bare_loop(filled, bare_n, converters)
            bare_cpu += watch.stop()["libreoffice"]
        finally:
            for converter in converters:
                converter.stop()

    bare_per_doc = bare_cpu / (2 * bare_n) * 1000
    bare_rate = 2 / (1 / bare_before + 1 / bare_after)
    bare = (
        f"bare warm LibreOffice {bare_rate:.1f} docs/s ({bare_n} docs before: {bare_before:.1f}, "
        f"{bare_n} after: {bare_after:.1f})"
    )
    label = f"{n:,} recipients" + (" (small)" if small else "")
    label_together = f"{n_together:,} recipients, {together_chunk} a run" + (" (small)" if small else "")
    figures = [
        Figure(
            f"Word pipeline docs/s one by one (fill + convert + store), {label}, {concurrency} pdf workers",
            alone.rate,
            "docs/s",
            "≥ 0.8 × bare",
            alone.rate / bare_rate >= 0.8,
            alone.rate / bare_rate,
            bare,
        ),
        Figure(
            f"Word pipeline docs/s together (fill + merge + convert + split + check + store), {label_together}, "
            f"{concurrency} pdf workers",
            together.rate,
            "docs/s",
            "≥ 4 × bare",
            together.rate / bare_rate >= 4,
            together.rate / bare_rate,
            bare,
        ),
    ]
    for name, run_, count, shown in (
        ("one by one", alone, n, label),
        ("together", together, n_together, label_together),
    ):
        generated = run_.settled.reached
        figures += [
            Figure(
                f"Word documents generated {name}, {shown}",
                generated,
                "docs",
                f"= {count}{run_.settled.problems()}",
                generated == count,
            ),
            Figure(
                f"render workers' own CPU per document {name} (LibreOffice not counted), {shown}",
                run_.per_doc("render"),
                "ms",
            ),
            Figure(f"database CPU per document {name} (PostgreSQL backends), {shown}", run_.per_doc("database"), "ms"),
            Figure(
                f"LibreOffice CPU per document {name} (restarts included), {shown}",
                run_.per_doc("libreoffice"),
                "ms",
                "",
                None,
                run_.per_doc("libreoffice") / max(bare_per_doc, 1e-9),
                f"bare {bare_per_doc:.1f} ms",
            ),
        ]
    return figures


if __name__ == "__main__":
    for figure in run(small="--small" in sys.argv):
        print(figure)
    os._exit(0)

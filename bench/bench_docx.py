"""Word templates: the render pipeline against a bare loop converting the same filled .docx, both warm.

A batch of N recipients (1,000; small: 6) on a two-page Word contract (tests/support/docx_files) goes
through real render workers (``flask jobs worker pdf``, PDF_CONCURRENCY of them, each with its own warm
LibreOffice: a first wave of documents warms them before the clock starts) until every request is
generated: claim, docxtpl fill, LibreOffice conversion, storage, settle. In the same run a bare loop
converts the first recipient's filled .docx with the same concurrency, each thread with its own warm
converter (``bulksign.libreoffice``), half before the pipeline and half after.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

from bench import Figure, Settled, bench_app, docs_per_second, stop_processes, wait_for_requests
from bench.bench_pipeline import ROOT, _wait_for_workers


def _create_batch(user, version_id: int, n: int, *, offset: int = 0) -> int:
    from sqlalchemy import insert

    from bulksign import batch_counts
    from bulksign.extensions import db
    from bulksign.models import Batch, SigningRequest, utcnow

    now = utcnow()
    batch = Batch(name="bench", template_version_id=version_id, created_by_id=user.id, total_count=n, created_at=now)
    db.session.add(batch)
    db.session.flush()
    db.session.execute(insert(SigningRequest), [
        {"batch_id": batch.id, "row_number": i + 2, "email": f"r{offset + i}@example.com",
         "name": f"Получатель {offset + i}", "data": {"number": f"C-{i}", "city": "Москва", "role": "Инженер",
                                                      "salary": "4200"},
         "status": "pending", "status_changed_at": now, "created_at": now}
        for i in range(n)])
    batch_counts.rebuild(db.session, batch_ids=[batch.id])
    db.session.commit()
    return batch.id


def _bare_loop(filled: bytes, n: int, converters: list) -> float:
    """docs/s of LibreOffice alone: the same filled .docx, one warm converter per thread."""
    return docs_per_second(lambda i: converters[i % len(converters)].convert(filled, timeout=60), n, len(converters))


def _generate(ids: list[int], *, deadline: float) -> Settled:
    """Queue the renders of ``ids`` and wait until each is generated or failed (or the deadline passed)."""
    from bulksign.models import SigningRequest
    from bulksign.pipeline import enqueue_renders

    enqueue_renders(ids)
    return wait_for_requests(SigningRequest.id.in_(ids), total=len(ids), goal="generated", deadline=deadline)


def run(*, small: bool) -> list[Figure]:
    from bulksign import docx_templates, libreoffice
    from bulksign.doc_templates import create_template
    from bulksign.extensions import db
    from bulksign.jobs.pdf import document_context
    from bulksign.models import SigningRequest, utcnow
    from bulksign.users import create_user
    from tests.support import docx_files
    from tests.support.batches import request_ids, worker_env

    n = 6 if small else int(os.environ.get("BENCH_DOCX_RECIPIENTS", "1000"))
    source = docx_files.contract()
    # Small: one worker and one document per job; each LibreOffice start costs seconds.
    with bench_app(**({"RENDER_CHUNK_SIZE": 1, "PDF_CONCURRENCY": 1} if small else {})) as app:
        concurrency = app.config["PDF_CONCURRENCY"]
        user = create_user(db.session, email="bench@example.com", password="bench-password", role="staff",
                           now=utcnow())
        version = create_template(db.session, name="Договор", html="", kind="docx", file=source, user=user,
                                  now=utcnow()).version
        db.session.commit()
        warm_ids = request_ids(_create_batch(user, version.id, concurrency * app.config["RENDER_CHUNK_SIZE"],
                                             offset=n))
        ids = request_ids(_create_batch(user, version.id, n))
        sample = db.session.get(SigningRequest, ids[0])
        filled = docx_templates.fill(source, document_context(sample))
        db.session.commit()

        converters = [libreoffice.Converter() for _ in range(concurrency)]
        workers = []
        try:
            for converter in converters:  # warm, as the workers will be
                converter.convert(filled, timeout=120)
            bare_n = max(min(n, 400) // 2, concurrency)
            bare_before = _bare_loop(filled, bare_n, converters)

            workers = [subprocess.Popen([sys.executable, "-m", "flask", "jobs", "worker", "pdf"], cwd=ROOT,
                                        env=worker_env(app), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                       for _ in range(concurrency)]
            _wait_for_workers(len(workers), timeout=60)
            _generate(warm_ids, deadline=time.monotonic() + 300)  # each worker starts its LibreOffice here
            started = time.monotonic()
            settled = _generate(ids, deadline=started + (300 if small else 3600))
            elapsed = time.monotonic() - started
            bare_after = _bare_loop(filled, bare_n, converters)
        finally:
            stop_processes(workers)
            for converter in converters:
                converter.stop()

    generated = settled.reached
    pipeline_rate = generated / elapsed
    bare_rate = 2 / (1 / bare_before + 1 / bare_after)
    ratio = pipeline_rate / bare_rate
    label = f"{n:,} recipients" + (" (small)" if small else "")
    return [
        Figure(f"Word pipeline docs/s (fill + convert + store), {label}, {concurrency} pdf workers", pipeline_rate,
               "docs/s", "≥ 0.8 × bare", ratio >= 0.8, ratio,
               f"bare warm LibreOffice {bare_rate:.1f} docs/s ({bare_n} docs before: {bare_before:.1f}, "
               f"{bare_n} after: {bare_after:.1f})"),
        Figure(f"Word documents generated, {label}", generated, "docs", f"= {n}{settled.problems()}",
               generated == n),
    ]


if __name__ == "__main__":
    for figure in run(small="--small" in sys.argv):
        print(figure)
    os._exit(0)

"""One batch does not hold everyone else's work: a 5-recipient batch behind a running 10,000-recipient one.

A batch of N recipients (10,000; small: 150) goes through real worker processes as deployed (PDF_CONCURRENCY on
``pdf``, one on ``mail``, the throttle off) to a local SMTP sink. Once its first invitations are out, another
user creates a 5-recipient batch; the figure is how long until all five invitations are delivered, and how far
the big batch got meanwhile. Each batch keeps only ``CHUNKS_QUEUED_PER_BATCH`` chunk jobs in line per step
(``work/pipeline.py``), so the small batch waits behind a few chunks, not behind the big batch's thousands.
(Before the windows, its render waited behind every render job of the big batch: an hour behind 100,000.)
"""

from __future__ import annotations

import os
import sys
import time

from bench import Figure, bench_app, stop_processes, wait_for_requests
from bench.bench_pipeline import _create_batch, _Sink, start_workers

#: What the issue asks: the small batch's invitations go out within a minute.
TARGET_SECONDS = 60


def run(*, small: bool) -> list[Figure]:
    from aiosmtpd.controller import Controller

    from bulksign.models import SigningRequest
    from bulksign.work.pipeline import RENDER, top_up
    from tests.support.services import free_port

    n = 150 if small else int(os.environ.get("BENCH_FAIRNESS_RECIPIENTS", "10000"))
    sink = _Sink()
    port = free_port()
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        with bench_app(MAIL_PORT=port, pgbouncer=True) as app:
            concurrency = app.config["PDF_CONCURRENCY"]
            big = _create_batch(app, n)
            workers = start_workers(app, [("pdf",)] * concurrency + [("mail",)])
            try:
                started = time.monotonic()
                top_up(RENDER, [big])  # as batch creation does
                # Running: its first invitations delivered, every worker busy with it.
                wait_for_requests(
                    SigningRequest.batch_id == big, total=max(n // 100, 20), goal="sent", deadline=started + 600
                )
                into_big = time.monotonic() - started
                small_batch = _create_batch(app, 5, email="another@example.com", prefix="another")
                created = time.monotonic()
                top_up(RENDER, [small_batch])
                settled = wait_for_requests(
                    SigningRequest.batch_id == small_batch, total=5, goal="sent", deadline=created + 600
                )
                waited = time.monotonic() - created
                progress = wait_for_requests(SigningRequest.batch_id == big, total=n, goal="sent", deadline=0)
            finally:
                stop_processes(workers)
    finally:
        controller.stop()
    label = f"{n:,} recipients" + (" (small)" if small else "")
    return [
        Figure(
            f"5-recipient batch's invitations delivered, created {into_big:.0f} s into a batch of {label} "
            f"({concurrency} pdf workers + 1 mail worker)",
            waited,
            "s",
            f"< {TARGET_SECONDS} s{settled.problems()}",
            waited < TARGET_SECONDS and settled.reached == 5,
        ),
        Figure(
            f"the big batch's invitations delivered by then, {label}",
            100 * progress.reached / n,
            "%",
        ),
    ]


if __name__ == "__main__":
    for figure in run(small="--small" in sys.argv):
        print(figure)
    os._exit(0)

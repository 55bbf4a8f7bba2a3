"""Creating a 10,000-request batch (one transaction + pipelined render enqueue) in under 3 s on PostgreSQL.

Baseline: a bare psycopg ``executemany`` INSERT of the same rows into the same table, same run.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

from bench import Figure, bench_app

TARGET_SECONDS = 3.0


def run(*, small: bool) -> list[Figure]:
    from sqlalchemy import select

    from bulksign.batches.batch_settings import BatchSettings
    from bulksign.batches.creation import create_batch
    from bulksign.core.extensions import db
    from bulksign.doc_templates.versions import create_template
    from bulksign.models import SigningRequest
    from bulksign.people.users import create_user
    from bulksign.recipients.validation import Recipient
    from bulksign.work import pipeline

    count = 1_000 if small else 10_000
    now = datetime.now(UTC)
    with bench_app():
        user = create_user(db.session, email="bench@example.com", password="bench-password", role="staff", now=now)
        version = create_template(
            db.session, name="Bench", html="<p>{{ name }} {{ position }} {{ city }}</p>", user=user, now=now
        ).version
        db.session.commit()
        rows = [
            Recipient(
                i + 2,
                f"person.{i}@example.com",
                f"Person {i}",
                "+1 555 0100",
                {"name": f"Person {i}", "position": "Engineer", "city": "Riga"},
            )
            for i in range(count)
        ]

        started = time.perf_counter()
        result = create_batch(
            db.session, user=user, template_version=version, rows=rows, settings=BatchSettings(name="Bench"), now=now
        )
        seconds = time.perf_counter() - started
        # Creation queues the batch's window of chunks; the rest follow as those are claimed (pipeline.top_up).
        assert result.total_count == count and 0 < result.enqueued < count

        started = time.perf_counter()
        raw = db.engine.raw_connection()
        try:
            with raw.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO signing_requests (batch_id, row_number, email, name, phone, data, status, "
                    "status_changed_at, created_at, attempts, reminder_count) "
                    "VALUES (%s, %s, %s, %s, %s, %s, 'pending', %s, %s, 0, 0)",
                    [
                        (result.batch.id, r.row_number, r.email, r.name, r.phone, json.dumps(r.data), now, now)
                        for r in rows
                    ],
                )
            raw.commit()
        finally:
            raw.close()
        baseline = time.perf_counter() - started

        # The enqueue alone, on the baseline's rows: RQ's per-job cost is most of the total.
        ids = list(
            db.session.scalars(
                select(SigningRequest.id)
                .where(SigningRequest.batch_id == result.batch.id, SigningRequest.row_number.is_not(None))
                .order_by(SigningRequest.id.desc())
                .limit(count)
            )
        )
        started = time.perf_counter()
        pipeline.enqueue_renders(ids)
        enqueue = time.perf_counter() - started

        big = []
        if not small:
            # Above INLINE_ENQUEUE_MAX the request only queues the fan-out job: this is what the user waits for.
            many = [Recipient(i + 2, f"big.{i}@example.com", f"Big {i}", None, rows[0].data) for i in range(100_000)]
            started = time.perf_counter()
            create_batch(
                db.session, user=user, template_version=version, rows=many, settings=BatchSettings(name="Big"), now=now
            )
            big = [
                Figure(
                    name="create a 100,000-request batch (insert + fan-out job queued)",
                    value=time.perf_counter() - started,
                    unit="s",
                )
            ]
    return big + [
        Figure(
            name=f"create a {count:,}-request batch (insert + enqueue)",
            value=seconds,
            unit="s",
            target=f"< {TARGET_SECONDS:g} s" if not small else "",
            ok=seconds < TARGET_SECONDS if not small else None,
            ratio=seconds / baseline,
            baseline=f"bare executemany insert {baseline:.3f} s",
        ),
        Figure(name=f"enqueue alone: {count:,} render jobs (pipeline.enqueue_renders)", value=enqueue, unit="s"),
    ]

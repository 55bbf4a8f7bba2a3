"""A reminder tick over a 100,000-request batch with 50,000 reminders due: under 20 s and 300 MB.

The tick is the real periodic job's work: compare-and-set pages, mail rows, events, commit per
page and the pipelined send enqueue into Redis. Baseline, same run and same rows: one bare
``UPDATE ... RETURNING`` that advances the 50,000 counters and nothing else.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from bench import Figure, bench_app, peak_rss_mb

TARGET_SECONDS = 20.0
TARGET_MB = 300.0


def _insert_requests(session, *, batch_id: int, count: int, due: int, now: datetime) -> None:
    """``due`` requests invited 3 days ago (reminder 1 due), the rest a day ago; inserted in chunks."""
    from sqlalchemy import insert

    from bulksign.models import SigningRequest

    for start in range(0, count, 5000):
        rows = []
        for i in range(start, min(count, start + 5000)):
            sent = now - timedelta(days=3 if i < due else 1)
            rows.append(
                {
                    "batch_id": batch_id,
                    "row_number": i + 2,
                    "email": f"person{i}@example.org",
                    "name": f"Person {i}",
                    "data": {"name": f"Person {i}"},
                    "status": "sent",
                    "status_changed_at": sent,
                    "sent_at": sent,
                    "expires_at": sent + timedelta(days=7),
                    "created_at": sent,
                    "token_hash": f"{i:064d}",
                    "token_nonce": f"{i:032x}",
                    "reminder_count": 0,
                    "attempts": 0,
                }
            )
        session.execute(insert(SigningRequest), rows)
        session.commit()


def run(*, small: bool) -> list[Figure]:
    from sqlalchemy import select, text

    from bulksign.batches import counts as batch_counts
    from bulksign.core.extensions import db, get_redis
    from bulksign.doc_templates.versions import create_template
    from bulksign.jobs.periodic import send_due_reminders
    from bulksign.models import Batch, OutgoingMail
    from bulksign.people.users import create_user
    from bulksign.work.pipeline import SEND, enqueue_sends
    from tests.support.workers import queued

    count, due = (5_000, 2_500) if small else (100_000, 50_000)
    now = datetime.now(UTC)
    with bench_app():
        user = create_user(db.session, email="bench@example.com", password="bench-password", role="staff", now=now)
        version = create_template(db.session, name="Bench", html="<p>{{ name }}</p>", user=user, now=now).version
        batch = Batch(
            name="Bench",
            template_version_id=version.id,
            created_by_id=user.id,
            status="awaiting_signatures",
            total_count=count,
            created_at=now,
        )
        db.session.add(batch)
        db.session.commit()
        _insert_requests(db.session, batch_id=batch.id, count=count, due=due, now=now)
        batch_counts.rebuild(db.session, batch_ids=[batch.id])
        db.session.execute(text("ANALYZE signing_requests"))
        db.session.commit()

        cutoff = now - timedelta(days=2)
        started = time.perf_counter()
        returned = db.session.execute(
            text(
                "UPDATE signing_requests SET reminder_count = 1, last_reminder_at = :now WHERE batch_id = :b "
                "AND status IN ('sent', 'opened') AND sent_at <= :cutoff AND reminder_count < 1 RETURNING id"
            ),
            {"now": now, "b": batch.id, "cutoff": cutoff},
        ).all()
        db.session.commit()
        baseline = time.perf_counter() - started
        assert len(returned) == due
        del returned
        db.session.execute(text("UPDATE signing_requests SET reminder_count = 0, last_reminder_at = NULL"))
        db.session.commit()

        rss_before = peak_rss_mb()
        cpu_before = _cpu_seconds()
        started = time.perf_counter()
        summary = send_due_reminders(now=now)
        seconds = time.perf_counter() - started
        cpu = _cpu_seconds() - cpu_before
        peak = peak_rss_mb()
        assert summary.startswith(f"{due} reminders queued"), summary
        mail_ids = db.session.scalars(select(OutgoingMail.id).where(OutgoingMail.kind == "reminder")).all()
        assert len(queued(SEND, mail_ids)) == due

        # How much of the tick is RQ's own per-job work: the same sends enqueued again into an empty Redis.
        mail_ids = list(db.session.scalars(select(OutgoingMail.id)))
        get_redis().flushdb()
        started = time.perf_counter()
        enqueue_sends(mail_ids)
        enqueue_seconds = time.perf_counter() - started
    label = f"{count:,} requests, {due:,} due"
    return [
        Figure(
            name=f"reminder tick ({label}): queue + enqueue",
            value=seconds,
            unit="s",
            target="" if small else f"< {TARGET_SECONDS:g} s",
            ok=None if small else seconds < TARGET_SECONDS,
            ratio=seconds / baseline,
            baseline=f"bare UPDATE … RETURNING {baseline:.3f} s",
        ),
        Figure(name=f"reminder tick ({label}): CPU of this process", value=cpu, unit="s"),
        Figure(
            name=f"enqueueing the {due:,} send jobs alone (RQ)",
            value=enqueue_seconds,
            unit="s",
            ratio=enqueue_seconds / seconds,
            baseline="the whole tick",
        ),
        Figure(
            name=f"reminder tick ({label}): peak memory of the process",
            value=peak,
            unit="MB",
            target="" if small else f"< {TARGET_MB:g} MB",
            ok=None if small else peak < TARGET_MB,
            baseline=f"before the tick {rss_before:.0f} MB",
        ),
    ]


def _cpu_seconds() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

"""Numbers for Prometheus, read fresh at each scrape: requests and batches, queues, the scheduler, and ``telemetry``.
More in docs/architecture/ops.md."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import CollectorRegistry
from redis import Redis
from rq import Queue
from rq.worker_registration import get_keys
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from bulksign.mail.mail_server import current_outage
from bulksign.models import Batch, BatchStatusCount
from bulksign.models.status import BatchStatus
from bulksign.ops import telemetry
from bulksign.work.scheduler_ticks import last_tick

#: Batches are shown one by one while in flight and for this long after they finished (late bounces).
RECENT_BATCHES = timedelta(days=7)


@dataclass(frozen=True)
class QueueFigures:
    #: Jobs per state: queued, started, failed, scheduled.
    jobs: dict[str, int]
    #: Seconds since the job at the head of the queue was enqueued (0 when empty).
    oldest_age_seconds: float
    #: Live workers listening on the queue.
    workers: int


@dataclass(frozen=True)
class Snapshot:
    requests_by_status: dict[str, int]
    #: batch id → status → requests, for batches in flight or finished within ``RECENT_BATCHES``.
    batches: dict[int, dict[str, int]]
    batch_created: dict[int, datetime]
    batches_in_flight: int
    queues: dict[str, QueueFigures]
    scheduler_last_tick: datetime | None
    #: The first failed connection of the mail server's current outage (None: the mail workers reach it).
    mail_server_down_since: datetime | None
    #: Sends per second the throttle allows (0: no limit).
    mail_limit_per_second: float
    counted: dict
    processes: list[telemetry.ProcessFigures]


def queue_figures(queue: Queue, *, now: datetime) -> QueueFigures:
    """A queue's job counts, its oldest job's age and its live workers (a few Redis round trips)."""
    jobs = {
        "queued": queue.count,
        "started": queue.started_job_registry.count,
        "failed": queue.failed_job_registry.count,
        "scheduled": queue.scheduled_job_registry.count,
    }
    age = 0.0
    head = queue.get_job_ids(0, 1)
    job = queue.fetch_job(head[0]) if head else None
    if job is not None and job.enqueued_at:
        age = max(0.0, (now - job.enqueued_at.replace(tzinfo=now.tzinfo)).total_seconds())
    # The registry keeps a killed worker until some worker cleans it up; its own key expires with its heartbeat.
    keys = list(get_keys(queue=queue))
    pipe = queue.connection.pipeline(transaction=False)
    for key in keys:
        pipe.exists(key)
    workers = sum(pipe.execute()) if keys else 0
    return QueueFigures(jobs=jobs, oldest_age_seconds=age, workers=workers)


def snapshot(
    session: Session, *, redis: Redis, queues: dict[str, Queue], now: datetime, mail_limit_per_second: float
) -> Snapshot:
    """Read every figure once: 4 queries on small tables, a few Redis round trips per queue, two for telemetry."""
    by_status: dict[str, int] = {
        status: count
        for status, count in session.execute(
            select(BatchStatusCount.status, func.sum(BatchStatusCount.count)).group_by(BatchStatusCount.status)
        )
    }
    open_batch = Batch.status.in_([BatchStatus.PENDING, BatchStatus.PROCESSING])
    recent = select(Batch.id, Batch.created_at).where(or_(open_batch, Batch.finished_at >= now - RECENT_BATCHES))
    created: dict[int, datetime] = {bid: at for bid, at in session.execute(recent)}
    batches: dict[int, dict[str, int]] = {bid: {} for bid in created}
    if created:
        rows = session.execute(
            select(BatchStatusCount.batch_id, BatchStatusCount.status, BatchStatusCount.count).where(
                BatchStatusCount.batch_id.in_(list(created))
            )
        )
        for batch_id, status, n in rows:
            batches[batch_id][status] = n
    in_flight = session.scalar(select(func.count()).select_from(Batch).where(open_batch)) or 0
    return Snapshot(
        requests_by_status={s: int(n or 0) for s, n in by_status.items()},
        batches=batches,
        batch_created=created,
        batches_in_flight=in_flight,
        queues={name: queue_figures(q, now=now) for name, q in queues.items()},
        scheduler_last_tick=last_tick(redis),
        mail_limit_per_second=mail_limit_per_second,
        mail_server_down_since=outage.since if (outage := current_outage(redis)) else None,
        counted=telemetry.read(redis),
        processes=telemetry.processes(redis, now=time.time()),
    )


def _gauge(name: str, help_text: str, labels: list[str], samples) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, help_text, labels=labels)
    for label_values, value in samples:
        family.add_metric(list(label_values), value)
    return family


class _SnapshotCollector:
    def __init__(self, snap: Snapshot):
        self.snap = snap

    def collect(self):
        snap = self.snap
        yield _gauge(
            "bulksign_requests",
            "Signing requests by current status",
            ["status"],
            [((s,), n) for s, n in sorted(snap.requests_by_status.items())],
        )
        yield _gauge("bulksign_batches_in_flight", "Batches pending or processing", [], [((), snap.batches_in_flight)])
        yield _gauge(
            "bulksign_batch_requests",
            "Requests of a batch in flight or finished this week, by status",
            ["batch_id", "status"],
            [((str(b), s), n) for b, counts in sorted(snap.batches.items()) for s, n in sorted(counts.items())],
        )
        yield _gauge(
            "bulksign_batch_created_timestamp_seconds",
            "When the batch was created",
            ["batch_id"],
            [((str(b),), at.timestamp()) for b, at in sorted(snap.batch_created.items())],
        )
        yield _gauge(
            "bulksign_queue_jobs",
            "RQ jobs per queue and state",
            ["queue", "state"],
            [((q, state), n) for q, figures in sorted(snap.queues.items()) for state, n in figures.jobs.items()],
        )
        yield _gauge(
            "bulksign_queue_oldest_job_age_seconds",
            "Age of the job at the head of the queue",
            ["queue"],
            [((q,), f.oldest_age_seconds) for q, f in sorted(snap.queues.items())],
        )
        yield _gauge(
            "bulksign_queue_workers",
            "Live RQ workers listening on the queue",
            ["queue"],
            [((q,), f.workers) for q, f in sorted(snap.queues.items())],
        )
        if snap.scheduler_last_tick is not None:
            yield _gauge(
                "bulksign_scheduler_last_tick_timestamp_seconds",
                "When the scheduler last polled",
                [],
                [((), snap.scheduler_last_tick.timestamp())],
            )
        down_since = snap.mail_server_down_since
        yield _gauge(
            "bulksign_mail_server_down_since_timestamp_seconds",
            "Since when the mail workers cannot connect to the mail server (0: they can)",
            [],
            [((), down_since.timestamp() if down_since else 0.0)],
        )
        yield _gauge(
            "bulksign_mail_throttle_limit_per_second",
            "Sends per second the mail throttle allows (0: none)",
            [],
            [((), snap.mail_limit_per_second)],
        )
        yield _gauge(
            "bulksign_process_resident_memory_bytes",
            "Resident memory of each web and worker process",
            ["process", "role"],
            [((p.process, p.role), p.rss_bytes) for p in snap.processes if p.rss_bytes is not None],
        )
        yield _gauge(
            "bulksign_db_pool_connections_in_use",
            "Database connections checked out, per process",
            ["process", "role"],
            [((p.process, p.role), p.pool_in_use) for p in snap.processes if p.pool_in_use is not None],
        )
        yield from self._counted()

    def _counted(self):
        for family in telemetry.FAMILIES:
            values = self.snap.counted.get(family.name, {})
            if family.kind == "counter":
                counter = CounterMetricFamily(family.name, family.help, labels=list(family.labels))
                for labels, value in sorted(values.items()):
                    counter.add_metric(list(labels), value)
                yield counter
            else:
                histogram = HistogramMetricFamily(family.name, family.help, labels=list(family.labels))
                for labels, figures in sorted(values.items()):
                    histogram.add_metric(list(labels), buckets=list(figures.buckets), sum_value=figures.sum)
                yield histogram
        reminders = CounterMetricFamily("bulksign_reminders_sent", "Reminder mails sent")
        reminders.add_metric([], self.snap.counted.get(telemetry.MAILS.name, {}).get(("reminder", "sent"), 0))
        yield reminders


def registry_for(snap: Snapshot) -> CollectorRegistry:
    """A registry that exposes this snapshot (built per scrape)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SnapshotCollector(snap))
    return registry

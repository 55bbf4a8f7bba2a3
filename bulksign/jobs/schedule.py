"""Periodic jobs declared as data, registered with rq-scheduler idempotently at start-up.

Each job's scheduler id is derived from its name, function and interval, so restarting the
scheduler (or running two) never schedules a job twice, and a changed interval replaces the old one.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from bulksign.core.logs import log
from bulksign.work import queues
from bulksign.work.scheduler_ticks import record_tick

logger = logging.getLogger(__name__)

# RQ job ids may hold only letters, digits, "_" and "-".
ID_PREFIX = "periodic-"


@dataclass(frozen=True)
class PeriodicJob:
    #: Short stable name, e.g. ``reconcile``.
    name: str
    #: A function taking ``now`` (a datetime); it runs inside the app context, on its handle's queue and timeout.
    handle: queues.JobHandle
    interval_seconds: int

    @property
    def job_id(self) -> str:
        digest = hashlib.sha1(f"{self.handle.path}:{self.interval_seconds}".encode()).hexdigest()[:10]
        return f"{ID_PREFIX}{self.name}-{digest}"


#: Every periodic job. ``flask jobs tick`` runs each once; the scheduler runs each on its interval.
PERIODIC_JOBS: tuple[PeriodicJob, ...] = (
    PeriodicJob("batch-rollup", queues.ROLLUP_BATCHES, 15),
    PeriodicJob("webhooks", queues.WEBHOOK_DISPATCH, 15),
    # A killed worker's chunk is queued again within beat trust (30 s, work/pipeline.py) + this of the kill.
    PeriodicJob("reconcile", queues.RECONCILE, 30),
    # Expiry first in a tick: a request past its deadline gets no reminder.
    PeriodicJob("expiry", queues.EXPIRE, 60),
    PeriodicJob("reminders", queues.REMIND, 60),
    # Countersigners' digests that are due, and "sign all" runs whose chunk job died.
    PeriodicJob("countersign", queues.COUNTERSIGN_DIGESTS, 60),
    PeriodicJob("reseal", queues.RESEAL, 300),
    PeriodicJob("idempotency-keys", queues.PURGE_IDEMPOTENCY_KEYS, 3600),
    # Documents and personal data past their keeping time (batches/retention.py); bounded per run, resumable.
    PeriodicJob("retention", queues.PURGE_RETENTION, 3600),
)


def register_periodic_jobs(scheduler, jobs: tuple[PeriodicJob, ...] = PERIODIC_JOBS) -> list[str]:
    """Schedule each job unless already scheduled; cancel periodic jobs no longer declared. Returns new ids."""
    wanted = {job.job_id: job for job in jobs}
    for scheduled in scheduler.get_jobs():
        if scheduled.id.startswith(ID_PREFIX) and scheduled.id not in wanted:
            scheduler.cancel(scheduled)
            log(logger, logging.INFO, "periodic job removed", job_id=scheduled.id)
    added = []
    for job_id, job in wanted.items():
        if job_id in scheduler:
            continue
        scheduler.schedule(
            scheduled_time=datetime.now(UTC),
            func=queues.RUN_PERIODIC.path,
            args=[job.handle.path],
            interval=job.interval_seconds,
            repeat=None,
            id=job_id,
            queue_name=job.handle.queue,
            timeout=job.handle.timeout,
            result_ttl=job.interval_seconds * 10,
        )
        added.append(job_id)
        log(logger, logging.INFO, "periodic job scheduled", job_id=job_id, interval=job.interval_seconds)
    return added


def periodic_scheduler_class():
    """rq-scheduler that re-registers the periodic jobs on every poll.

    Registration is idempotent and cheap, and doing it each poll means a Redis that lost its
    data (restart, flush) gets the reconciler and the other periodic jobs back within one
    interval, instead of never.
    """
    from rq_scheduler import Scheduler

    class PeriodicScheduler(Scheduler):
        def enqueue_jobs(self):
            register_periodic_jobs(self)
            jobs = super().enqueue_jobs()
            # Readiness (/readyz) fails when this stops for a few minutes.
            record_tick(self.connection, now=datetime.now(UTC))
            return jobs

    return PeriodicScheduler

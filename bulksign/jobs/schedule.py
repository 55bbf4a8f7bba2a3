"""Periodic jobs declared as data, registered with rq-scheduler idempotently at start-up.

Each job's scheduler id is derived from its name, function and interval, so restarting the
scheduler (or running two) never schedules a job twice, and a changed interval replaces the old one.
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime, timezone

from ..logs import log
from ..readiness import record_scheduler_tick

logger = logging.getLogger(__name__)

# RQ job ids may hold only letters, digits, "_" and "-".
ID_PREFIX = "periodic-"


@dataclass(frozen=True)
class PeriodicJob:
    #: Short stable name, e.g. ``reconcile``.
    name: str
    #: Dotted path of a function taking ``now`` (a datetime); it runs inside the app context.
    func: str
    interval_seconds: int
    queue: str = "default"
    timeout_seconds: int = 600

    @property
    def job_id(self) -> str:
        digest = hashlib.sha1(f"{self.func}:{self.interval_seconds}".encode()).hexdigest()[:10]
        return f"{ID_PREFIX}{self.name}-{digest}"


#: Every periodic job. ``flask jobs tick`` runs each once; the scheduler runs each on its interval.
PERIODIC_JOBS: tuple[PeriodicJob, ...] = (
    PeriodicJob("batch-rollup", "bulksign.jobs.periodic.rollup_batches", 15),
    PeriodicJob("webhooks", "bulksign.jobs.webhooks.dispatch", 15),
    PeriodicJob("reconcile", "bulksign.jobs.periodic.reconcile_stuck_work", 60),
    # Expiry first in a tick: a request past its deadline gets no reminder.
    PeriodicJob("expiry", "bulksign.jobs.periodic.expire_requests", 60),
    PeriodicJob("reminders", "bulksign.jobs.periodic.send_due_reminders", 60),
    PeriodicJob("reseal", "bulksign.jobs.seal.seal_missing", 300),
    PeriodicJob("idempotency-keys", "bulksign.jobs.periodic.purge_idempotency_keys", 3600),
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
            scheduled_time=datetime.now(timezone.utc), func="bulksign.jobs.periodic.run_periodic",
            args=[job.func], interval=job.interval_seconds, repeat=None, id=job_id,
            queue_name=job.queue, timeout=job.timeout_seconds, result_ttl=job.interval_seconds * 10,
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
            record_scheduler_tick(self.connection, now=datetime.now(timezone.utc))
            return jobs

    return PeriodicScheduler

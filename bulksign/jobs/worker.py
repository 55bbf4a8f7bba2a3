"""The RQ worker class: jobs run in this process, inside the app context, one database session each."""
from __future__ import annotations

import time

from rq.worker import SimpleWorker

from .. import telemetry
from ..error_tracking import capture, job_scope
from ..extensions import db


class AppWorker(SimpleWorker):
    """No fork per job: the app, its connection pools and SMTP connections are reused across jobs.

    Each job's SQLAlchemy session is removed afterwards, so no state leaks from one job into the next.
    Each job's duration and outcome go to ``telemetry``; so do this process's memory and pool, on each
    job and each heartbeat, so an idle worker still shows.
    """

    def perform_job(self, job, queue):
        started = time.perf_counter()
        self._outcome = "succeeded"
        try:
            with job_scope(job):
                return super().perform_job(job, queue)
        finally:
            db.session.remove()
            with telemetry.record(self.connection) as figures:
                figures.observe(telemetry.JOB_DURATION, (queue.name,), time.perf_counter() - started)
                figures.count(telemetry.JOBS, (queue.name, self._outcome))
            self._report_process()

    def handle_exception(self, job, *exc_info):
        # Called before RQ decides, so ``should_retry`` still tells whether this failure is the last one.
        self._outcome = "retried" if job.should_retry else "failed"
        if job.should_retry:
            # Sentry's RQ integration reports only the final failure; the ones before it are warnings.
            capture(exc_info, level="warning", retry="true")
        return super().handle_exception(job, *exc_info)

    def heartbeat(self, *args, **kwargs):
        result = super().heartbeat(*args, **kwargs)
        self._report_process()
        return result

    def register_death(self, *args, **kwargs):
        self._reporter().forget(self.connection)
        return super().register_death(*args, **kwargs)

    def _reporter(self) -> telemetry.ProcessReporter:
        if not hasattr(self, "_process_reporter"):
            self._process_reporter = telemetry.ProcessReporter("worker:" + ",".join(self.queue_names()))
        return self._process_reporter

    def _report_process(self) -> None:
        self._reporter().report(self.connection, pool_in_use=telemetry.pool_in_use(db.engine))

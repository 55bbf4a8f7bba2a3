"""The RQ worker class: jobs run in this process, inside the app context, one database session each."""
from __future__ import annotations

import logging
import os

from rq.worker import SimpleWorker

from .. import stopping
from ..extensions import db
from ..logs import log

logger = logging.getLogger(__name__)


def rss_mb() -> float:
    """This process's resident memory now, in MiB (Linux ``/proc``; 0 where it cannot be read)."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


class AppWorker(SimpleWorker):
    """No fork per job: the app, its connection pools and SMTP connections are reused across jobs.

    Each job's SQLAlchemy session is removed afterwards, so no state leaks from one job into the next.
    ``max_rss_mb``: after a job that leaves the process above this size, the worker finishes cleanly
    so that its supervisor starts a fresh one (a slow leak cannot take the worker down mid-job).
    """

    def __init__(self, *args, max_rss_mb: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_rss_mb = max_rss_mb

    def perform_job(self, job, queue):
        try:
            return super().perform_job(job, queue)
        finally:
            db.session.remove()
            self._recycle_if_grown(job)

    def _recycle_if_grown(self, job) -> None:
        if not self.max_rss_mb:
            return
        size = rss_mb()
        if size > self.max_rss_mb:
            log(logger, logging.WARNING, "worker memory over WORKER_MAX_RSS_MB, recycling after this job",
                job_id=job.id, rss_mb=round(size), limit_mb=self.max_rss_mb)
            # RQ's loop ends before the next job, as after a warm shutdown request.
            self._stop_requested = True

    def handle_warm_shutdown_request(self):
        # SIGTERM: the running chunk stops at its next item (or throttle wait) and hands the rest back.
        stopping.request()
        super().handle_warm_shutdown_request()

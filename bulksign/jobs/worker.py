"""The RQ worker class: jobs run in this process, inside the app context, one database session each."""
from __future__ import annotations

from rq.worker import SimpleWorker

from ..extensions import db


class AppWorker(SimpleWorker):
    """No fork per job: the app, its connection pools and SMTP connections are reused across jobs.

    Each job's SQLAlchemy session is removed afterwards, so no state leaks from one job into the next.
    """

    def perform_job(self, job, queue):
        try:
            return super().perform_job(job, queue)
        finally:
            db.session.remove()

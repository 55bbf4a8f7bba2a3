"""Real RQ workers in the test process: burst mode, counted, leaving the process's signals as they were."""

from __future__ import annotations

import signal

from bulksign.core.extensions import get_redis
from bulksign.jobs.worker import AppWorker
from bulksign.work.queues import QUEUE_NAMES, get_queue


class CountingWorker(AppWorker):
    # RQ keeps its job counters in Redis only, and a burst worker deletes its key on exit.
    performed = 0

    def perform_job(self, job, queue):
        self.performed += 1
        return super().perform_job(job, queue)

    def unsubscribe(self):
        # RQ unsubscribes, then stops its command listener and joins it for up to a second: the listener has
        # usually read the unsubscribe reply by then and waits 60 s for the next message, so every burst cost
        # a full second (a fifth of the suite). Stopping first lets that reply end the listener at once.
        if self.pubsub_thread:
            self.pubsub_thread.stop()
        super().unsubscribe()


def run_burst_worker(*queues: str, max_jobs: int | None = None) -> int:
    """Work the queues (all by default) until empty, in the current app context; returns how many jobs ran."""
    worker = CountingWorker([get_queue(n) for n in (queues or QUEUE_NAMES)], connection=get_redis())
    # RQ installs SIGTERM/SIGINT handlers that outlive the worker: without restoring them, the
    # test process turns a later Ctrl-C or kill into StopRequested inside unrelated tests.
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        worker.work(burst=True, max_jobs=max_jobs, logging_level="WARNING", with_scheduler=True)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return worker.performed


def one_per_job(app) -> None:
    """Jobs carry one request (render) or one mail (send) each, so a test can stop the pipeline between recipients."""
    app.config.update(RENDER_CHUNK_SIZE=1, SEND_CHUNK_SIZE=1)


def queued(step, ids) -> set[int]:
    """The ids among ``ids`` whose ``step`` waits in its queue (owned by a job that is in the queue)."""
    from bulksign.work.pipeline import owners

    waiting = set(get_queue(step.job.queue).job_ids)
    return {i for i, job_id in owners(step, list(ids)).items() if job_id in waiting}

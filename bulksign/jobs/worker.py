"""The RQ worker class: jobs run in this process, inside the app context, one database session each."""

from __future__ import annotations

import gc
import logging
import os
import signal
import time

from rq import worker_registration
from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT
from rq.scheduler import RQScheduler
from rq.worker import SimpleWorker

from bulksign.core.error_tracking import capture, job_scope
from bulksign.core.extensions import db
from bulksign.core.logs import log
from bulksign.core.parent_death import end_with_parent
from bulksign.jobs._app import session_registry
from bulksign.ops import telemetry
from bulksign.work import stopping
from bulksign.work.queues import HOUSEKEEPING_QUEUE

logger = logging.getLogger(__name__)

#: An idle worker's heartbeat period, in seconds (RQ's default is 405): each beat also registers the worker
#: again if Redis forgot it (emptied, restarted without persistence), so ``/readyz`` sees it again by then.
HEARTBEAT_SECONDS = 30
#: RQ waits on the queues for its worker TTL less 15 s between heartbeats; the key lapses 60 s after the TTL.
_WORKER_TTL = HEARTBEAT_SECONDS + 15
#: How long a stopping worker waits for its scheduler, which polls each second, before killing it.
SCHEDULER_STOP_SECONDS = 5


def rss_mb() -> float:
    """This process's resident memory now, in MiB (Linux ``/proc``; 0 where it cannot be read)."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


#: The tables of the TrueType programs Qt embeds, whose fontTools modules cutting a run's fonts loads.
_FONT_TABLES = ("head", "hhea", "maxp", "OS/2", "hmtx", "cmap", "loca", "glyf", "name", "post", "cvt ", "fpgm", "prep")


def warm_up(languages: tuple[str, ...]) -> None:
    """Load before the first job what every worker's first job loaded on its way (``job_scope``'s error tracking,
    PDFium, fontTools' table modules, ``languages``' dates, ``strptime``) and leave it, with everything loaded so
    far, out of the garbage collector's full passes: measured, about a tenth of the workers' CPU for a batch of 600
    documents, paid inside the first chunks while later ones waited."""
    import _strptime  # noqa: F401 - RQ's ``utcparse``

    import pypdfium2  # noqa: F401 - finding a rendered document's signature box
    import sentry_sdk  # noqa: F401 - ``job_scope``, around every job
    from babel import Locale
    from fontTools.ttLib import getTableModule

    for tag in _FONT_TABLES:
        getTableModule(tag)
    for language in languages:
        Locale.parse(language).months  # noqa: B018 - the locale's data, as dates in mails read it
    gc.collect()
    gc.freeze()


def housekeeping_first(queues: list) -> list:
    """The queues (or names) with ``default`` first, the others in their order."""
    return sorted(queues, key=lambda queue: getattr(queue, "name", queue) != HOUSEKEEPING_QUEUE)


class ParentBoundScheduler(RQScheduler):
    """RQ's scheduler, forked by its worker, ending when the worker dies, even by SIGKILL: left running with
    parent 1 it would poll for ever and hold its queues' scheduler locks, so the replacement worker's
    scheduler could not take them."""

    def start(self):
        # Taken before the fork: the child checks it did not lose its parent before asking for the signal.
        self._worker_pid = os.getpid()
        return super().start()

    def work(self):
        # The scheduler's own handlers first: the death signal must stop it at its next poll (its locks
        # released), not run the worker's handlers that the fork copied.
        self._install_signal_handlers()
        end_with_parent(parent=self._worker_pid)
        return super().work()


class AppWorker(SimpleWorker):
    """No fork per job: the app, its pools and SMTP connections are reused, each job's session removed after it;
    ``default`` is taken first; ``max_rss_mb``: past it, the worker ends after the job (docs/architecture/views.md).
    """

    def __init__(self, queues, *args, max_rss_mb: int = 0, freeze_after_first_job: bool = False, **kwargs):
        #: The queues as the command line gave them: the process's name in telemetry stays what was deployed.
        self.given_queue_names = [getattr(queue, "name", queue) for queue in queues]
        kwargs.setdefault("worker_ttl", _WORKER_TTL)
        super().__init__(housekeeping_first(queues), *args, **kwargs)
        self.max_rss_mb = max_rss_mb
        #: A worker process of its own (not a test's worker, whose process outlives it): see ``_freeze``.
        self._freeze_pending = freeze_after_first_job

    def perform_job(self, job, queue):
        started = time.perf_counter()
        self._outcome = "succeeded"
        try:
            with job_scope(job):
                return super().perform_job(job, queue)
        finally:
            session_registry().remove()
            with telemetry.record(self.connection) as figures:
                figures.observe(telemetry.JOB_DURATION, (queue.name,), time.perf_counter() - started)
                figures.count(telemetry.JOBS, (queue.name, self._outcome))
            self._report_process()
            self._recycle_if_grown(job)
            if self._freeze_pending:
                self._freeze()

    def _freeze(self) -> None:
        """After the first job, leave what the process holds for good out of the garbage collector's full passes
        (``gc.freeze``), which walked it all again for every document rendered together (docs/architecture/views.md)."""
        gc.collect()
        gc.freeze()
        self._freeze_pending = False

    def _recycle_if_grown(self, job) -> None:
        if not self.max_rss_mb:
            return
        size = rss_mb()
        if size > self.max_rss_mb:
            log(
                logger,
                logging.WARNING,
                "worker memory over WORKER_MAX_RSS_MB, recycling after this job",
                job_id=job.id,
                rss_mb=round(size),
                limit_mb=self.max_rss_mb,
            )
            # RQ's loop ends before the next job, as after a warm shutdown request.
            self._stop_requested = True

    def handle_warm_shutdown_request(self):
        # SIGTERM: the running chunk stops at its next item (or throttle wait) and hands the rest back.
        stopping.request()
        super().handle_warm_shutdown_request()

    def handle_exception(self, job, *exc_info):
        # Called before RQ decides, so ``should_retry`` still tells whether this failure is the last one.
        self._outcome = "retried" if job.should_retry else "failed"
        if job.should_retry:
            # Sentry's RQ integration reports only the final failure; the ones before it are warnings.
            capture(exc_info, level="warning", retry="true")
        return super().handle_exception(job, *exc_info)

    def heartbeat(self, *args, **kwargs):
        result = super().heartbeat(*args, **kwargs)
        self._register_again_if_forgotten()
        self._report_process()
        return result

    def _register_again_if_forgotten(self) -> None:
        """Put this worker back into RQ's registry (all workers, and each of its queues) if Redis lost it.

        The heartbeat has refreshed (or, with a pipeline, is about to refresh) the key's expiry, so only
        what it does not write is written here: the worker's description and its registry entries.
        """
        sets = [worker_registration.REDIS_WORKER_KEYS] + [
            worker_registration.WORKERS_BY_QUEUE_KEY % name for name in self.queue_names()
        ]
        with self.connection.pipeline(transaction=False) as pipe:
            for key in sets:
                pipe.sismember(key, self.key)
            if all(pipe.execute()):
                return
        log(
            logger,
            logging.WARNING,
            "worker missing from redis (emptied or restarted?), registering again",
            worker=self.name,
        )
        with self.connection.pipeline() as pipe:
            pipe.hset(self.key, mapping={**self.serialize(), "state": self.get_state()})
            worker_registration.register(self, pipe)
            pipe.execute()

    def _start_scheduler(
        self,
        burst=False,
        logging_level="INFO",
        date_format=DEFAULT_LOGGING_DATE_FORMAT,
        log_format=DEFAULT_LOGGING_FORMAT,
    ):
        if burst:
            # No process in burst mode: RQ moves the due jobs once, in this process.
            return super()._start_scheduler(burst, logging_level, date_format, log_format)
        # As RQ's, with a scheduler that ends with this process (RQ restarts it through the same object).
        self.scheduler = ParentBoundScheduler(
            self.queues,
            connection=self.connection,
            logging_level=logging_level if logging_level is not None else self.log.level,
            date_format=date_format,
            log_format=log_format,
            serializer=self.serializer,
        )
        self.scheduler.acquire_locks(auto_start=True)

    def stop_scheduler(self):
        """As RQ's, without waiting for ever: RQ joins the scheduler after its SIGTERM with no time limit, and one
        that does not stop would keep a warm-stopping worker, and the job it had just taken, hanging for good."""
        process = self.scheduler._process if self.scheduler else None
        if not (process and process.pid):
            return
        try:
            os.kill(process.pid, signal.SIGTERM)
        except OSError:
            return
        process.join(timeout=SCHEDULER_STOP_SECONDS)
        if process.is_alive():
            log(logger, logging.WARNING, "scheduler did not stop, killed", pid=process.pid, worker=self.name)
            process.kill()
            process.join(timeout=SCHEDULER_STOP_SECONDS)

    def register_death(self, *args, **kwargs):
        self._reporter().forget(self.connection)
        return super().register_death(*args, **kwargs)

    def _reporter(self) -> telemetry.ProcessReporter:
        if not hasattr(self, "_process_reporter"):
            self._process_reporter = telemetry.ProcessReporter("worker:" + ",".join(self.given_queue_names))
        return self._process_reporter

    def _report_process(self) -> None:
        self._reporter().report(self.connection, pool_in_use=telemetry.pool_in_use(db.engine))

"""The queues and every job put on them: the function a worker runs, its queue, its job id and its limits.
More in docs/architecture/work.md."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from flask import current_app
from rq import Queue, Retry
from rq.job import Job
from rq.queue import EnqueueData

from bulksign.core.extensions import get_redis
from bulksign.core.logs import current_request_id

F = TypeVar("F", bound=Callable)

#: Queue names. ``pdf`` renders and seals, ``mail`` sends through the shared throttle,
#: ``default`` runs periodic and bulk work, ``webhooks`` delivers to customer endpoints.
QUEUE_NAMES = ("pdf", "mail", "default", "webhooks")
#: The queue every worker that listens on it takes from first (``jobs.worker.AppWorker``).
HOUSEKEEPING_QUEUE = "default"


class AppQueue(Queue):
    """A job enqueued while answering a request carries that request's id: its errors name the request."""

    def create_job(self, *args, **kwargs):
        request_id = current_request_id()
        if request_id:
            kwargs["meta"] = {**(kwargs.get("meta") or {}), "request_id": request_id}
        return super().create_job(*args, **kwargs)


def get_queue(name: str) -> Queue:
    """One of ``QUEUE_NAMES`` on the app's Redis."""
    if name not in QUEUE_NAMES:
        raise ValueError(f"unknown queue {name!r}")
    return AppQueue(name, connection=get_redis())


class WiringError(ImportError):
    """A handle and its function disagree (renamed, moved, or never marked ``@job``)."""


@dataclass(frozen=True)
class JobHandle:
    """One kind of job: what it runs, where it waits, how its job ids are made and how long it may take."""

    #: ``module.function`` of the job; stored in Redis with every job, so a rename must keep it working.
    path: str
    queue: str
    #: ``str.format`` pattern of the job id (``seal-{id}``); None: the handle is never queued by id.
    id_pattern: str | None = None
    timeout: int = 300
    result_ttl: int = 600
    failure_ttl: int = 86400
    #: Config key of how often RQ retries the job, with backoff (None: not retried).
    attempts_setting: str | None = None
    #: Ahead of the jobs already waiting (something a person waits for, behind a big batch).
    at_front: bool = False

    @property
    def func(self) -> Callable:
        """The function marked ``@job(self)`` (its module must have been imported: ``load_jobs``)."""
        try:
            return _FUNCTIONS[self.path]
        except KeyError:
            raise WiringError(f"no @job function for {self.path} (is its module imported?)") from None

    def job_id(self, **parts) -> str:
        """This job's id for ``parts`` (the fields of ``id_pattern``)."""
        if self.id_pattern is None:
            raise ValueError(f"{self.path} has no job id pattern")
        return self.id_pattern.format(**parts)

    def enqueue(self, *args, job_id: str) -> Job:
        """Queue one call with these arguments under ``job_id``."""
        return get_queue(self.queue).enqueue_call(self.path, args=args, job_id=job_id, **self._options())

    def enqueue_unique(
        self, ids: Sequence[int], *, chunk: int = 1000, parts: Mapping[int, Mapping[str, object]] | None = None
    ) -> int:
        """Queue a call per id whose job (``id_pattern`` with ``id`` and that id's ``parts``, the pattern's other
        fields) does not exist yet; how many were queued. A finished job still exists for its ``result_ttl``: a
        handle whose id may be queued again for new work names that work in its pattern (``ADVANCE``'s step)."""
        redis, queue = get_redis(), get_queue(self.queue)
        enqueued = 0
        for start in range(0, len(ids), chunk):
            part = ids[start : start + chunk]
            job_ids = [self.job_id(id=i, **(parts or {}).get(i, {})) for i in part]
            with redis.pipeline() as pipe:
                for job_id in job_ids:
                    pipe.exists(Job.key_for(job_id))
                exists = pipe.execute()
            fresh = [(i, job_id) for i, job_id, there in zip(part, job_ids, exists) if not there]
            if fresh:
                queue.enqueue_many([self.prepare(i, job_id=job_id) for i, job_id in fresh])
                enqueued += len(fresh)
        return enqueued

    def prepare(self, *args, job_id: str, **overrides) -> EnqueueData:
        """One call for ``enqueue_many`` on this handle's queue; ``overrides`` (timeout, retry …) replace its own."""
        return Queue.prepare_data(self.path, args=args, job_id=job_id, **(self._options() | overrides))

    def _options(self) -> dict:
        retry = backoff(current_app.config[self.attempts_setting]) if self.attempts_setting else None
        return dict(
            timeout=self.timeout,
            result_ttl=self.result_ttl,
            failure_ttl=self.failure_ttl,
            retry=retry,
            at_front=self.at_front,
        )


def backoff(max_attempts: int) -> Retry:
    """RQ re-runs a job that raised a transient error after 1, 2, 4 … × ``RETRY_BACKOFF_SECONDS``.

    The jobs count attempts in the database and give up themselves; RQ only does the waiting.
    """
    base = current_app.config["RETRY_BACKOFF_SECONDS"]
    return Retry(max=max_attempts, interval=[base * 2**n for n in range(max_attempts)])


#: Every handle, in declaration order.
HANDLES: list[JobHandle] = []
#: path → the function marked ``@job`` for it.
_FUNCTIONS: dict[str, Callable] = {}


def _declare(path: str, *, queue: str, **options) -> JobHandle:
    if queue not in QUEUE_NAMES:
        raise ValueError(f"unknown queue {queue!r} for {path}")
    if any(h.path == path for h in HANDLES):
        raise ValueError(f"{path} is declared twice")
    handle = JobHandle(path, queue, **options)
    HANDLES.append(handle)
    return handle


def job(handle: JobHandle) -> Callable[[F], F]:
    """Mark the function ``handle`` runs; if its module and name are no longer ``handle.path``, the import fails."""

    def mark(func: F) -> F:
        path = f"{func.__module__}.{func.__qualname__}"
        if path != handle.path:
            raise WiringError(
                f"{path} is marked @job for {handle.path}: jobs already in Redis call that path, "
                "so keep the old name while they drain, or declare the new path in bulksign/work/queues.py"
            )
        _FUNCTIONS[path] = func
        return func

    return mark


def by_path(path: str) -> JobHandle:
    """The handle declared for ``path`` (a path read back from Redis)."""
    for handle in HANDLES:
        if handle.path == path:
            return handle
    raise LookupError(f"no job is declared as {path}")


def load_jobs() -> None:
    """Import every job module and check each handle has its ``@job`` function (``create_app`` runs this)."""
    for module in sorted({handle.path.rpartition(".")[0] for handle in HANDLES}):
        importlib.import_module(module)
    missing = [handle.path for handle in HANDLES if handle.path not in _FUNCTIONS]
    if missing:
        raise WiringError(f"declared in bulksign/work/queues.py but not marked @job: {', '.join(missing)}")


# Chunk jobs of the pipeline (``pipeline.Step``): it makes their ids, timeouts and retries per chunk.
# Not 0 as result TTL: RQ 2.12 deletes such a job through its execution records and raises if one
# expired (a run on a killed worker), turning a success into a failure.
RENDER_MANY = _declare("bulksign.jobs.pdf.render_many", queue="pdf", id_pattern="render-{first}-{nonce}", result_ttl=60)
SEND_MANY = _declare("bulksign.jobs.mail.send_many", queue="mail", id_pattern="send-{first}-{nonce}", result_ttl=60)

# One job per id. A storage or database hiccup in a seal is retried by RQ; the periodic ``seal_missing``
# catches the rest.
SEAL = _declare("bulksign.jobs.seal.seal", queue="pdf", id_pattern="seal-{id}", attempts_setting="SEAL_MAX_ATTEMPTS")
#: A step of a request several sign has finished: its document with their signatures, and the next step invited.
#: Named by the document's version and the step it starts: the job of the step before (or of the version a
#: correction replaced), finished, is kept ``result_ttl`` and must not stand in for it.
ADVANCE = _declare(
    "bulksign.jobs.routing.advance",
    queue="pdf",
    id_pattern="advance-{id}-v{version}-{step}",
    attempts_setting="SEAL_MAX_ATTEMPTS",
)
#: A slice of a countersigner's "sign all": each document signed through the single page's path (its seal queued
#: on ``pdf``); the id names the run, its generation and the slice's first party (``countersign_runs.RUN_CHUNK``).
COUNTERSIGN_CHUNK = _declare(
    "bulksign.jobs.countersign.sign_chunk",
    queue="default",
    id_pattern="countersign-{run}-{generation}-{first}",
    timeout=1800,
    result_ttl=600,
)
#: A one-time code lives 10 minutes: its SMS goes ahead of bulk mail.
SMS_CODE = _declare(
    "bulksign.jobs.sms.send_code",
    queue="mail",
    id_pattern="sms-code-{id}",
    attempts_setting="MAIL_MAX_ATTEMPTS",
    at_front=True,
)
#: The render jobs of a batch too big to queue while answering the upload.
BATCH_RENDERS = _declare(
    "bulksign.jobs.batches.enqueue_renders", queue="default", id_pattern="enqueue-renders-{id}", timeout=1800
)
#: One job per delivery attempt: a re-run of the dispatcher does not double a delivery.
WEBHOOK_DELIVERY = _declare(
    "bulksign.jobs.webhooks.deliver", queue="webhooks", id_pattern="webhook-{id}-{attempt}", timeout=60
)
SIGNED_ZIP = _declare("bulksign.jobs.exports.signed_zip", queue="default", id_pattern="export-{id}", timeout=3600)
BULK_BY_FILTER = _declare(
    "bulksign.jobs.bulk.apply_to_filter",
    queue="default",
    id_pattern="bulk-{batch_id}-{action}-{nonce}",
    timeout=3600,
    result_ttl=3600,
)
BULK_BY_IDS = _declare(
    "bulksign.jobs.bulk.apply_to_ids",
    queue="default",
    id_pattern="bulk-{batch_id}-{action}-{nonce}",
    timeout=3600,
    result_ttl=3600,
)

# Periodic jobs (``jobs/schedule.PERIODIC_JOBS``): the scheduler queues ``RUN_PERIODIC`` with one of their
# paths, under its own job ids; each runs on its handle's queue within its timeout.
RUN_PERIODIC = _declare("bulksign.jobs.periodic.run_periodic", queue="default")
ROLLUP_BATCHES = _declare("bulksign.jobs.periodic.rollup_batches", queue="default", timeout=600)
WEBHOOK_DISPATCH = _declare("bulksign.jobs.webhooks.dispatch", queue="default", timeout=600)
RECONCILE = _declare("bulksign.jobs.periodic.reconcile_stuck_work", queue="default", timeout=600)
EXPIRE = _declare("bulksign.jobs.periodic.expire_requests", queue="default", timeout=600)
REMIND = _declare("bulksign.jobs.periodic.send_due_reminders", queue="default", timeout=600)
COUNTERSIGN_DIGESTS = _declare("bulksign.jobs.countersign.send_due_digests", queue="default", timeout=600)
RESEAL = _declare("bulksign.jobs.seal.seal_missing", queue="default", timeout=600)
PURGE_IDEMPOTENCY_KEYS = _declare("bulksign.jobs.periodic.purge_idempotency_keys", queue="default", timeout=600)
PURGE_RETENTION = _declare("bulksign.jobs.retention.purge_retention", queue="default", timeout=1800)
#: A Word file checked with a sample row (``doc_templates.word_check``): someone waits on the page, so it goes ahead
#: of a batch's renders; a check is cheap to start again, so it is not retried.
WORD_CHECK = _declare(
    "bulksign.jobs.word_check.check", queue="pdf", id_pattern="word-check-{id}", timeout=300, at_front=True
)

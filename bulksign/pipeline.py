"""Handing requests to the queues. The database is committed first; jobs carry ids only.

Renders and sends go out in chunks: one job renders ``RENDER_CHUNK_SIZE`` requests or sends
``SEND_CHUNK_SIZE`` mails, so the per-job cost (RQ bookkeeping, loading, transitions, commits)
is paid once per chunk instead of once per recipient (bench/bench_pipeline.py).

Which job owns an id's step is kept in a Redis hash (``bulksign:owner:render``: request id →
job id), written before the job is queued and cleared by the job when it is done. Enqueueing
an id whose owner is still queued or running is a no-op, and the reconciler asks the same hash
whether a stuck request still has a live job. If Redis loses the hash, it loses the jobs too,
and the reconciler queues the work again.

Other jobs (seals, fan-outs) are one per id with an id derived from it (``enqueue_unique``).
"""
from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from flask import current_app
from rq import Queue, Retry, get_current_job
from rq.job import Job

from .extensions import get_queue, get_redis

#: Seconds a finished chunk job stays in Redis. Not 0: RQ 2.12 deletes such a job through its execution
#: records and raises if one expired (a run on a killed worker), turning a success into a failure.
RESULT_TTL = 60

#: RQ job states in which the job will still run (or is running).
LIVE_STATES = {b"queued", b"scheduled", b"deferred", b"started"}

#: Removes ids from an owner hash only where the given job still owns them (a newer job keeps its claim).
_RELEASE = """
for i = 2, #ARGV do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[1] then redis.call('HDEL', KEYS[1], ARGV[i]) end
end
return 0
"""


@dataclass(frozen=True)
class Step:
    """One chunked step of the pipeline: where its jobs go and what they run."""

    name: str
    queue: str
    func: str
    #: Config key of the chunk size.
    chunk_setting: str
    #: Config key of the attempts bound (RQ retries the job that often, with backoff).
    attempts_setting: str
    #: Seconds one item may take; a job's timeout is this times its chunk.
    seconds_each: int

    @property
    def owners_key(self) -> str:
        return f"bulksign:owner:{self.name}"


RENDER = Step("render", "pdf", "bulksign.jobs.pdf.render_many", "RENDER_CHUNK_SIZE", "RENDER_MAX_ATTEMPTS", 90)
SEND = Step("send", "mail", "bulksign.jobs.mail.send_many", "SEND_CHUNK_SIZE", "MAIL_MAX_ATTEMPTS", 60)


def enqueue_unique(queue: Queue, func: str, ids: Sequence[int], job_id_pattern: str, *,
                   timeout: int = 300, chunk: int = 1000, retry: Retry | None = None, at_front: bool = False) -> int:
    """Enqueue ``func(id)`` for each id whose job does not exist yet, pipelined. Returns how many were enqueued.

    ``at_front``: ahead of the jobs already waiting (something a person waits for, behind a big batch).
    """
    redis = get_redis()
    enqueued = 0
    for start in range(0, len(ids), chunk):
        part = ids[start:start + chunk]
        job_ids = [job_id_pattern.format(id=i) for i in part]
        with redis.pipeline() as pipe:
            for job_id in job_ids:
                pipe.exists(Job.key_for(job_id))
            exists = pipe.execute()
        fresh = [(i, job_id) for i, job_id, there in zip(part, job_ids, exists) if not there]
        if not fresh:
            continue
        queue.enqueue_many([
            Queue.prepare_data(func, args=(i,), job_id=job_id, timeout=timeout, result_ttl=600,
                               failure_ttl=86400, retry=retry, at_front=at_front)
            for i, job_id in fresh
        ])
        enqueued += len(fresh)
    return enqueued


def owners(step: Step, ids: Sequence[int]) -> dict[int, str]:
    """The job id recorded as owning each id's step (ids without an owner are left out)."""
    redis = get_redis()
    found: dict[int, str] = {}
    for start in range(0, len(ids), 1000):
        part = ids[start:start + 1000]
        for i, job_id in zip(part, redis.hmget(step.owners_key, part)):
            if job_id is not None:
                found[i] = job_id.decode()
    return found


def _live(job_ids: set[str]) -> set[str]:
    redis = get_redis()
    ordered = sorted(job_ids)
    with redis.pipeline(transaction=False) as pipe:
        for job_id in ordered:
            pipe.hget(Job.key_for(job_id), "status")
        states = pipe.execute()
    return {job_id for job_id, state in zip(ordered, states) if state in LIVE_STATES}


def enqueue_chunked(step: Step, ids: Sequence[int], *, chunk_size: int | None = None, at_front: bool = False) -> int:
    """Queue ``step`` for the ids no live job owns yet, ``chunk_size`` (default: the step's setting) ids per job.

    ``at_front``: ahead of the jobs already waiting. Returns how many ids were queued.
    """
    config = current_app.config
    ids = list(dict.fromkeys(ids))
    owned = owners(step, ids)
    live = _live(set(owned.values())) if owned else set()
    fresh = [i for i in ids if owned.get(i) not in live]
    if not fresh:
        return 0
    size = chunk_size or config[step.chunk_setting]
    chunks = [fresh[start:start + size] for start in range(0, len(fresh), size)]
    # A random suffix: the owner hash, not the job id, says which job does what.
    job_ids = [f"{step.name}-{chunk[0]}-{secrets.token_hex(4)}" for chunk in chunks]
    redis = get_redis()
    with redis.pipeline(transaction=False) as pipe:
        for chunk, job_id in zip(chunks, job_ids):
            pipe.hset(step.owners_key, mapping={i: job_id for i in chunk})
        pipe.execute()
    retry = backoff(config[step.attempts_setting] + 1)
    queue = get_queue(step.queue)
    for start in range(0, len(chunks), 1000):
        queue.enqueue_many([
            Queue.prepare_data(step.func, args=(chunk,), job_id=job_id, timeout=step.seconds_each * len(chunk) + 60,
                               result_ttl=RESULT_TTL, failure_ttl=86400, retry=retry, at_front=at_front)
            for chunk, job_id in zip(chunks[start:start + 1000], job_ids[start:start + 1000])
        ])
    return len(fresh)


def pulse() -> None:
    """Tell the reconciler the running chunk job is alive: called before each item of a chunk.

    A chunk may rightly run for many minutes, so its RQ timeout says little; and after Redis lost
    its data, RQ re-creates a worker's key without expiry, so a killed worker can look alive for
    ever. The reconciler trusts a running chunk job only while its last pulse is recent
    (``Step.seconds_each``).
    """
    job = get_current_job()
    if job is not None:
        job.heartbeat(datetime.now(timezone.utc), 0)


def release(step: Step, ids: Sequence[int]) -> None:
    """The running chunk job is done with these ids: they no longer have an owner (unless a newer job took them)."""
    job = get_current_job()
    if job is not None and ids:
        get_redis().eval(_RELEASE, 1, step.owners_key, job.id, *ids)


def hand_back(step: Step, ids: Sequence[int]) -> int:
    """The running chunk job stops before these (committed, untried) ids: queue them again for another worker.

    If Redis cannot take them now, they stay in the database's waiting state and the reconciler
    queues them later. Returns how many were queued.
    """
    release(step, ids)
    return enqueue_chunked(step, ids)


def disown(step: Step, ids: Sequence[int]) -> None:
    """Forget the owners of these ids (the reconciler found their jobs dead), so they can be queued again."""
    if ids:
        get_redis().hdel(step.owners_key, *ids)


def backoff(max_attempts: int) -> Retry:
    """RQ re-runs a job that raised a transient error after 1, 2, 4 … × ``RETRY_BACKOFF_SECONDS``.

    The jobs count attempts in the database and give up themselves; RQ only does the waiting.
    """
    base = current_app.config["RETRY_BACKOFF_SECONDS"]
    return Retry(max=max_attempts, interval=[base * 2 ** n for n in range(max_attempts)])


def enqueue_renders(request_ids: Sequence[int]) -> int:
    """Queue the PDF step for these requests (they must be committed in ``pending``)."""
    return enqueue_chunked(RENDER, request_ids)


def enqueue_sends(mail_ids: Sequence[int], *, at_front: bool = False) -> int:
    """Queue the send step for these outgoing mails (committed rows in ``queued``); ``at_front``: before bulk mail."""
    return enqueue_chunked(SEND, mail_ids, at_front=at_front)

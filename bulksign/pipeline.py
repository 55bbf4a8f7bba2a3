"""Handing requests to the queues. The database is committed first; jobs carry ids only.

Job ids are derived from the step and the id (``render-42``), so enqueueing work whose job
still exists is a no-op: the reconciler can re-enqueue freely without doubling work.
"""
from __future__ import annotations

from collections.abc import Sequence

from flask import current_app
from rq import Queue, Retry
from rq.job import Job

from .extensions import get_queue, get_redis

#: Job ids per step; RQ allows only letters, digits, "_" and "-".
RENDER_JOB = "render-{id}"
SEND_JOB = "send-{id}"


def enqueue_unique(queue: Queue, func: str, ids: Sequence[int], job_id_pattern: str, *,
                   timeout: int = 300, chunk: int = 1000, retry: Retry | None = None) -> int:
    """Enqueue ``func(id)`` for each id whose job does not exist yet, pipelined. Returns how many were enqueued."""
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
                               failure_ttl=86400, retry=retry)
            for i, job_id in fresh
        ])
        enqueued += len(fresh)
    return enqueued


def backoff(max_attempts: int) -> Retry:
    """RQ re-runs a job that raised a transient error after 1, 2, 4 … × ``RETRY_BACKOFF_SECONDS``.

    The jobs count attempts in the database and give up themselves; RQ only does the waiting.
    """
    base = current_app.config["RETRY_BACKOFF_SECONDS"]
    return Retry(max=max_attempts, interval=[base * 2 ** n for n in range(max_attempts)])


def enqueue_renders(request_ids: Sequence[int]) -> int:
    """Queue the PDF step for these requests (they must be committed in ``pending``)."""
    attempts = current_app.config["RENDER_MAX_ATTEMPTS"]
    return enqueue_unique(get_queue("pdf"), "bulksign.jobs.pdf.render", list(request_ids), RENDER_JOB,
                          retry=backoff(attempts))


def enqueue_sends(mail_ids: Sequence[int]) -> int:
    """Queue the send step for these outgoing mails (committed rows in ``queued``)."""
    # One more than the SMTP bound: a job that found the throttle busy for too long retries too.
    attempts = current_app.config["MAIL_MAX_ATTEMPTS"] + 1
    return enqueue_unique(get_queue("mail"), "bulksign.jobs.mail.send", list(mail_ids), SEND_JOB,
                          retry=backoff(attempts))

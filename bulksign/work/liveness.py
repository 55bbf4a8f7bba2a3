"""Which RQ jobs will still run: the one answer the pipeline (filling a batch's window) and the reconciler share.
More in docs/architecture/work.md."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import cast

from redis import Redis
from rq.job import Job
from rq.registry import ScheduledJobRegistry

#: Job states in which RQ will still run the job by itself.
WAITING_STATES = {b"queued", b"scheduled", b"deferred"}
#: A job is queued (its hash and its list entry are written in one transaction) and taken off its list a few
#: milliseconds before it is marked started: one marked queued that is in no list this long is lost.
LOST_AFTER_SECONDS = 15
#: A running job without beats (``beat_trust`` not given) whose worker has been silent this long past its
#: timeout is dead.
GRACE_SECONDS = 60

#: What ``job_states`` says of a live job.
WAITING, RUNNING = "waiting", "running"


def job_states(
    redis: Redis, job_ids: Sequence[str], *, now: datetime, beat_trust: int | None = None, queue: str | None = None
) -> dict[str, str]:
    """The ids among ``job_ids`` that RQ will still run, each ``WAITING`` or ``RUNNING``; dead ones are left out. A
    chunk job (``beat_trust``) is running while its last beat is that recent; the other rules:
    docs/architecture/work.md."""
    job_ids = list(job_ids)
    if not job_ids:
        return {}
    with redis.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hmget(
                Job.key_for(job_id), ["status", "started_at", "timeout", "worker_name", "last_heartbeat", "enqueued_at"]
            )
        rows = pipe.execute()
    running = [(job_id, row) for job_id, row in zip(job_ids, rows) if row[0] == b"started"]
    with redis.pipeline(transaction=False) as pipe:
        for _, row in running:
            pipe.exists(f"rq:worker:{(row[3] or b'').decode()}")
        workers_alive = pipe.execute()
    waiting = _waiting_in(redis, queue) if queue and any(row[0] == b"queued" for row in rows) else None
    due_at = {}
    if queue and any(row[0] == b"scheduled" for row in rows):
        with redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.zscore(ScheduledJobRegistry(queue, connection=redis).key, job_id)
            due_at = dict(zip(job_ids, pipe.execute()))
    states: dict[str, str] = {}
    for job_id, row in zip(job_ids, rows):
        if row[0] == b"queued" and waiting is not None and job_id not in waiting:
            enqueued = instant(row[5], now)
            if enqueued is None or now - enqueued >= timedelta(seconds=LOST_AFTER_SECONDS):
                continue
        # Scheduled: alive while it waits in the registry for a moment still ahead (the reconciler's
        # ``move_due_scheduled`` hands it to its queue then, if no live RQ scheduler did); gone, or long overdue, dead.
        if (
            row[0] == b"scheduled"
            and queue
            and (due_at[job_id] is None or due_at[job_id] < now.timestamp() - GRACE_SECONDS)
        ):
            continue
        if row[0] in WAITING_STATES:
            states[job_id] = WAITING
    for (job_id, (_, started_at, timeout, _worker, beat, _enqueued)), worker_alive in zip(running, workers_alive):
        if beat_trust is None:
            since, limit = instant(started_at, now), int(float(timeout or 180)) + GRACE_SECONDS
        else:
            # The beat comes from the worker's own process: recent, it proves the worker alive (after an emptied
            # Redis its key is back only at its next heartbeat, after the job).
            since, limit, worker_alive = instant(beat or started_at, now), beat_trust, True
        if worker_alive and since and now - since < timedelta(seconds=limit):
            states[job_id] = RUNNING
    return states


def live_jobs(
    redis: Redis, job_ids: Sequence[str], *, now: datetime, beat_trust: int | None = None, queue: str | None = None
) -> set[str]:
    """The ids among ``job_ids`` that RQ will still run (``job_states``)."""
    return set(job_states(redis, job_ids, now=now, beat_trust=beat_trust, queue=queue))


def _waiting_in(redis: Redis, queue: str) -> set[str]:
    """The ids of the jobs in a queue's list (one LRANGE; a batch keeps only a few chunks there)."""
    return {job_id.decode() for job_id in cast("list[bytes]", redis.lrange(f"rq:queue:{queue}", 0, -1))}


def instant(raw: bytes | None, now: datetime) -> datetime | None:
    """A time RQ wrote (ISO text, maybe without zone) as an aware datetime in ``now``'s zone."""
    if not raw:
        return None
    moment = datetime.fromisoformat(raw.decode().replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=now.tzinfo)

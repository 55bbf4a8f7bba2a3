"""Handing requests to the queues. The database is the truth and is committed first; Redis only delivers work.
More in docs/architecture/work.md."""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from flask import current_app
from redis.exceptions import RedisError
from rq import get_current_job
from rq.job import Job
from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.core.extensions import db, get_redis
from bulksign.core.logs import log
from bulksign.models import OutgoingMail, SigningRequest
from bulksign.models.mail import MailKind, MailStatus
from bulksign.models.status import Status
from bulksign.work.liveness import WAITING, job_states
from bulksign.work.queues import RENDER_MANY, SEND_MANY, JobHandle, backoff, get_queue

logger = logging.getLogger(__name__)

#: A running chunk job beats this often, from a thread of its own, whatever its current item is doing ...
BEAT_SECONDS = 5
#: ... and the reconciler trusts it while its last beat is this recent: six beats missed, its worker is gone.
BEAT_TRUST_SECONDS = 30

#: RQ job states in which the job will still run (or is running).
LIVE_STATES = {b"queued", b"scheduled", b"deferred", b"started"}

#: Removes ids from an owner hash only where the given job still owns them (a newer job keeps its claim).
_RELEASE = """
for i = 2, #ARGV do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[1] then redis.call('HDEL', KEYS[1], ARGV[i]) end
end
return 0
"""


def _pending_renders(session: Session, *, batch_id: int, limit: int) -> list[int]:
    """The batch's first requests waiting for their document (index ``batch_id, status, id``)."""
    return list(
        session.scalars(
            select(SigningRequest.id)
            .where(SigningRequest.batch_id == batch_id, SigningRequest.status == Status.PENDING)
            .order_by(SigningRequest.id)
            .limit(limit)
        )
    )


def _queued_invitations(session: Session, *, batch_id: int, limit: int) -> list[int]:
    """The queued invitations of the batch's first requests waiting for theirs (a generated request has one)."""
    return list(
        session.scalars(
            select(OutgoingMail.id)
            .join(SigningRequest, SigningRequest.id == OutgoingMail.request_id)
            .where(
                SigningRequest.batch_id == batch_id,
                SigningRequest.status == Status.GENERATED,
                OutgoingMail.kind == MailKind.INVITATION,
                OutgoingMail.status == MailStatus.QUEUED,
            )
            .order_by(SigningRequest.id)
            .limit(limit)
        )
    )


@dataclass(frozen=True)
class Step:
    """One chunked step of the pipeline: where its jobs go, what they run, and what of a batch waits for it."""

    name: str
    job: JobHandle
    #: Config key of the chunk size.
    chunk_setting: str
    #: Config key of the attempts bound (RQ retries the job that often, with backoff).
    attempts_setting: str
    #: Seconds one item may take; a job's timeout is this times its chunk.
    seconds_each: int
    #: A batch's first ids (in order) that wait for this step, from the database.
    waiting: Callable[..., list[int]]

    @property
    def owners_key(self) -> str:
        return f"bulksign:owner:{self.name}"


RENDER = Step("render", RENDER_MANY, "RENDER_CHUNK_SIZE", "RENDER_MAX_ATTEMPTS", 90, _pending_renders)
SEND = Step("send", SEND_MANY, "SEND_CHUNK_SIZE", "MAIL_MAX_ATTEMPTS", 60, _queued_invitations)


def owners(step: Step, ids: Sequence[int]) -> dict[int, str]:
    """The job id recorded as owning each id's step (ids without an owner are left out)."""
    redis = get_redis()
    found: dict[int, str] = {}
    for start in range(0, len(ids), 1000):
        part = ids[start : start + 1000]
        found_ids = cast("list[bytes | None]", redis.hmget(step.owners_key, list(part)))
        for i, job_id in zip(part, found_ids):
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
    ids = list(dict.fromkeys(ids))
    owned = owners(step, ids)
    live = _live(set(owned.values())) if owned else set()
    fresh = [i for i in ids if owned.get(i) not in live]
    _queue_chunks(step, fresh, size=chunk_size or current_app.config[step.chunk_setting], at_front=at_front)
    return len(fresh)


def _queue_chunks(step: Step, ids: Sequence[int], *, size: int, at_front: bool = False) -> None:
    """Record a new job as the owner of each ``size`` ids, then queue those jobs."""
    if not ids:
        return
    config = current_app.config
    chunks = [ids[start : start + size] for start in range(0, len(ids), size)]
    # A random suffix: the owner hash, not the job id, says which job does what.
    job_ids = [step.job.job_id(first=chunk[0], nonce=secrets.token_hex(4)) for chunk in chunks]
    redis = get_redis()
    with redis.pipeline(transaction=False) as pipe:
        for chunk, job_id in zip(chunks, job_ids):
            pipe.hset(step.owners_key, mapping={i: job_id for i in chunk})
        pipe.execute()
    retry = backoff(config[step.attempts_setting] + 1)
    queue = get_queue(step.job.queue)
    for start in range(0, len(chunks), 1000):
        queue.enqueue_many(
            [
                step.job.prepare(
                    chunk, job_id=job_id, timeout=step.seconds_each * len(chunk) + 60, retry=retry, at_front=at_front
                )
                for chunk, job_id in zip(chunks[start : start + 1000], job_ids[start : start + 1000])
            ]
        )


def top_up(step: Step, batch_ids: Iterable[int], *, session: Session | None = None) -> list[int]:
    """Queue chunks of each batch's waiting work, the first ids no live job owns, until ``CHUNKS_QUEUED_PER_BATCH`` of
    its jobs wait for ``step``; Redis failing is logged, not raised (the reconciler queues it later). Returns
    the ids queued."""
    session = session or db.session
    config = current_app.config
    size, window = config[step.chunk_setting], config["CHUNKS_QUEUED_PER_BATCH"]
    redis = get_redis()
    queued: list[int] = []
    for batch_id in sorted(set(batch_ids)):
        try:
            # Held for a few milliseconds: polled every 10 (redis-py's default 100 ms stalled every chunk that
            # claimed while another did).
            lock = redis.lock(f"bulksign:top-up:{step.name}:{batch_id}", timeout=60, sleep=0.01, blocking_timeout=10)
            if not lock.acquire():
                continue  # another process is filling this window now
            try:
                queued += _fill(step, session=session, batch_id=batch_id, size=size, window=window)
            finally:
                lock.release()
        except RedisError as exc:
            log(logger, logging.ERROR, "could not queue a batch's next chunks", batch_id=batch_id, error=str(exc))
    return queued


def _fill(step: Step, *, session: Session, batch_id: int, size: int, window: int) -> list[int]:
    # Enough ids to see the chunks already waiting (retried ones, suspects queued one per job) and the room after them.
    limit = size * window * 3
    ids = step.waiting(session, batch_id=batch_id, limit=limit)
    if not ids:
        return []
    owned = owners(step, ids)
    states = job_states(
        get_redis(),
        sorted(set(owned.values())),
        now=datetime.now(UTC),
        beat_trust=BEAT_TRUST_SECONDS,
        queue=step.job.queue,
    )
    in_line = sum(1 for state in states.values() if state == WAITING)
    unowned = [i for i in ids if owned.get(i) not in states]
    if len(ids) < limit and len(unowned) < size * window:
        # Every waiting id was listed, and less than a window is left: the batch's last ids go in smaller chunks
        # (down to a quarter), so that its workers finish about together rather than one working through a whole
        # chunk while the others wait.
        size = max(-(-len(unowned) // window), -(-size // 4))
    fresh = unowned[: max(0, window - in_line) * size]
    _queue_chunks(step, fresh, size=size)
    return fresh


@contextmanager
def beating(step: Step | None = None, ids: Sequence[int] = (), *, every: float = BEAT_SECONDS) -> Iterator[None]:
    """While the block runs, a thread tells the reconciler every ``every`` seconds that this chunk job (of ``step``, on
    ``ids``) is alive, and writes back what an emptied Redis forgot of it. Why a beat, not RQ's timeout:
    docs/architecture/work.md."""
    job = get_current_job()
    if job is None:
        yield
        return
    stop = threading.Event()
    owners_key = step.owners_key if step is not None else ""
    claims = [str(i) for i in ids] if step is not None else []

    def beat() -> None:
        while True:
            try:
                with job.connection.pipeline(transaction=False) as pipe:
                    job.heartbeat(datetime.now(UTC), 0, pipeline=pipe)
                    pipe.hsetnx(job.key, "status", "started")
                    for i in claims:
                        pipe.hsetnx(owners_key, i, job.id)
                    pipe.execute()
            except RedisError as exc:  # Redis away for a moment: the next beat tries again
                logger.debug("chunk beat failed: %s", exc)
            if stop.wait(every):
                return

    thread = threading.Thread(target=beat, name=f"beat-{job.id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every)


def release(step: Step, ids: Sequence[int]) -> None:
    """The running chunk job is done with these ids: they no longer have an owner (unless a newer job took them)."""
    job = get_current_job()
    if job is not None and ids:
        get_redis().eval(_RELEASE, 1, step.owners_key, job.id, *map(str, ids))


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
        get_redis().hdel(step.owners_key, *map(str, ids))


def enqueue_renders(request_ids: Sequence[int]) -> int:
    """Queue the PDF step for the batches of these requests (committed in ``pending``), a window each (``top_up``)."""
    batch_ids: set[int] = set()
    for start in range(0, len(request_ids), 10_000):
        part = list(request_ids[start : start + 10_000])
        batch_ids.update(db.session.scalars(select(SigningRequest.batch_id).where(SigningRequest.id.in_(part))))
    return len(top_up(RENDER, batch_ids))


def enqueue_sends(mail_ids: Sequence[int], *, at_front: bool = False) -> int:
    """Queue the send step for these outgoing mails (committed rows in ``queued``); ``at_front``: before bulk mail."""
    return enqueue_chunked(SEND, mail_ids, at_front=at_front)

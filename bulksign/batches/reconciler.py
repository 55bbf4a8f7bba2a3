"""The reconciler: work the database says is owed but no live job will do gets queued again.

Requests sit in pending/generating/generated/sending while their job is queued or running. If
Redis lost the job (flush, restart) or a worker died mid-job (``kill -9``), the request would
wait for ever. Periodically, requests in a working state for longer than a threshold whose job
is gone or dead are moved back one step where needed and re-enqueued; so are mails stuck in
``queued``. Which job owns an id is recorded in Redis (``pipeline.owners``), so a job that is
still alive is never doubled. Jobs parked in RQ's scheduled registries (retry backoff) are handed
to their queues here when the worker whose scheduler should do it is dead.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import Flask
from redis import Redis
from rq.job import Job
from rq.registry import ScheduledJobRegistry
from rq.scheduler import SCHEDULER_KEY_TEMPLATE, RQScheduler
from rq.scripts import acquire_or_refresh_lock, release_lock
from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.batches.progress import close_if_done
from bulksign.batches.states import transition
from bulksign.core.logs import log
from bulksign.models import OutgoingMail, SigningRequest
from bulksign.models.status import Status
from bulksign.signing.invitations import delivered_invitations, queue_invitations, record_sent
from bulksign.work.pipeline import BEAT_TRUST_SECONDS, RENDER, SEND, Step, disown, enqueue_chunked, owners
from bulksign.work.queues import QUEUE_NAMES, get_queue

logger = logging.getLogger(__name__)

#: Job states in which RQ will still run the job by itself.
_WAITING = {b"queued", b"scheduled", b"deferred"}
#: A running job whose worker has been silent this long past its timeout is dead.
_GRACE_SECONDS = 60
#: RQ's scheduler beats every second; one silent this long is dead (its lock would hold for another minute,
#: and live workers try to take it over only every ten).
_SCHEDULER_SILENCE = timedelta(seconds=15)


@dataclass(frozen=True)
class ReconcileResult:
    #: Requests whose render was queued again.
    renders: tuple[int, ...]
    #: Mails whose send was queued again.
    sends: tuple[int, ...]

    def __str__(self) -> str:
        return f"{len(self.renders)} renders and {len(self.sends)} sends re-enqueued"


def live_jobs(
    redis: Redis, job_ids: Sequence[str], *, now: datetime, beat_trust: int | None = None, queue: str | None = None
) -> set[str]:
    """The ids among ``job_ids`` that RQ will still run (or is running on a live worker).

    A running job is alive while its worker's key exists and it started less than its timeout ago;
    with ``beat_trust`` (chunk jobs, see ``pipeline.beating``), while its last beat is that many seconds old.
    With ``queue``, a job marked queued is alive only while it waits in that queue's list (or was
    queued a moment ago): a worker killed right after taking a job off the list leaves it marked
    queued for ever.
    """
    with redis.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hmget(
                Job.key_for(job_id), "status", "started_at", "timeout", "worker_name", "last_heartbeat", "enqueued_at"
            )
        rows = pipe.execute()
    running = [(job_id, row) for job_id, row in zip(job_ids, rows) if row[0] == b"started"]
    with redis.pipeline(transaction=False) as pipe:
        for _, row in running:
            pipe.exists(f"rq:worker:{(row[3] or b'').decode()}")
        workers_alive = pipe.execute()
    waiting = _waiting_in(redis, queue) if queue and any(row[0] == b"queued" for row in rows) else None
    if queue and any(row[0] == b"scheduled" for row in rows):
        with redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.zscore(ScheduledJobRegistry(queue, connection=redis).key, job_id)
            due_at = dict(zip(job_ids, pipe.execute()))
    alive = set()
    for job_id, row in zip(job_ids, rows):
        if row[0] == b"queued" and waiting is not None and job_id not in waiting:
            enqueued = _instant(row[5], now)
            if enqueued is None or now - enqueued >= timedelta(seconds=_GRACE_SECONDS):
                continue
        # Scheduled: alive while it waits in the registry for a moment still ahead (``move_due_scheduled``
        # hands it to its queue then, if no live RQ scheduler did); gone from the registry, or long overdue, dead.
        if (
            row[0] == b"scheduled"
            and queue
            and (due_at[job_id] is None or due_at[job_id] < now.timestamp() - _GRACE_SECONDS)
        ):
            continue
        if row[0] in _WAITING:
            alive.add(job_id)
    for (job_id, (_, started_at, timeout, _worker, beat, _enqueued)), worker_alive in zip(running, workers_alive):
        if beat_trust is None:
            since, limit = _instant(started_at, now), int(float(timeout or 180)) + _GRACE_SECONDS
        else:
            since, limit = _instant(beat or started_at, now), beat_trust
        if worker_alive and since and now - since < timedelta(seconds=limit):
            alive.add(job_id)
    return alive


def _waiting_in(redis: Redis, queue: str) -> set[str]:
    """The ids of the jobs in a queue's list (one LRANGE: a few ms for 10,000 chunk jobs)."""
    return {job_id.decode() for job_id in redis.lrange(f"rq:queue:{queue}", 0, -1)}


def _instant(raw: bytes | None, now: datetime) -> datetime | None:
    if not raw:
        return None
    moment = datetime.fromisoformat(raw.decode().replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=now.tzinfo)


def move_due_scheduled(redis: Redis, *, queues: Sequence[str], now: datetime) -> int:
    """Hand the due jobs of RQ's scheduled registries (retry backoff) to their queues where no live scheduler
    does; returns how many moved.

    RQ's scheduler runs inside one worker and locks each queue; a killed worker's lock outlives it, and the
    others look for a free lock only every ten minutes, so retried sends stalled. A lock whose holder stopped
    beating is released, and the reconciler moves the due jobs itself, under the same lock.
    """
    token = f"bulksign-reconciler-{secrets.token_hex(4)}"
    moved = 0
    for name in queues:
        lock = RQScheduler.get_locking_key(name)
        holder = redis.get(lock)
        if holder is not None:
            if _scheduler_alive(redis, holder.decode(), now=now):
                continue
            release_lock(redis, lock, holder.decode())
            log(
                logger,
                logging.WARNING,
                "released the scheduler lock of a dead worker",
                queue=name,
                holder=holder.decode(),
            )
        if acquire_or_refresh_lock(redis, lock, token, 60) != "acquired":
            continue
        try:
            registry = ScheduledJobRegistry(name, connection=redis)
            job_ids = registry.get_jobs_to_schedule(int(now.timestamp()))
            queue = get_queue(name)
            for job_id, job in zip(job_ids, Job.fetch_many(job_ids, connection=redis)):
                if job is not None:
                    queue.enqueue_job(job, at_front=job.should_enqueue_at_front())
                registry.remove(job_id)
            moved += len(job_ids)
        finally:
            release_lock(redis, lock, token)
    if moved:
        log(logger, logging.WARNING, "reconciler moved due scheduled jobs to their queues", jobs=moved)
    return moved


def _scheduler_alive(redis: Redis, name: str, *, now: datetime) -> bool:
    beat = _instant(redis.hget(SCHEDULER_KEY_TEMPLATE % name, "last_heartbeat"), now)
    return beat is not None and now - beat < _SCHEDULER_SILENCE


def clear_dead_jobs(redis: Redis, job_ids: Sequence[str], *, now: datetime) -> None:
    """Delete the keys of finished, failed or orphaned jobs so that the same ids can be enqueued again."""
    dead = set(job_ids) - live_jobs(redis, job_ids, now=now)
    if dead:
        redis.delete(*(Job.key_for(job_id) for job_id in dead))


def revive_renders(request_ids: Sequence[int], *, chunk_size: int | None = None) -> int:
    """Queue renders for committed pending requests, whatever job owned them before."""
    disown(RENDER, request_ids)
    return enqueue_chunked(RENDER, request_ids, chunk_size=chunk_size)


def revive_sends(mail_ids: Sequence[int]) -> int:
    """Queue sends for committed queued mails, whatever job owned them before, ahead of the mails waiting.

    They had their turn already; and where a kill landed after the server took the mail, the recipient holds
    the link and sees "on its way" until the resend is recorded. At the back of a large batch's queue that
    was 8 minutes in the 10,000-recipient soak (3 of its signers gave up after 5).
    """
    disown(SEND, mail_ids)
    return enqueue_chunked(SEND, mail_ids, at_front=True)


def _without_live_owner(step: Step, ids: Sequence[int], *, redis: Redis, now: datetime) -> list[int]:
    owned = owners(step, ids)
    alive = live_jobs(redis, sorted(set(owned.values())), now=now, beat_trust=BEAT_TRUST_SECONDS, queue=step.job.queue)
    return [i for i in ids if owned.get(i) not in alive]


def reconcile(
    session: Session, *, redis: Redis, app: Flask, now: datetime, stale_after: timedelta, limit: int = 5000
) -> ReconcileResult:
    """Find stuck work, fix the states, commit, re-enqueue. Scans at most ``limit`` requests in flight, as many
    waiting, and as many mails per run."""
    move_due_scheduled(redis, queues=QUEUE_NAMES, now=now)
    cutoff = now - stale_after
    # In flight (a worker holds them) apart from waiting (queued): a large batch keeps thousands waiting longer
    # than ``stale_after``, and in one scan of the oldest those filled the limit, so a request whose worker was
    # killed mid-send was not looked at until the batch drained (5 to 10 minutes in the 10,000-recipient soak).
    stuck = [
        row
        for states in ([Status.GENERATING, Status.SENDING], [Status.PENDING, Status.GENERATED])
        for row in session.execute(
            select(SigningRequest.id, SigningRequest.status)
            .where(SigningRequest.status.in_(states), SigningRequest.status_changed_at < cutoff)
            .order_by(SigningRequest.status_changed_at)
            .limit(limit)
        ).all()
    ]
    by_status: dict[str, list[int]] = {}
    for request_id, status in stuck:
        by_status.setdefault(status, []).append(request_id)

    to_render = _without_live_owner(
        RENDER, by_status.get(Status.PENDING, []) + by_status.get(Status.GENERATING, []), redis=redis, now=now
    )
    dead_generating = [i for i in by_status.get(Status.GENERATING, []) if i in set(to_render)]
    transition(
        session, dead_generating, frm=Status.GENERATING, to=Status.PENDING, now=now, details={"reconciled": True}
    )

    # An invitation recorded sent whose request is still in ``sending`` (the sender records both in one
    # statement; rows written before it did may be so): only the move is left, no second mail.
    delivered = delivered_invitations(session, request_ids=by_status.get(Status.SENDING, []))
    for request, mail in delivered:
        record_sent(session, request=request, mail=mail, now=now, reconciled=True)
    for batch_id in {request.batch_id for request, _ in delivered}:
        close_if_done(session, batch_id=batch_id, now=now)
    done = {request.id for request, _ in delivered}

    # Invitations: the mail row may be missing (crash before it was written) or its send job gone.
    to_mail = [r for r in by_status.get(Status.GENERATED, []) + by_status.get(Status.SENDING, []) if r not in done]
    mails = (
        {
            request_id: mail_id
            for request_id, mail_id in session.execute(
                select(OutgoingMail.request_id, OutgoingMail.id).where(
                    OutgoingMail.request_id.in_(to_mail),
                    OutgoingMail.kind == "invitation",
                    OutgoingMail.status == "queued",
                )
            )
        }
        if to_mail
        else {}
    )
    unowned = set(_without_live_owner(SEND, sorted(mails.values()), redis=redis, now=now))
    orphans = [r for r in to_mail if r not in mails or mails[r] in unowned]
    transition(
        session,
        [r for r in orphans if r in set(by_status.get(Status.SENDING, []))],
        frm=Status.SENDING,
        to=Status.GENERATED,
        now=now,
        details={"reconciled": True},
    )
    missing = queue_invitations(session, request_ids=[r for r in orphans if r not in mails], now=now, app=app)
    for request_id, message in missing.errors.items():
        transition(
            session,
            request_id,
            frm=Status.GENERATED,
            to=Status.FAILED,
            now=now,
            error_message=message,
            details={"error": message[:500]},
        )
    sends = [mails[r] if r in mails else missing.mail_ids[r] for r in orphans if r not in missing.errors]

    # Other mails (reminders, confirmations …) stuck in queued with no job.
    queued = session.scalars(
        select(OutgoingMail.id)
        .where(OutgoingMail.status == "queued", OutgoingMail.created_at < cutoff, OutgoingMail.kind != "invitation")
        .order_by(OutgoingMail.created_at)
        .limit(limit)
    ).all()
    sends += _without_live_owner(SEND, queued, redis=redis, now=now)
    session.commit()

    # A worker died while these were rendering: one per job, so a document that kills the renderer
    # does not take a whole chunk down with it each time.
    revive_renders(dead_generating, chunk_size=1)
    revive_renders([i for i in to_render if i not in set(dead_generating)])
    revive_sends(sends)
    result = ReconcileResult(renders=tuple(to_render), sends=tuple(sends))
    if to_render or sends or done:
        log(
            logger,
            logging.WARNING,
            "reconciler re-enqueued stuck work",
            renders=len(to_render),
            sends=len(sends),
            request_ids=to_render[:50],
            mail_ids=sends[:50],
            delivered=sorted(done)[:50],
        )
    return result

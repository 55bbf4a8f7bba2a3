"""The reconciler: work the database says is owed but no live job will do is queued again (dead chunks, lost
jobs, stuck mails, requests all parties signed). docs/architecture/batches.md has each case."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from flask import Flask
from redis import Redis
from rq.job import Job
from rq.registry import ScheduledJobRegistry
from rq.scheduler import SCHEDULER_KEY_TEMPLATE, RQScheduler
from rq.scripts import acquire_or_refresh_lock, release_lock
from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from bulksign.batches.progress import close_if_done
from bulksign.batches.states import transition
from bulksign.core.logs import log
from bulksign.models import RECIPIENT_ROLE, Batch, OutgoingMail, Party, SigningRequest
from bulksign.models.mail import MailKind, MailStatus
from bulksign.models.parties import PartyStatus
from bulksign.models.status import BatchStatus, Status
from bulksign.signing.invitations import delivered_invitations, queue_invitations, record_sent
from bulksign.signing.routing import Move, request_follows_parties
from bulksign.work.liveness import instant, live_jobs
from bulksign.work.pipeline import (
    BEAT_TRUST_SECONDS,
    RENDER,
    SEND,
    Step,
    disown,
    enqueue_chunked,
    enqueue_renders,
    owners,
    top_up,
)
from bulksign.work.queues import QUEUE_NAMES, SEAL, get_queue

logger = logging.getLogger(__name__)

#: RQ's scheduler beats every second; one silent this long is dead (its lock would hold for another minute,
#: and live workers try to take it over only every ten).
_SCHEDULER_SILENCE = timedelta(seconds=15)


@dataclass(frozen=True)
class ReconcileResult:
    #: Requests whose render was queued again.
    renders: tuple[int, ...]
    #: Mails whose send was queued again.
    sends: tuple[int, ...]
    #: Requests whose parties had all signed, moved to signed and their seal queued.
    finished: tuple[int, ...] = ()

    def __str__(self) -> str:
        finished = f", {len(self.finished)} signed requests finished" if self.finished else ""
        return f"{len(self.renders)} renders and {len(self.sends)} sends re-enqueued{finished}"


def move_due_scheduled(redis: Redis, *, queues: Sequence[str], now: datetime) -> int:
    """Hand the due jobs of RQ's scheduled registries (retry backoff) to their queues where no live scheduler does:
    a lock whose holder stopped beating is released and the jobs moved under the same lock. Returns how many."""
    token = f"bulksign-reconciler-{secrets.token_hex(4)}"
    moved = 0
    for name in queues:
        lock = RQScheduler.get_locking_key(name)
        holder = cast(bytes | None, redis.get(lock))  # a sync client: bytes, not an awaitable
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
    beat = instant(cast(bytes | None, redis.hget(SCHEDULER_KEY_TEMPLATE % name, "last_heartbeat")), now)
    return beat is not None and now - beat < _SCHEDULER_SILENCE


def clear_dead_jobs(redis: Redis, job_ids: Sequence[str], *, now: datetime) -> None:
    """Delete the keys of finished, failed or orphaned jobs so that the same ids can be enqueued again."""
    dead = set(job_ids) - live_jobs(redis, job_ids, now=now)
    if dead:
        redis.delete(*(Job.key_for(job_id) for job_id in dead))


def revive_renders(request_ids: Sequence[int]) -> int:
    """Queue renders for committed pending requests, whatever job owned them before, in their batches' windows."""
    disown(RENDER, request_ids)
    return enqueue_renders(request_ids)


def revive_sends(mail_ids: Sequence[int]) -> int:
    """Queue sends for committed queued mails, whatever job owned them before, ahead of the mails waiting: they had
    their turn already, and a recipient may hold the link of one the server took before a kill."""
    disown(SEND, mail_ids)
    return enqueue_chunked(SEND, mail_ids, at_front=True)


def _without_live_owner(step: Step, ids: Sequence[int], *, redis: Redis, now: datetime) -> list[int]:
    owned = owners(step, ids)
    alive = live_jobs(redis, sorted(set(owned.values())), now=now, beat_trust=BEAT_TRUST_SECONDS, queue=step.job.queue)
    return [i for i in ids if owned.get(i) not in alive]


def finish_all_signed(
    session: Session, *, redis: Redis, before: datetime, now: datetime, limit: int = 1000
) -> list[int]:
    """Requests several sign, still opened though every party signed (the last before ``before``), moved to
    signed (``routing.request_follows_parties``, under the request's lock; commits each) and their seal queued;
    their ids. The parties' moves settle this themselves; this finishes what a crash between them left."""
    others = exists().where(Party.request_id == SigningRequest.id, Party.role != RECIPIENT_ROLE)
    open_party = exists().where(Party.request_id == SigningRequest.id, Party.status != PartyStatus.SIGNED.value)
    recent = exists().where(Party.request_id == SigningRequest.id, Party.signed_at >= before)
    candidates = session.scalars(
        select(SigningRequest.id)
        .where(SigningRequest.status == Status.OPENED.value, others, ~open_party, ~recent)
        .order_by(SigningRequest.id)
        .limit(limit)
    ).all()
    finished = []
    for request_id in candidates:
        if request_follows_parties(session, request_id=request_id, now=now, actor="system").status == Move.SIGNED:
            finished.append(request_id)
        session.commit()
    if finished:
        clear_dead_jobs(redis, [SEAL.job_id(id=i) for i in finished], now=now)
        SEAL.enqueue_unique(finished)
    return finished


def reconcile(
    session: Session, *, redis: Redis, app: Flask, now: datetime, stale_after: timedelta, limit: int = 5000
) -> ReconcileResult:
    """Find stuck work, fix the states, commit, re-enqueue. Scans at most ``limit`` requests in flight and as many
    other mails per run; waiting requests are looked at a window per batch (``pipeline.top_up``)."""
    move_due_scheduled(redis, queues=QUEUE_NAMES, now=now)
    cutoff = now - stale_after
    # In flight: as many as the running chunks hold (index ``ix_signing_requests_working``).
    stuck = session.execute(
        select(SigningRequest.id, SigningRequest.status)
        .where(
            SigningRequest.status.in_([Status.GENERATING, Status.SENDING]), SigningRequest.status_changed_at < cutoff
        )
        .order_by(SigningRequest.status_changed_at)
        .limit(limit)
    ).all()
    generating = [i for i, status in stuck if status == Status.GENERATING]
    sending = [i for i, status in stuck if status == Status.SENDING]

    dead_generating = _without_live_owner(RENDER, generating, redis=redis, now=now)
    transition(
        session, dead_generating, frm=Status.GENERATING, to=Status.PENDING, now=now, details={"reconciled": True}
    )

    # An invitation recorded sent whose request is still in ``sending`` (the sender records both in one
    # statement; rows written before it did may be so): only the move is left, no second mail.
    delivered = delivered_invitations(session, request_ids=sending)
    for request, mail in delivered:
        record_sent(session, request=request, mail=mail, now=now, reconciled=True)
    for batch_id in {request.batch_id for request, _ in delivered}:
        close_if_done(session, batch_id=batch_id, now=now)
    done = {request.id for request, _ in delivered}

    # Invitations in flight: the mail row may be missing (crash before it was written) or its send job dead.
    to_mail = [r for r in sending if r not in done]
    mails = (
        {
            request_id: mail_id
            for request_id, mail_id in session.execute(
                select(OutgoingMail.request_id, OutgoingMail.id).where(
                    OutgoingMail.request_id.in_(to_mail),
                    OutgoingMail.kind == MailKind.INVITATION,
                    OutgoingMail.status == MailStatus.QUEUED,
                )
            )
        }
        if to_mail
        else {}
    )
    unowned = set(_without_live_owner(SEND, sorted(mails.values()), redis=redis, now=now))
    orphans = [r for r in to_mail if r not in mails or mails[r] in unowned]
    transition(session, orphans, frm=Status.SENDING, to=Status.GENERATED, now=now, details={"reconciled": True})
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
        .where(
            OutgoingMail.status == MailStatus.QUEUED,
            OutgoingMail.created_at < cutoff,
            OutgoingMail.kind != MailKind.INVITATION,
        )
        .order_by(OutgoingMail.created_at)
        .limit(limit)
    ).all()
    sends += _without_live_owner(SEND, queued, redis=redis, now=now)
    # Every batch with waiting work: its window is filled (a lost job's ids first), nothing more.
    # A batch waiting for approval has pending requests that nothing may render yet (``batches.approval``).
    waiting_batches = session.scalars(
        select(SigningRequest.batch_id)
        .join(Batch, Batch.id == SigningRequest.batch_id)
        .where(
            SigningRequest.status.in_([Status.PENDING, Status.GENERATED]),
            Batch.status != BatchStatus.AWAITING_APPROVAL,
        )
        .distinct()
    ).all()
    session.commit()

    # A worker died while these were rendering: one per job, so a document that kills the renderer
    # does not take a whole chunk down with it each time.
    disown(RENDER, dead_generating)
    enqueue_chunked(RENDER, dead_generating, chunk_size=1)
    revive_sends(sends)
    renders = dead_generating + top_up(RENDER, waiting_batches, session=session)
    sends += top_up(SEND, waiting_batches, session=session)
    finished = finish_all_signed(session, redis=redis, before=cutoff, now=now)
    result = ReconcileResult(renders=tuple(renders), sends=tuple(sends), finished=tuple(finished))
    if renders or sends or done or finished:
        log(
            logger,
            logging.WARNING,
            "reconciler re-enqueued stuck work",
            renders=len(renders),
            sends=len(sends),
            request_ids=renders[:50],
            mail_ids=sends[:50],
            delivered=sorted(done)[:50],
            finished=finished[:50],
        )
    return result

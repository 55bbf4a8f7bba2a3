"""Nothing is lost when a worker dies mid-job or Redis forgets every job: the reconciler finishes the batch."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest

from bulksign.batches.reconciler import reconcile
from bulksign.batches.states import transition
from bulksign.core.config import BASE_DIR
from bulksign.core.extensions import db, get_redis
from bulksign.jobs.periodic import reconcile_stuck_work
from bulksign.models import Batch, OutgoingMail, SigningRequest, utcnow
from bulksign.work.pipeline import BEAT_TRUST_SECONDS, RENDER, SEND, beating, enqueue_renders, owners
from bulksign.work.queues import RECONCILE, get_queue
from tests.support.batches import make_batch, request_ids, requests_of, worker_env
from tests.support.clock import NOW
from tests.support.processes import wait_for
from tests.support.workers import one_per_job

LATER = timedelta(minutes=10)


def _reconcile(app, *, now):
    return reconcile(db.session, redis=get_redis(), app=app, now=now, stale_after=timedelta(minutes=5))


def test_a_render_whose_worker_vanished_is_rendered_again_one_per_job(app, users, smtp, run_jobs):
    batch = make_batch(user=users["staff"], now=utcnow(), recipients=3)
    ids = request_ids(batch)
    # As if a worker took a chunk, moved two requests to generating and was killed (no job left).
    transition(db.session, ids[:2], frm="pending", to="generating", now=utcnow())
    db.session.commit()
    # Claimed a moment ago: too recent to call stuck; the third, pending with no job, fills the batch's window.
    assert _reconcile(app, now=utcnow()).renders == (ids[2],)
    assert [r.status for r in requests_of(batch)] == ["generating", "generating", "pending"]
    result = _reconcile(app, now=utcnow() + LATER)
    assert set(result.renders) == set(ids[:2])
    assert [r.status for r in requests_of(batch)] == ["pending"] * 3
    # A document that killed its worker may do it again: each suspect is queued alone.
    assert len(set(owners(RENDER, ids).values())) == 3
    run_jobs("pdf", "mail")
    assert [r.status for r in requests_of(batch)] == ["sent"] * 3
    assert len(smtp.of_kind("invitation")) == 3


def test_a_chunk_counts_as_alive_while_it_beats_even_if_its_worker_key_outlives_the_worker(app, users):
    from rq.utils import utcformat

    batch = make_batch(user=users["staff"], now=utcnow(), recipients=2)
    ids = request_ids(batch)
    enqueue_renders(ids)
    (job_id,) = set(owners(RENDER, ids).values())
    # As RQ leaves it after a Redis restart: the worker's key re-created without expiry, the worker since killed.
    redis = get_redis()
    redis.hset("rq:worker:gone", "state", "busy")
    transition(db.session, ids, frm="pending", to="generating", now=utcnow())
    db.session.commit()
    later = utcnow() + LATER
    redis.hset(
        f"rq:job:{job_id}",
        mapping={
            "status": "started",
            "worker_name": "gone",
            "started_at": utcformat(utcnow()),
            "last_heartbeat": utcformat(later - timedelta(seconds=10)),
        },
    )
    assert _reconcile(app, now=later).renders == ()  # it beat ten seconds ago: still rendering
    # Silent past BEAT_TRUST_SECONDS: its worker is gone, whatever RQ's worker key says.
    assert set(_reconcile(app, now=later + timedelta(seconds=BEAT_TRUST_SECONDS)).renders) == set(ids)
    assert [r.status for r in requests_of(batch)] == ["pending"] * 2


def _beats_seen_while_one_item_is_busy() -> list[str]:
    """A chunk's item that takes a while (a slow render, a throttle wait): what its job's last beat says meanwhile."""
    from rq import get_current_job

    job = get_current_job()
    seen = []
    with beating(every=0.05):
        for _ in range(3):
            # Twenty beats per look: a loaded machine may delay a few, not all of them.
            time.sleep(1)
            seen.append(job.connection.hget(job.key, "last_heartbeat").decode())
    return seen


def test_a_chunk_keeps_beating_while_one_item_takes_long(app, run_jobs):
    job = get_queue("default").enqueue(_beats_seen_while_one_item_is_busy)
    run_jobs("default")
    job.refresh()
    seen = job.return_value()
    # The reconciler trusts a chunk only while it beats: an item busy past BEAT_TRUST_SECONDS must not look dead.
    assert len(set(seen)) == 3, seen


def test_a_job_taken_off_its_queue_by_a_worker_that_died_at_once_is_queued_again(app, users, smtp, run_jobs):
    from rq.utils import utcformat

    batch = make_batch(user=users["staff"], now=utcnow(), recipients=2)
    enqueue_renders(request_ids(batch))
    run_jobs("pdf")
    mail_ids = [m.id for m in db.session.query(OutgoingMail).order_by(OutgoingMail.id)]
    (job_id,) = set(owners(SEND, mail_ids).values())
    # The worker moved the job off the list and was killed before marking it started: RQ says "queued" for ever.
    redis = get_redis()
    redis.lrem("rq:queue:mail", 0, job_id)
    redis.hset(f"rq:job:{job_id}", "enqueued_at", utcformat(utcnow() - timedelta(minutes=2)))
    assert sorted(_reconcile(app, now=utcnow() + LATER).sends) == mail_ids
    run_jobs("mail")
    assert [r.status for r in requests_of(batch)] == ["sent"] * 2 and len(smtp.of_kind("invitation")) == 2


def test_a_recipient_whose_mail_was_lost_mid_send_does_not_wait_behind_the_batchs_backlog(app, users, smtp, run_jobs):
    """The 10,000 soak: three signers held a link for 8 minutes while their resend queued behind 7,000 invitations."""
    one_per_job(app)
    batch = make_batch(user=users["staff"], now=utcnow(), recipients=5)
    enqueue_renders(request_ids(batch))
    run_jobs("pdf")
    mail_ids = [m.id for m in db.session.query(OutgoingMail).order_by(OutgoingMail.id)]
    # The first invitation's send job vanished (its worker was killed); four more wait in the queue.
    lost = mail_ids[0]
    get_queue("mail").remove(owners(SEND, [lost])[lost])
    transition(db.session, db.session.get(OutgoingMail, lost).request_id, frm="generated", to="sending", now=utcnow())
    db.session.commit()
    assert _reconcile(app, now=utcnow() + LATER).sends == (lost,)
    run_jobs("mail", max_jobs=1)
    assert [m.rcpt_tos[0] for m in smtp.of_kind("invitation")] == [db.session.get(OutgoingMail, lost).to_email]
    run_jobs("mail")
    assert {r.status for r in requests_of(batch)} == {"sent"} and len(smtp.of_kind("invitation")) == 5


def test_a_send_killed_mid_chunk_is_found_while_thousands_wait_their_turn(app, users, smtp, run_jobs):
    """The scan has a limit (5,000 a run): the requests waiting in the queues, older than the threshold, filled it,
    so one whose worker was killed mid-send was looked at only once the batch drained. Here the limit is 2 and
    four invitations wait, all older than the claim of the one that was lost; waiting ones are not scanned at
    all now (a window per batch), in-flight ones are."""
    one_per_job(app)
    batch = make_batch(user=users["staff"], now=utcnow(), recipients=5)
    enqueue_renders(request_ids(batch))
    run_jobs("pdf")
    mail_ids = [m.id for m in db.session.query(OutgoingMail).order_by(OutgoingMail.id)]
    # The batch's window holds two send jobs; the later of them is lost, its request claimed after every other.
    lost = max(owners(SEND, mail_ids))
    get_queue("mail").remove(owners(SEND, [lost])[lost])
    transition(
        db.session,
        db.session.get(OutgoingMail, lost).request_id,
        frm="generated",
        to="sending",
        now=utcnow() + timedelta(seconds=1),
    )
    db.session.commit()
    result = reconcile(
        db.session, redis=get_redis(), app=app, now=utcnow() + LATER, stale_after=timedelta(minutes=5), limit=2
    )
    # Queued again (at the front), it takes its place back in the batch's window: nothing more is queued.
    assert result.sends == (lost,)


def test_live_jobs_are_not_doubled(app, users, smtp, run_jobs):
    batch = make_batch(user=users["staff"], now=NOW, recipients=3)
    assert enqueue_renders(request_ids(batch)) == 3
    assert _reconcile(app, now=utcnow() + LATER).renders == ()
    assert enqueue_renders(request_ids(batch)) == 0
    assert len(get_queue("pdf")) == 1  # one chunk carries the three requests


def test_redis_flushed_mid_batch_the_reconciler_finishes_it(app, users, smtp, run_jobs, redis_server):
    one_per_job(app)
    batch = make_batch(user=users["staff"], now=NOW, recipients=6)
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", max_jobs=3)
    run_jobs("mail", max_jobs=1)
    redis_server.restart_empty()  # every queued job is gone
    assert len(get_queue("pdf")) == 0 and len(get_queue("mail")) == 0
    statuses = sorted(r.status for r in requests_of(batch))
    assert statuses == ["generated", "generated", "pending", "pending", "pending", "sent"]

    # The batch's window, not all of its pending requests: two render jobs (one each), two send jobs.
    assert reconcile_stuck_work(now=utcnow() + LATER).startswith("2 renders and 2 sends")
    assert len(get_queue("pdf")) == 2 and len(get_queue("mail")) == 2
    run_jobs("pdf", "mail")
    assert {r.status for r in requests_of(batch)} == {"sent"}
    assert sorted(m.rcpt_tos[0] for m in smtp.of_kind("invitation")) == sorted(r.email for r in requests_of(batch))
    assert db.session.get(Batch, batch).status == "awaiting_signatures"


@pytest.mark.slow(seconds=40)
def test_a_worker_killed_mid_chunk_causes_one_duplicate_with_the_same_message_id(app, users, smtp, run_jobs):
    batch = make_batch(user=users["staff"], now=NOW, recipients=3)
    enqueue_renders(request_ids(batch))
    run_jobs("pdf")
    assert len(get_queue("mail")) == 1  # one job carries the three invitations

    # The SMTP server accepts the first message, then holds its answer until the worker has been killed.
    release = threading.Event()
    original = smtp.handler.handle_DATA

    async def accept_then_hang(server, session, envelope):
        await original(server, session, envelope)
        while not release.is_set():
            await __import__("asyncio").sleep(0.05)
        return "250 OK"

    smtp.handler.handle_DATA = accept_then_hang
    worker = subprocess.Popen(
        [sys.executable, "-m", "flask", "jobs", "worker", "--burst", "mail"],
        cwd=BASE_DIR,
        env=worker_env(app),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Generous: a worker subprocess took over 30 s to import the app on a machine loaded by parallel runs.
        wait_for(lambda: smtp.received, timeout=120, what="the worker to send", every=0.05)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        release.set()
        smtp.handler.handle_DATA = original
        if worker.poll() is None:
            worker.kill()
    assert [r.status for r in requests_of(batch)] == ["sending"] * 3

    _reconcile(app, now=utcnow() + LATER)
    run_jobs("mail")
    mails = db.session.query(OutgoingMail).filter_by(kind="invitation").order_by(OutgoingMail.id).all()
    assert [r.status for r in requests_of(batch)] == ["sent"] * 3 and {m.status for m in mails} == {"sent"}
    # Only the mail in flight went out twice, under its own Message-ID; the other two once.
    invitations = smtp.of_kind("invitation")
    assert len(invitations) == 4
    assert [m.message_id for m in invitations].count(mails[0].message_id) == 2
    assert {m.message_id for m in smtp.of_kind("invitation")} == {m.message_id for m in mails}


def test_a_worker_killed_after_recording_the_servers_answer_sends_nothing_again(app, users, smtp, run_jobs):
    batch = make_batch(user=users["staff"], now=NOW, recipients=2)
    enqueue_renders(request_ids(batch))
    run_jobs("pdf")
    get_queue("mail").empty()
    first, second = db.session.query(OutgoingMail).order_by(OutgoingMail.id).all()
    # The worker claimed both, the server accepted the first, its row was committed sent: then kill -9.
    transition(db.session, [first.request_id, second.request_id], frm="generated", to="sending", now=utcnow())
    accepted_at = utcnow()
    first.status, first.sent_at, first.attempts = "sent", accepted_at, 1
    db.session.commit()
    unsent = (second.id, second.to_email)

    result = _reconcile(app, now=utcnow() + LATER)
    assert result.sends == (unsent[0],)
    run_jobs("mail")
    requests = requests_of(batch)
    assert [r.status for r in requests] == ["sent", "sent"]
    assert requests[0].sent_at == accepted_at and requests[0].expires_at > accepted_at
    # Only the mail that had not gone out was sent: nobody got a second invitation.
    assert [m.rcpt_tos for m in smtp.of_kind("invitation")] == [[unsent[1]]]
    assert db.session.get(Batch, batch).status == "awaiting_signatures"


def test_a_request_whose_worker_dies_every_time_ends_failed_not_looping(make_app, smtp):
    from bulksign.jobs.mail import send_many
    from bulksign.jobs.pdf import render_many

    app = make_app(RENDER_MAX_ATTEMPTS=2, MAIL_MAX_ATTEMPTS=2)
    with app.app_context():
        batch = make_batch(now=NOW, recipients=2)
        first, second = request_ids(batch)
        # The render worker dies after claiming, three times over (claim, then the reconciler puts it back).
        for _ in range(3):
            transition(db.session, first, frm="pending", to="generating", now=NOW, attempts=SigningRequest.attempts + 1)
            transition(db.session, first, frm="generating", to="pending", now=NOW)
            db.session.commit()
        assert render_many([first]) == "failed 1"
        assert "could not be rendered after 2 attempts" in requests_of(batch)[0].error_message

        render_many([second])
        mail = db.session.query(OutgoingMail).one()
        mail.attempts = 2  # two sends claimed, the worker died in each
        db.session.commit()
        assert send_many([mail.id]) == "failed 1"
        assert requests_of(batch)[1].status == "failed"
        assert "after 2 attempts" in requests_of(batch)[1].error_message
        assert smtp.received == []


def test_sends_waiting_in_the_scheduled_registry_of_a_killed_worker_go_out_at_the_next_reconcile(
    app, users, smtp, run_jobs
):
    import os

    from rq.job import Job
    from rq.scheduler import RQScheduler

    redis, lock = get_redis(), RQScheduler.get_locking_key("mail")
    # A real worker with RQ's scheduler, which takes the mail queue's scheduler lock; then SIGKILLed with it.
    worker = subprocess.Popen(
        [sys.executable, "-m", "flask", "jobs", "worker", "mail"],
        cwd=BASE_DIR,
        env=worker_env(app),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        holder = wait_for(lambda: redis.get(lock), timeout=60, what="the worker to take the scheduler lock")
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)

    # Sends that wait out a retry backoff, as RQ parks them: in the mail queue's scheduled registry.
    batch = make_batch(user=users["staff"], now=utcnow(), recipients=3)
    enqueue_renders(request_ids(batch))
    run_jobs("pdf")
    queue = get_queue("mail")
    for job_id in queue.job_ids:
        job = Job.fetch(job_id, connection=redis)
        queue.remove(job)
        queue.schedule_job(job, utcnow() + timedelta(seconds=30))
    run_jobs("mail")  # a live worker cannot take the dead one's lock: nothing moves
    assert [r.status for r in requests_of(batch)] == ["generated"] * 3

    # The next reconcile, once the dead scheduler has been silent and the backoff is over.
    _reconcile(app, now=utcnow() + LATER)
    assert redis.get(lock) != holder
    run_jobs("mail")
    assert [r.status for r in requests_of(batch)] == ["sent"] * 3
    assert sorted(to for m in smtp.of_kind("invitation") for to in m.rcpt_tos) == sorted(
        r.email for r in requests_of(batch)
    )


def test_a_scheduled_job_is_alive_only_while_it_waits_in_the_registry_for_a_moment_ahead(app):
    from rq.registry import ScheduledJobRegistry

    from bulksign.batches.reconciler import live_jobs

    redis, queue, now = get_redis(), get_queue("mail"), utcnow()
    ahead = queue.enqueue_at(now + timedelta(minutes=2), RECONCILE.path)
    lost = queue.enqueue_at(now + timedelta(minutes=2), RECONCILE.path)
    ScheduledJobRegistry("mail", connection=redis).remove(lost.id)
    overdue = queue.enqueue_at(now - timedelta(minutes=10), RECONCILE.path)
    ids = [ahead.id, lost.id, overdue.id]
    assert live_jobs(redis, ids, now=now, queue="mail") == {ahead.id}

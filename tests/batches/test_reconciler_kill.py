"""kill -9 of a real worker mid-chunk: its work is known dead and queued again within a minute, not after five."""

from __future__ import annotations

import signal
from datetime import timedelta

import pytest
from rq.job import Job

from bulksign.batches.reconciler import reconcile
from bulksign.core.extensions import db, get_redis
from bulksign.jobs.schedule import PERIODIC_JOBS
from bulksign.models import utcnow
from bulksign.work.liveness import instant
from bulksign.work.pipeline import BEAT_SECONDS, BEAT_TRUST_SECONDS, RENDER, SEND, enqueue_renders, owners
from tests.support.batches import make_batch, request_ids, requests_of, run_worker, worker_env
from tests.support.processes import start, stop, wait_for

#: What the issue asks: a worker whose heartbeat stopped is known dead, and its work queued again, within this.
PROMISED_SECONDS = 75


@pytest.mark.slow(seconds=20)
def test_a_render_worker_killed_mid_chunk_has_its_chunk_queued_again_within_beat_trust_and_the_batch_finishes(
    make_app, smtp, tmp_path
):
    app = make_app(RENDER_CHUNK_SIZE=20)
    with app.app_context():
        batch = make_batch(now=utcnow(), recipients=40)
        enqueue_renders(request_ids(batch))
        # --burst: the RQ worker itself, without the parent that forks workers (which would stop them on its death).
        worker = start(["jobs", "worker", "--burst", "pdf"], env=worker_env(app), log=tmp_path / "worker.log")
        try:
            # Generous: a worker subprocess may take half a minute to import the app on a loaded machine.
            wait_for(
                lambda: "generating" in {r.status for r in requests_of(batch)}, timeout=120, what="a claimed chunk"
            )
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=10)
        finally:
            stop(worker)
        in_flight = {r.id for r in requests_of(batch) if r.status == "generating"}
        assert in_flight and len(in_flight) <= 20
        (chunk_job,) = set(owners(RENDER, list(in_flight)).values())
        beat, started = get_redis().hmget(Job.key_for(chunk_job), ["last_heartbeat", "started_at"])
        last_beat = instant(beat or started, utcnow())
        assert last_beat is not None

        # The reconciler judges the chunk by its last beat, at the moment it is given: still running until the beat
        # has been silent BEAT_TRUST_SECONDS, whatever RQ's worker key still says, and dead from then on.
        stale_after = timedelta(seconds=app.config["RECONCILE_AFTER_SECONDS"])

        def queued_again(silent_seconds: int) -> set[int]:
            now = last_beat + timedelta(seconds=silent_seconds)
            result = reconcile(db.session, redis=get_redis(), app=app, now=now, stale_after=stale_after)
            return set(result.renders) & in_flight

        assert queued_again(BEAT_TRUST_SECONDS - 1) == set()
        assert queued_again(BEAT_TRUST_SECONDS + 1) == in_flight
        # So the scheduler, reconciling every period, queues it again within beat trust + period of the kill.
        (period,) = [job.interval_seconds for job in PERIODIC_JOBS if job.name == "reconcile"]
        assert BEAT_TRUST_SECONDS + period < PROMISED_SECONDS
        # One per job: a document that killed its worker takes only itself down next time.
        assert len({owners(RENDER, list(in_flight))[i] for i in in_flight}) == len(in_flight)

        run_worker(app, "pdf", "mail")
        assert [r.status for r in requests_of(batch)] == ["sent"] * 40
        assert sorted(to for m in smtp.of_kind("invitation") for to in m.rcpt_tos) == sorted(
            r.email for r in requests_of(batch)
        )


@pytest.mark.slow(seconds=40)
def test_redis_emptied_while_a_chunk_runs_its_live_job_keeps_its_work_and_nothing_is_sent_twice(
    make_app, smtp, tmp_path, redis_server
):
    import asyncio
    import threading

    app = make_app()
    with app.app_context():
        batch = make_batch(now=utcnow(), recipients=3)
        enqueue_renders(request_ids(batch))
        run_worker(app, "pdf")  # one send job carries the three invitations
        # The SMTP server takes the first message, then holds its answer: the chunk is mid-send.
        release = threading.Event()
        original = smtp.handler.handle_DATA

        async def accept_then_hang(server, session, envelope):
            await original(server, session, envelope)
            while not release.is_set():
                await asyncio.sleep(0.05)
            return "250 OK"

        smtp.handler.handle_DATA = accept_then_hang
        worker = start(["jobs", "worker", "--burst", "mail"], env=worker_env(app), log=tmp_path / "worker.log")
        try:
            wait_for(lambda: smtp.received, timeout=120, what="the first invitation to reach the server")
            redis_server.restart_empty()  # the job, its claims and the worker's key are gone
            # One beat writes back what the live job holds: its three claims, with its heartbeat before them.
            wait_for(lambda: get_redis().hlen(SEND.owners_key) == 3, timeout=BEAT_SECONDS + 30, what="the chunk's beat")
            # Past the age guard, within the beat's trust: the live job's mails are not queued again.
            later = utcnow() + timedelta(seconds=app.config["RECONCILE_AFTER_SECONDS"] + 1)
            stale_after = timedelta(seconds=app.config["RECONCILE_AFTER_SECONDS"])
            result = reconcile(db.session, redis=get_redis(), app=app, now=later, stale_after=stale_after)
            assert result.sends == () and result.renders == ()
            assert [r.status for r in requests_of(batch)] == ["sending"] * 3
        finally:
            release.set()
            smtp.handler.handle_DATA = original
        try:
            wait_for(lambda: worker.poll() is not None, timeout=60, what="the worker to finish its chunk")
        finally:
            stop(worker)
        assert [r.status for r in requests_of(batch)] == ["sent"] * 3
        assert len(smtp.of_kind("invitation")) == 3  # nobody got a second invitation

"""A live worker stays visible when Redis forgets it, and the processes a worker starts end with it."""

from __future__ import annotations

import gc
import os
import signal
import time

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from bulksign.core.extensions import get_redis
from bulksign.jobs.worker import HEARTBEAT_SECONDS
from bulksign.models import utcnow
from bulksign.ops.readiness import check_readiness
from bulksign.work.queues import get_queue
from tests.support.batches import worker_env
from tests.support.processes import alive, children, start, stop, wait_for

#: Long enough for an idle worker's next heartbeat, with room for a slow machine.
_REGISTERED_AGAIN_WITHIN = HEARTBEAT_SECONDS + 15


def _workers_on(queue: str) -> int:
    """Live workers ``/readyz`` counts on ``queue``."""
    try:
        return check_readiness(redis=get_redis(), queue_names=(queue,), now=utcnow()).queues[queue][1]
    except RedisConnectionError:  # this process's own connection, dropped by the restart, is made again next time
        return 0


@pytest.mark.slow(seconds=12)
def test_a_live_worker_registers_again_after_redis_is_emptied_or_restarted(app, redis_server, tmp_path):
    worker = start(["jobs", "worker", "default"], env=worker_env(app), log=tmp_path / "worker.log")
    try:
        wait_for(lambda: _workers_on("default") == 1, timeout=60, what="the worker to register", every=0.3)
        get_redis().flushall()
        assert _workers_on("default") == 0
        # Nothing tells the idle worker: its next heartbeat finds it missing from the registry.
        wait_for(
            lambda: _workers_on("default") == 1,
            timeout=_REGISTERED_AGAIN_WITHIN,
            what="the worker to register again after FLUSHALL",
            every=0.5,
        )
        redis_server.restart_empty()
        wait_for(
            lambda: _workers_on("default") == 1,
            timeout=_REGISTERED_AGAIN_WITHIN,
            what="the worker to register again after a restart of Redis",
            every=0.5,
        )
        job = get_queue("default").enqueue("tests.support.leaky.leak", 0, result_ttl=600)
        wait_for(lambda: job.get_status(refresh=True) == "finished", timeout=30, what="the job queued afterwards")
    finally:
        stop(worker)
    assert "registering again" in (tmp_path / "worker.log").read_text()


def test_a_killed_worker_takes_its_scheduler_along_and_a_killed_parent_its_workers(app, tmp_path):
    """``flask jobs worker`` forks the worker, which forks RQ's scheduler: kill -9 must orphan neither."""
    parent = start(["jobs", "worker", "default"], env=worker_env(app), log=tmp_path / "worker.log")
    try:
        [worker] = wait_for(lambda: children(parent.pid), timeout=60, what="the worker process")
        [scheduler] = wait_for(lambda: children(worker), timeout=60, what="the worker's scheduler process")
        os.kill(worker, signal.SIGKILL)
        # SIGTERM on the worker's death: the scheduler stops at its next poll (each second).
        wait_for(lambda: not alive(scheduler), timeout=15, what="the scheduler to end with its worker")
        # The parent replaces the crashed worker after a second's pause.
        [replacement] = wait_for(
            lambda: [pid for pid in children(parent.pid) if pid != worker], timeout=60, what="the replacement worker"
        )
        parent.kill()
        parent.wait(timeout=10)
        # SIGTERM on the parent's death: the idle worker stops at once.
        wait_for(lambda: not alive(replacement), timeout=30, what="the worker to end with its parent")
    finally:
        stop(parent)


def _ignore_sigterm_and_wait(ready) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ready.set()
    time.sleep(60)  # the scheduler that will not stop: it idles until killed


def test_a_stopping_worker_does_not_wait_for_ever_on_a_scheduler_that_will_not_stop(app):
    import multiprocessing
    from types import SimpleNamespace

    from bulksign.jobs.worker import SCHEDULER_STOP_SECONDS, AppWorker

    worker = AppWorker([get_queue("default")], connection=get_redis())
    fork = multiprocessing.get_context("fork")
    ready = fork.Event()
    stubborn = fork.Process(target=_ignore_sigterm_and_wait, args=(ready,))
    stubborn.start()
    assert ready.wait(timeout=30)
    worker.scheduler = SimpleNamespace(_process=stubborn)
    started = time.monotonic()
    worker.stop_scheduler()
    assert not stubborn.is_alive() and time.monotonic() - started < SCHEDULER_STOP_SECONDS + 5


def test_a_worker_process_freezes_what_it_holds_after_its_first_job_and_a_test_s_worker_does_not(app):
    """``gc.freeze`` after the first job spares the collector's full passes the process's lasting objects; a
    worker in a process that outlives it (a test's) leaves the collector as it is."""
    from bulksign.jobs.worker import AppWorker

    queue = get_queue("default")
    # RQ installs SIGTERM/SIGINT handlers that outlive the worker (``tests.support.workers``).
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for freeze in (False, True):
            gc.unfreeze()
            for _ in range(2):
                queue.enqueue("tests.support.leaky.leak", 0, result_ttl=600)
            worker = AppWorker([queue], connection=get_redis(), freeze_after_first_job=freeze)
            worker.work(burst=True, max_jobs=1, logging_level="WARNING")
            assert (gc.get_freeze_count() > 0) is freeze
            frozen = gc.get_freeze_count()
            worker.work(burst=True, logging_level="WARNING")
            assert gc.get_freeze_count() <= frozen, "frozen once, after the first job only (freed ones leave it)"
    finally:
        gc.unfreeze()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)

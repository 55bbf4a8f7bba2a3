"""Workers recycle themselves (WORKER_MAX_JOBS, WORKER_MAX_RSS_MB) and the queue keeps draining."""

from __future__ import annotations

from rq.job import Job

from bulksign.core.extensions import get_redis
from bulksign.work.queues import get_queue
from tests.support.batches import worker_env
from tests.support.processes import start, terminate_once


def test_a_worker_that_leaks_memory_is_recycled_and_the_queue_keeps_draining(app, tmp_path):
    queue = get_queue("default")
    jobs = [queue.enqueue("tests.support.leaky.leak", 60, result_ttl=600) for _ in range(12)]
    # Each job keeps 60 MB: a worker passes 300 MB within five jobs, so twelve jobs need at least three
    # worker processes, whatever their size at start; two run at a time, so at least one was a replacement.
    env = {**worker_env(app), "WORKER_MAX_RSS_MB": "300"}
    parent = start(["jobs", "worker", "--processes", "2", "default"], env=env, log=tmp_path / "workers.log")
    seconds = terminate_once(
        parent,
        lambda: all(job.get_status(refresh=True) == "finished" for job in jobs),
        what="all leaking jobs to finish",
        timeout=180,
    )
    assert seconds < 10 and parent.returncode == 0
    pids = {Job.fetch(job.id, connection=get_redis()).return_value() for job in jobs}
    assert len(pids) >= 3
    assert "recycling after this job" in (tmp_path / "workers.log").read_text()


def test_a_worker_is_replaced_after_worker_max_jobs_and_the_queue_keeps_draining(app, tmp_path):
    queue = get_queue("default")
    jobs = [queue.enqueue("tests.support.leaky.leak", 0, result_ttl=600) for _ in range(5)]
    worker = start(
        ["jobs", "worker", "default"], env={**worker_env(app), "WORKER_MAX_JOBS": "2"}, log=tmp_path / "worker.log"
    )
    seconds = terminate_once(
        worker,
        lambda: all(job.get_status(refresh=True) == "finished" for job in jobs),
        what="all jobs to finish",
        timeout=120,
    )
    assert seconds < 10 and worker.returncode == 0
    # Two jobs per worker process: five jobs took three of them, one after the other.
    assert len({Job.fetch(job.id, connection=get_redis()).return_value() for job in jobs}) == 3

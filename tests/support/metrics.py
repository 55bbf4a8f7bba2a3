"""Scraping /metrics as Prometheus would, after real work (and a job that always fails, for the failure counters)."""

from __future__ import annotations

from rq import Retry

from bulksign.core.extensions import get_redis
from bulksign.jobs.schedule import periodic_scheduler_class
from bulksign.work.pipeline import enqueue_renders
from bulksign.work.queues import get_queue
from tests.support.batches import make_batch, request_ids
from tests.support.clock import NOW
from tests.support.workers import run_burst_worker

#: A scrape from loopback needs no token.
LOCAL = {"REMOTE_ADDR": "127.0.0.1"}


def scrape(client) -> str:
    response = client.get("/metrics", environ_base=LOCAL)
    assert response.status_code == 200
    return response.get_data(as_text=True)


def fails_always() -> None:
    raise RuntimeError("this job always fails")


def scrape_after_work(client, *, owner) -> str:
    """A scrape after a batch was rendered and sent, a job retried then failed, and the scheduler polled."""
    batch = make_batch(user=owner, now=NOW, recipients=2)
    enqueue_renders(request_ids(batch))
    run_burst_worker("pdf", "mail")
    get_queue("default").enqueue("tests.test_metrics.fails_always", retry=Retry(max=1))
    run_burst_worker("default")
    periodic_scheduler_class()(connection=get_redis()).enqueue_jobs()
    return scrape(client)

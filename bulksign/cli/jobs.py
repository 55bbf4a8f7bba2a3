"""``flask jobs …``: RQ workers (forked and recycled), the scheduler, every periodic job once."""

from __future__ import annotations

import logging
import os
import signal
import time
from contextlib import contextmanager

import click
from flask import current_app
from flask.cli import AppGroup
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bulksign.cli.common import fail, require_services
from bulksign.core.config import LANGUAGES
from bulksign.core.error_tracking import capture, flush
from bulksign.core.extensions import db, get_redis
from bulksign.core.parent_death import end_with_parent
from bulksign.jobs import schedule
from bulksign.jobs.periodic import run_periodic
from bulksign.jobs.worker import AppWorker, warm_up
from bulksign.work.queues import QUEUE_NAMES, get_queue

jobs_cli = AppGroup("jobs", help="RQ workers, the scheduler and periodic jobs.")


@jobs_cli.command("worker")
@click.argument("queues", nargs=-1)
@click.option("--burst", is_flag=True, help="Stop when the queues are empty.")
@click.option(
    "--processes",
    default=1,
    show_default=True,
    help="Worker processes to fork on this host; 0: PDF_CONCURRENCY (one per core by default).",
)
def worker_command(queues: tuple[str, ...], burst: bool, processes: int) -> None:
    """Run RQ workers inside the app context (all queues by default)."""
    names = queues or QUEUE_NAMES
    unknown = set(names) - set(QUEUE_NAMES)
    if unknown:
        fail(f"unknown queue(s) {', '.join(sorted(unknown))}; known: {', '.join(QUEUE_NAMES)}")
    require_services()
    count = processes or current_app.config["PDF_CONCURRENCY"]
    if count <= 1 and burst:
        _run_worker(names, burst=burst)
    else:
        # Even one long-running worker gets a parent: it recycles itself, and not every supervisor
        # restarts a process that ended cleanly (honcho under `make run` stops everything instead).
        _run_worker_processes(names, burst=burst, count=count)


def _run_worker(names, *, burst: bool) -> None:
    config = current_app.config
    worker = AppWorker(
        [get_queue(n) for n in names],
        connection=get_redis(),
        max_rss_mb=config["WORKER_MAX_RSS_MB"],
        freeze_after_first_job=True,
    )
    # Before RQ registers the worker: a registered worker is one that takes jobs at full speed.
    warm_up(LANGUAGES)
    # with_scheduler: RQ's retry backoff parks jobs in its scheduled registry; some worker must move them back.
    # max_jobs / max_rss_mb: the worker ends cleanly and its supervisor (or the parent below) starts a fresh one.
    worker.work(burst=burst, logging_level="INFO", with_scheduler=True, max_jobs=config["WORKER_MAX_JOBS"] or None)


def _run_worker_processes(names, *, burst: bool, count: int) -> None:
    """Fork ``count`` workers (no connection is shared across the fork) and pass SIGTERM/SIGINT on to them.

    A worker that ends (recycled after WORKER_MAX_JOBS or WORKER_MAX_RSS_MB, or crashed) is replaced
    until this process is asked to stop.
    """

    db.engine.dispose()
    current_app.extensions.pop("bulksign_redis", None)
    children: set[int] = set()
    stopping = False

    def spawn() -> None:
        """Fork one worker; called with SIGTERM/SIGINT blocked (``_stop_signals_held``)."""
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            # Until RQ installs its own handlers, a signal must not run the parent's handler (which signals siblings).
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
            # A killed parent's workers stop as on its SIGTERM (after their job): its supervisor starts another
            # parent, whose workers would otherwise drain the queues beside them, unseen and never replaced.
            end_with_parent(parent=parent)
            code = 0
            try:
                _run_worker(names, burst=burst)
            except BaseException as exc:  # a child must never return into the parent's loop
                logging.getLogger(__name__).exception("worker process crashed")
                capture(exc)
                code = 1
            finally:
                flush()  # os._exit skips the SDK's own flush at exit
                os._exit(code)
        children.add(pid)

    def stop(signum, _frame) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            os.kill(pid, signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with _stop_signals_held():
        for _ in range(count):
            spawn()
    while children:
        pid, status = os.wait()
        children.discard(pid)
        if stopping or burst:
            continue
        if status != 0:
            # The pause keeps a crash loop from spinning.
            time.sleep(1)
        with _stop_signals_held():
            if not stopping:
                spawn()


#: The signals that stop the worker processes' parent.
_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


@contextmanager
def _stop_signals_held():
    """SIGTERM/SIGINT wait until the block ends: a stop arriving between the check and the fork, or between the
    fork and recording the child, would signal only the older children and leave the new one running, its
    parent waiting for it for ever (seen once in CI: a stop during a recycle took the full 60 s kill timeout)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


@jobs_cli.command("scheduler")
@click.option("--interval", default=5, show_default=True, help="Seconds between scheduler polls.")
def scheduler_command(interval: int) -> None:
    """Run rq-scheduler with the periodic jobs registered (idempotently, on every poll)."""

    require_services()
    scheduler_class = schedule.periodic_scheduler_class()
    delay = 1
    while True:
        try:
            scheduler_class(connection=get_redis(), interval=interval).run()
            return
        except (RedisConnectionError, RedisTimeoutError) as exc:
            # A Redis restart must not end the scheduler: wait, reconnect, re-register.
            logging.getLogger(__name__).warning("redis unavailable (%s); retrying in %s s", exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 30)
        except Exception as exc:
            capture(exc)
            flush()
            raise


@jobs_cli.command("tick")
def tick_command() -> None:
    """Run every periodic job once, now, in this process."""
    for job in schedule.PERIODIC_JOBS:
        result = run_periodic(job.handle.path)
        click.echo(f"{job.name}: {result}")

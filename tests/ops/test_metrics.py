"""``/metrics`` after real work: requests served, jobs, mails, throttle, queues, batches, the scheduler; cheap to scrape."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from redis import Redis
from rq import Retry, Worker
from sqlalchemy import event

from bulksign.core.config import BASE_DIR
from bulksign.core.extensions import db, get_redis
from bulksign.jobs.schedule import periodic_scheduler_class
from bulksign.ops import telemetry
from bulksign.ops.metrics import queue_figures
from bulksign.work.pipeline import enqueue_renders
from bulksign.work.queues import get_queue
from tests.support.batches import make_batch, request_ids, worker_env
from tests.support.clock import NOW
from tests.support.metrics import scrape, scrape_after_work
from tests.support.processes import first_answer
from tests.support.workers import run_burst_worker


def value(text: str, sample: str) -> float:
    """The value of one sample, written ``name{label="value",…}`` with the labels in any order."""
    name, _, labels = sample.partition("{")
    wanted = dict(re.findall(r'(\w+)="([^"]*)"', labels))
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and found.labels == wanted:
                return found.value
    raise AssertionError(f"{sample} not in the scrape")


def live_processes() -> list[tuple[str, int]]:
    """What a scrape would show of the processes' memory, seen from inside a running worker."""
    return [(p.role, p.rss_bytes) for p in telemetry.processes(get_redis())]


def test_a_sent_batch_shows_in_jobs_mails_render_times_and_batch_counts(app, users, smtp, client):
    batch = make_batch(user=users["staff"], now=NOW, recipients=3)
    enqueue_renders(request_ids(batch))
    # Queues are worked in order: the probe on ``default`` runs once the renders and sends are done.
    probe = get_queue("default").enqueue("tests.ops.test_metrics.live_processes")
    run_burst_worker("pdf", "mail", "default")
    client.get("/healthz")

    text = scrape(client)
    assert value(text, 'bulksign_jobs_total{queue="pdf",outcome="succeeded"}') >= 1
    assert value(text, 'bulksign_job_duration_seconds_count{queue="mail"}') >= 1
    assert value(text, 'bulksign_mails_total{kind="invitation",status="sent"}') == 3
    assert value(text, "bulksign_pdf_render_seconds_count") == 3
    # Three invitations through the throttle; nobody has signed yet, so the owner is told nothing.
    assert 'kind="completion_notice"' not in text
    assert value(text, 'bulksign_mail_throttle_slots_total{outcome="won"}') == 3
    assert value(text, 'bulksign_requests{status="sent"}') == 3
    assert value(text, f'bulksign_batch_requests{{batch_id="{batch}",status="sent"}}') == 3
    assert value(text, 'bulksign_http_requests_total{endpoint="health.healthz",method="GET",status="2xx"}') == 1
    assert value(text, 'bulksign_http_request_duration_seconds_count{endpoint="health.healthz",method="GET"}') == 1
    # The worker reported its memory while it ran (a stopped worker is gone); the web reports its connections.
    assert any(role == "worker:pdf,mail,default" and rss > 0 for role, rss in probe.return_value())
    assert re.search(r'^bulksign_db_pool_connections_in_use\{process="[^"]+",role="web"\} \d', text, re.M)


def test_forked_worker_processes_add_to_the_figures_the_web_reports(app, users, smtp, client):
    batch = make_batch(user=users["staff"], now=NOW, recipients=6)
    enqueue_renders(request_ids(batch))
    done = subprocess.run(
        [sys.executable, "-m", "flask", "jobs", "worker", "--burst", "--processes", "2", "pdf", "mail"],
        cwd=BASE_DIR,
        env=worker_env(app),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    text = scrape(client)
    assert value(text, 'bulksign_mails_total{kind="invitation",status="sent"}') == 6
    assert value(text, "bulksign_pdf_render_seconds_count") == 6


def test_a_job_that_fails_after_a_retry_counts_once_retried_and_once_failed(app, client):
    get_queue("default").enqueue("tests.support.metrics.fails_always", retry=Retry(max=1))
    run_burst_worker("default")
    text = scrape(client)
    assert value(text, 'bulksign_jobs_total{queue="default",outcome="retried"}') == 1
    assert value(text, 'bulksign_jobs_total{queue="default",outcome="failed"}') == 1


def test_queues_show_their_depth_the_oldest_jobs_age_and_their_live_workers(app, client):
    queue = get_queue("mail")
    job = queue.enqueue("tests.support.metrics.fails_always")
    job.enqueued_at = datetime.now(UTC).replace(tzinfo=None) - timedelta(minutes=10)
    job.save()
    text = scrape(client)
    assert value(text, 'bulksign_queue_jobs{queue="mail",state="queued"}') == 1
    # Ten minutes, plus the moments this test took so far.
    assert 600 <= value(text, 'bulksign_queue_oldest_job_age_seconds{queue="mail"}') < 660
    later = job.enqueued_at.replace(tzinfo=UTC) + timedelta(seconds=90)
    assert queue_figures(queue, now=later).oldest_age_seconds == 90
    assert value(text, 'bulksign_queue_workers{queue="mail"}') == 0

    worker = Worker([queue], connection=get_redis())
    worker.register_birth()
    assert value(scrape(client), 'bulksign_queue_workers{queue="mail"}') == 1
    # Killed without a word: its registration stays, but its heartbeat key is gone.
    get_redis().delete(worker.key)
    assert value(scrape(client), 'bulksign_queue_workers{queue="mail"}') == 0


def test_the_scheduler_records_its_last_tick(app, client):
    assert "bulksign_scheduler_last_tick_timestamp_seconds" not in scrape(client)
    before = time.time()
    periodic_scheduler_class()(connection=get_redis()).enqueue_jobs()
    assert value(scrape(client), "bulksign_scheduler_last_tick_timestamp_seconds") >= before - 1


def test_an_outage_of_the_mail_server_shows_since_when(app, client):
    from bulksign.mail import mail_server

    assert value(scrape(client), "bulksign_mail_server_down_since_timestamp_seconds") == 0
    started = time.time() - 400
    mail_server.record_down(get_redis(), now=datetime.fromtimestamp(started, UTC), reason="refused")
    assert abs(value(scrape(client), "bulksign_mail_server_down_since_timestamp_seconds") - started) < 1
    mail_server.record_reached(get_redis())
    assert value(scrape(client), "bulksign_mail_server_down_since_timestamp_seconds") == 0


def test_complaints_and_bounces_from_the_provider_are_counted(make_app):
    app = make_app(BOUNCE_WEBHOOK_SECRET="hook-secret")
    with app.app_context():
        client = app.test_client()
        complaint = {
            "notificationType": "Complaint",
            "complaint": {"complainedRecipients": [{"emailAddress": "a@example.com"}]},
        }
        assert client.post("/webhooks/bounces?token=hook-secret", json=complaint).status_code == 200
        assert (
            client.post(
                "/webhooks/bounces?token=hook-secret", json={"email": "nobody@example.com", "reason": "550"}
            ).status_code
            == 200
        )
        text = scrape(client)
        assert value(text, 'bulksign_mail_reports_total{type="complaint"}') == 1
        assert value(text, 'bulksign_mail_reports_total{type="bounce"}') == 1


def test_a_scrape_never_counts_the_requests_mails_or_events_tables(app, users, client):
    make_batch(user=users["staff"], now=NOW, recipients=5)
    statements = []

    def keep(conn, cursor, statement, *args):
        statements.append(statement.lower())

    event.listen(db.engine, "before_cursor_execute", keep)
    try:
        scrape(client)
    finally:
        event.remove(db.engine, "before_cursor_execute", keep)
    touched = " ".join(statements)
    assert "batch_status_counts" in touched
    for table in ("signing_requests", "outgoing_mails", "events"):
        assert f"from {table}" not in touched and f"join {table}" not in touched


def test_processes_that_fell_silent_are_forgotten(app):
    redis = get_redis()
    telemetry.ProcessReporter("web").report(redis, pool_in_use=1)
    (figures,) = telemetry.processes(redis)
    assert figures.role == "web" and figures.pool_in_use == 1
    assert telemetry.processes(redis, now=time.time() + telemetry.PROCESS_STALE_SECONDS + 1) == []
    assert telemetry.processes(redis) == []


def test_promtool_accepts_the_metrics(app, users, smtp, client):
    text = scrape_after_work(client, owner=users["staff"])
    assert shutil.which("promtool"), "promtool is missing: run scripts/install-system-deps.sh --test"
    checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_after_a_redis_failure_figures_are_dropped_without_trying_for_a_while(app):
    # A "Redis" that accepts and hangs up at once: each try is one accepted connection (or a few, with retries).
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted = []

    def hang_up():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(1)
            conn.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    broken = Redis(port=listener.getsockname()[1], socket_connect_timeout=2, socket_timeout=2)
    try:
        with telemetry.record(broken) as figures:
            figures.count(telemetry.JOBS, ("pdf", "succeeded"))
        tried = len(accepted)
        assert tried >= 1
        for _ in range(5):
            with telemetry.record(broken) as figures:
                figures.count(telemetry.JOBS, ("pdf", "succeeded"))
        telemetry.ProcessReporter("web").report(broken, pool_in_use=0)
        assert len(accepted) == tried
        # Another Redis client (the app's own) is not held back by the broken one.
        with telemetry.record(get_redis()) as figures:
            figures.count(telemetry.JOBS, ("pdf", "succeeded"))
        assert telemetry.read(get_redis())[telemetry.JOBS.name] == {("pdf", "succeeded"): 1}
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() waiting in the thread
        listener.close()
        thread.join(timeout=5)


def test_requests_served_by_several_gunicorn_workers_add_up_in_one_scrape(app, tmp_path):
    import requests

    from tests.support.services import free_port

    port = free_port()
    c = app.config
    env = {
        "DATABASE_URL": c["DATABASE_URL"],
        "REDIS_URL": c["REDIS_URL"],
        "SECRET_KEY": "x",
        "BULKSIGN_VAR_DIR": str(tmp_path),
        "PATH": "/usr/bin:/bin",
    }
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("gunicorn")), "--bind", f"127.0.0.1:{port}", "--workers", "2", "wsgi:app"],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        first_answer(f"http://127.0.0.1:{port}/healthz")
        # A new connection each time: the two workers both answer some.
        for _ in range(19):
            assert (
                requests.get(
                    f"http://127.0.0.1:{port}/healthz", timeout=30, headers={"Connection": "close"}
                ).status_code
                == 200
            )
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    assert value(text, 'bulksign_http_requests_total{endpoint="health.healthz",method="GET",status="2xx"}') == 20
    assert len(re.findall(r'^bulksign_db_pool_connections_in_use\{process="[^"]+",role="web"\}', text, re.M)) >= 1


def test_errors_count_as_5xx_under_the_route_name_never_the_token(app, client, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("database fell over")

    monkeypatch.setattr("bulksign.views.recipient.signing.find_by_token", broken)
    assert client.get("/sign/SecretToken123456789").status_code == 500
    assert client.get("/no/such/page").status_code == 404
    text = scrape(client)
    assert value(text, 'bulksign_http_requests_total{endpoint="signing.page",method="GET",status="5xx"}') == 1
    assert value(text, 'bulksign_http_requests_total{endpoint="unmatched",method="GET",status="4xx"}') == 1
    assert "SecretToken123456789" not in text

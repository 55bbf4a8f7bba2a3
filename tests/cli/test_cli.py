"""The operator's commands: users, API keys, workers, scheduler, tick, demo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rq_scheduler import Scheduler
from sqlalchemy import select, text

from bulksign.core.config import BASE_DIR
from bulksign.core.extensions import db, get_redis
from bulksign.core.tokens import hash_token
from bulksign.jobs.schedule import PERIODIC_JOBS, PeriodicJob, register_periodic_jobs
from bulksign.models import ApiKey, DocumentTemplate, User
from bulksign.work.queues import ROLLUP_BATCHES, get_queue

ROOT = BASE_DIR


def test_users_create_makes_an_account_that_can_log_in(app, client):
    runner = app.test_cli_runner()
    result = runner.invoke(args=["users", "create", "Boss@Example.com", "--password", "long-enough", "--role", "admin"])
    assert result.exit_code == 0, result.output
    user = db.session.scalar(select(User).where(User.email == "boss@example.com"))
    assert user.role == "admin" and "long-enough" not in user.password_hash


def test_users_create_explains_what_is_wrong(app):
    runner = app.test_cli_runner()
    short = runner.invoke(args=["users", "create", "a@example.com", "--password", "short"])
    assert short.exit_code == 1 and "at least 8 characters" in short.output
    runner.invoke(args=["users", "create", "a@example.com", "--password", "long-enough"])
    twice = runner.invoke(args=["users", "create", "a@example.com", "--password", "long-enough"])
    assert twice.exit_code == 1 and "already exists" in twice.output


def test_create_api_key_prints_the_key_once_and_stores_only_its_hash(app, client, users):
    result = app.test_cli_runner().invoke(args=["users", "create-api-key", "staff@example.com", "--name", "erp"])
    assert result.exit_code == 0
    secret = result.stdout.strip().splitlines()[0]
    stored = db.session.scalar(select(ApiKey))
    assert stored.key_hash == hash_token(secret) and secret not in stored.key_hash
    assert (
        client.get("/api/v1/me", headers={"Authorization": f"Bearer {secret}"}).get_json()["email"]
        == "staff@example.com"
    )


def test_worker_burst_runs_queued_jobs(app):
    job = get_queue("default").enqueue("bulksign.jobs.periodic.run_periodic", "bulksign.jobs.periodic.rollup_batches")
    result = app.test_cli_runner().invoke(args=["jobs", "worker", "--burst", "default"])
    assert result.exit_code == 0, result.output
    job.refresh()
    assert job.get_status() == "finished" and job.return_value() == 0


def test_worker_refuses_unknown_queues(app):
    result = app.test_cli_runner().invoke(args=["jobs", "worker", "--burst", "nope"])
    assert result.exit_code == 1 and "unknown queue" in result.output


def test_tick_runs_every_periodic_job_once(app):
    result = app.test_cli_runner().invoke(args=["jobs", "tick"])
    assert result.exit_code == 0
    for job in PERIODIC_JOBS:
        assert f"{job.name}:" in result.output


def test_the_scheduler_registers_its_jobs_once_however_often_it_restarts(app):
    for _ in range(3):
        register_periodic_jobs(Scheduler(connection=get_redis()))
    scheduled = [job.id for job in Scheduler(connection=get_redis()).get_jobs()]
    assert sorted(scheduled) == sorted(job.job_id for job in PERIODIC_JOBS)


def test_a_changed_interval_replaces_the_old_schedule(app):
    old = (PeriodicJob("x", ROLLUP_BATCHES, 60),)
    new = (PeriodicJob("x", ROLLUP_BATCHES, 30),)
    register_periodic_jobs(Scheduler(connection=get_redis()), old)
    register_periodic_jobs(Scheduler(connection=get_redis()), new)
    assert [j.id for j in Scheduler(connection=get_redis()).get_jobs()] == [new[0].job_id]


def test_demo_creates_a_login_two_templates_and_a_file_and_is_idempotent(app, client, tmp_path):
    runner = app.test_cli_runner()
    first = runner.invoke(args=["demo"])
    second = runner.invoke(args=["demo"])
    assert first.exit_code == second.exit_code == 0
    assert "admin@example.com / bulksign-demo" in first.output
    names = db.session.scalars(select(DocumentTemplate.name).order_by(DocumentTemplate.id)).all()
    assert names == ["Employment agreement (demo)", "Employment agreement, countersigned (demo)"]
    # The two-party one: the employee signs, then the director, each called by a label, not a key.
    from bulksign.doc_templates.template_parties import party_labels, template_routing
    from bulksign.doc_templates.versions import get_version

    countersigned = get_version(db.session, template_id=2)
    assert template_routing(countersigned) == [["recipient"], ["employer"]]
    assert party_labels(countersigned, language="ru") == {"recipient": "Работник", "employer": "Работодатель"}
    csv_path = Path(app.config["VAR_DIR"]) / "demo" / "recipients.csv"
    assert "email" in csv_path.read_text(encoding="utf-8-sig").splitlines()[0]
    page = client.get("/auth/login")
    from tests.support.web import csrf_from

    login = client.post(
        "/auth/login", data={"email": "admin@example.com", "password": "bulksign-demo", "csrf_token": csrf_from(page)}
    )
    assert login.status_code == 302


def _flask(*args, **env):
    return subprocess.run(
        [sys.executable, "-m", "flask", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "FLASK_APP": "wsgi", **env},
    )


def test_broken_configuration_is_one_clear_line_naming_the_variable(tmp_path):
    result = _flask("users", "create", "a@b.c", "--password", "12345678", DATABASE_URL="mysql://x/y")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "Configuration error: DATABASE_URL must be a sqlite:/// or postgresql:// URL, got scheme 'mysql'"
    )


def test_unreachable_redis_at_worker_start_is_one_clear_line(tmp_path):
    result = _flask(
        "jobs", "worker", "--burst", DATABASE_URL=f"sqlite:///{tmp_path}/x.db", REDIS_URL="redis://127.0.0.1:1/0"
    )
    assert result.returncode == 1
    assert "REDIS_URL: redis is not reachable" in result.stderr and "Traceback" not in result.stderr


def test_the_scheduler_puts_its_jobs_back_after_redis_lost_them(app, redis_server):
    from bulksign.jobs.schedule import periodic_scheduler_class

    scheduler = periodic_scheduler_class()(connection=get_redis(), interval=1)
    scheduler.run(burst=True)
    get_redis().flushall()  # what a Redis restart without persistence does
    scheduler.run(burst=True)
    assert sorted(j.id for j in scheduler.get_jobs()) == sorted(job.job_id for job in PERIODIC_JOBS)


def test_tick_runs_expiry_and_reminders_and_the_scheduler_registers_them_once(app):
    names = [job.name for job in PERIODIC_JOBS]
    assert "expiry" in names and "reminders" in names and names.index("expiry") < names.index("reminders")
    result = app.test_cli_runner().invoke(args=["jobs", "tick"])
    assert "expiry: 0 requests expired, 0 summaries queued" in result.output
    assert "reminders: 0 reminders queued" in result.output
    for _ in range(3):
        register_periodic_jobs(Scheduler(connection=get_redis()))
    ids = [job.id for job in Scheduler(connection=get_redis()).get_jobs()]
    assert sum(1 for i in ids if i.startswith("periodic-reminders-")) == 1
    assert sum(1 for i in ids if i.startswith("periodic-expiry-")) == 1


def test_the_test_worker_reports_how_many_jobs_it_ran(app, run_jobs):
    for _ in range(3):
        get_queue("default").enqueue("bulksign.jobs.periodic.run_periodic", "bulksign.jobs.periodic.rollup_batches")
    assert run_jobs("default") == 3


def test_batches_rebuild_counts_repairs_drifted_counters_and_says_how_many_differed(app):
    from bulksign.batches import counts as batch_counts
    from tests.support.batchdata import batch_in_states
    from tests.support.clock import NOW

    ids = [
        batch_in_states(db.session, statuses=["sent", "signed"], now=NOW, name="A").id,
        batch_in_states(db.session, statuses=["pending"], now=NOW, name="B").id,
    ]
    db.session.execute(
        text("UPDATE batch_status_counts SET count = 7 WHERE batch_id = :b AND status = 'signed'"), {"b": ids[0]}
    )
    db.session.commit()
    runner = app.test_cli_runner()
    result = runner.invoke(args=["batches", "rebuild-counts"])
    assert result.exit_code == 0, result.output
    assert "of 2 batches; 1 differed" in result.output
    db.session.rollback()
    assert batch_counts.counters(db.session, ids) == batch_counts.recount(db.session, ids)
    unknown = runner.invoke(args=["batches", "rebuild-counts", str(ids[1]), "999"])
    assert unknown.exit_code == 1 and "999" in unknown.output


def test_only_the_web_process_keeps_the_rate_limits_in_memory_fallback(app):
    """Its timer thread helps a process that serves requests while Redis is away; a command it only costs."""
    from tests.support.batches import worker_env

    probe = (
        "import gc; from limits.storage import MemoryStorage; "
        "print('fallbacks:', sum(isinstance(o, MemoryStorage) for o in gc.get_objects()))"
    )
    served = subprocess.run(
        [sys.executable, "-c", f"import wsgi; {probe}"],
        cwd=ROOT,
        env=worker_env(app),
        capture_output=True,
        text=True,
        timeout=60,
    )
    command = subprocess.run(
        [sys.executable, "-m", "flask", "shell"],
        input=probe,
        cwd=ROOT,
        env=worker_env(app),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "fallbacks: 1" in served.stdout, served.stderr[-2000:]
    assert "fallbacks: 0" in command.stdout, command.stderr[-2000:]


def test_make_run_on_another_port_mails_links_to_that_port(monkeypatch):
    from bulksign.core.config import load_config

    monkeypatch.delenv("APP_URL", raising=False)
    monkeypatch.setenv("BIND", "127.0.0.1:5600")
    assert load_config()["APP_URL"] == "http://127.0.0.1:5600"
    monkeypatch.setenv("BIND", "0.0.0.0:8080")
    assert load_config()["APP_URL"] == "http://127.0.0.1:8080"
    monkeypatch.setenv("APP_URL", "https://sign.example.com/")
    assert load_config()["APP_URL"] == "https://sign.example.com"


def test_browsers_asking_for_favicon_ico_get_the_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response.headers["Location"].endswith("/static/favicon.svg")
    assert client.get("/static/favicon.svg").status_code == 200

"""/readyz: alive is not enough; the scheduler must tick and queued work must have a worker."""

from __future__ import annotations

from datetime import timedelta

from bulksign.core.extensions import get_redis
from bulksign.jobs.worker import AppWorker
from bulksign.mail import mail_server
from bulksign.models import utcnow
from bulksign.work.queues import get_queue
from bulksign.work.scheduler_ticks import record_tick


def _workers_listening_on(*queues: str) -> AppWorker:
    """A worker registered in Redis as a running one is (listening on ``queues``)."""
    worker = AppWorker([get_queue(name) for name in queues], connection=get_redis())
    worker.register_birth()
    return worker


def test_ready_when_the_scheduler_ticked_and_no_work_waits(client):
    record_tick(get_redis(), now=utcnow())
    response = client.get("/readyz")
    assert response.status_code == 200 and response.get_json()["status"] == "ok"
    assert response.get_json()["problems"] == []


def test_not_ready_while_the_scheduler_has_not_ticked_for_three_minutes(client):
    record_tick(get_redis(), now=utcnow() - timedelta(minutes=3, seconds=5))
    response = client.get("/readyz")
    assert response.status_code == 503
    [problem] = response.get_json()["problems"]
    assert problem.startswith("the scheduler has not ticked for 18")
    # Liveness does not care: the web process itself is fine.
    assert client.get("/healthz").status_code == 200


def test_not_ready_before_the_scheduler_ever_ticked(client):
    response = client.get("/readyz")
    assert response.status_code == 503 and "the scheduler has not ticked yet" in response.get_json()["problems"][0]


def test_not_ready_while_jobs_wait_in_a_queue_no_worker_listens_on(client):
    record_tick(get_redis(), now=utcnow())
    get_queue("mail").enqueue("bulksign.jobs.periodic.run_periodic", "x")
    elsewhere = _workers_listening_on("pdf")
    try:
        response = client.get("/readyz")
        assert response.status_code == 503
        body = response.get_json()
        assert body["problems"] == ["1 jobs wait in queue mail and no worker listens on it"]
        assert body["queues"]["mail"] == {"waiting": 1, "workers": 0}

        mail_worker = _workers_listening_on("mail", "default")
        assert client.get("/readyz").status_code == 200
        # A worker killed without a word stays registered, but its key lapses with its heartbeat.
        get_redis().delete(mail_worker.key)
        assert client.get("/readyz").status_code == 503
    finally:
        elsewhere.register_death()


def test_not_ready_and_says_why_when_redis_is_down(make_app):
    app = make_app(REDIS_URL="redis://127.0.0.1:1/0")
    response = app.test_client().get("/readyz")
    assert response.status_code == 503
    assert "REDIS_URL" in response.get_json()["problems"][0]


def test_not_ready_while_the_mail_server_has_been_out_of_reach_for_five_minutes(client):
    """Its mails wait for it and none fails: this is where an operator hears of it."""
    record_tick(get_redis(), now=utcnow())
    reason = "The mail server could not be reached (ConnectionRefusedError: [Errno 111] Connection refused)."
    mail_server.record_down(get_redis(), now=utcnow() - timedelta(minutes=2), reason=reason)
    assert client.get("/readyz").status_code == 200  # a restart of the server is not an outage
    mail_server.record_down(get_redis(), now=utcnow() - timedelta(minutes=6), reason=reason)  # keeps the start
    assert client.get("/readyz").status_code == 200
    get_redis().delete(mail_server.KEY)
    mail_server.record_down(get_redis(), now=utcnow() - timedelta(minutes=6), reason=reason)
    response = client.get("/readyz")
    assert response.status_code == 503
    [problem] = response.get_json()["problems"]
    assert problem.startswith("the mail server has not been reachable for 36") and "Connection refused" in problem
    assert response.get_json()["mail_server_down_since"]
    mail_server.record_reached(get_redis())
    assert client.get("/readyz").status_code == 200

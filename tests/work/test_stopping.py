"""SIGTERM: every process kind exits within 10 s, and a stopped chunk hands its untried work back."""

from __future__ import annotations

import json
import urllib.request

import pytest
from sqlalchemy import select

from bulksign.core.extensions import db, get_redis
from bulksign.models import OutgoingMail
from bulksign.work.pipeline import RENDER, SEND, enqueue_renders
from bulksign.work.scheduler_ticks import KEY as SCHEDULER_TICK_KEY
from tests.support.batches import make_batch, request_ids, requests_of, run_worker, worker_env
from tests.support.clock import NOW
from tests.support.processes import start, terminate_once
from tests.support.services import free_port
from tests.support.workers import queued

#: The promise: a supervisor giving 10 s before SIGKILL never kills a process mid-work.
EXIT_WITHIN_SECONDS = 10


def _mails() -> list[OutgoingMail]:
    """The invitations recorded (the owner's completion notice follows them once the batch is done)."""
    db.session.expire_all()
    return list(
        db.session.scalars(select(OutgoingMail).where(OutgoingMail.kind == "invitation").order_by(OutgoingMail.id))
    )


@pytest.mark.slow(seconds=20)
def test_a_mail_worker_waiting_on_the_throttle_exits_promptly_and_hands_back_the_unsent_mails(make_app, smtp, tmp_path):
    # Two mails a minute: after the first send, the chunk waits about 30 s for each next slot.
    app = make_app(MAIL_RATE_PER_MINUTE=2)
    with app.app_context():
        batch = make_batch(now=NOW, recipients=4)
        enqueue_renders(request_ids(batch))
        run_worker(app, "pdf")  # renders, writes the invitations and queues one send job for the four
        worker = start(
            ["jobs", "worker", "mail"],
            env={**worker_env(app), "MAIL_RATE_PER_MINUTE": "2"},
            log=tmp_path / "worker.log",
        )
        seconds = terminate_once(
            worker,
            lambda: [r.status for r in requests_of(batch)].count("sent") == 1,
            what="the first invitation to be sent",
            give_up_after=150,
        )
        print(f"mail worker waiting on the throttle exited {seconds:.1f} s after SIGTERM")
        assert seconds < EXIT_WITHIN_SECONDS and worker.returncode == 0

        # The three unsent invitations are back where a send can claim them, their claim not counted,
        # and queued again for another worker.
        mails = _mails()
        assert [r.status for r in requests_of(batch)] == ["sent", "generated", "generated", "generated"]
        assert [(m.status, m.attempts) for m in mails] == [("sent", 1)] + [("queued", 0)] * 3
        assert queued(SEND, [m.id for m in mails]) == {m.id for m in mails[1:]}

        app.config["MAIL_RATE_PER_MINUTE"] = 0
        run_worker(app, "mail")
        assert [r.status for r in requests_of(batch)] == ["sent"] * 4
        # Nothing lost, nothing sent twice.
        assert sorted(m.message_id for m in smtp.of_kind("invitation")) == sorted(m.message_id for m in _mails())


def test_a_render_worker_stopped_mid_chunk_exits_promptly_and_hands_back_what_it_did_not_render(
    make_app, smtp, tmp_path
):
    app = make_app(RENDER_CHUNK_SIZE=40)
    with app.app_context():
        batch = make_batch(now=NOW, recipients=40)
        enqueue_renders(request_ids(batch))
        worker = start(["jobs", "worker", "pdf"], env=worker_env(app), log=tmp_path / "worker.log")
        seconds = terminate_once(
            worker, lambda: "generating" in {r.status for r in requests_of(batch)}, what="the chunk to be claimed"
        )
        print(f"render worker mid-chunk exited {seconds:.1f} s after SIGTERM")
        assert seconds < EXIT_WITHIN_SECONDS and worker.returncode == 0

        requests = requests_of(batch)
        # Each request is either rendered (invitation written) or back in pending, untried and queued again.
        assert {r.status for r in requests} <= {"generated", "pending"}
        pending = [r for r in requests if r.status == "pending"]
        assert all(r.attempts == 0 for r in pending)
        assert queued(RENDER, [r.id for r in pending]) == {r.id for r in pending}

        run_worker(app, "pdf", "mail")
        assert [r.status for r in requests_of(batch)] == ["sent"] * 40
        assert len(smtp.of_kind("invitation")) == 40


def test_the_scheduler_exits_promptly_and_leaves_its_lock_free(make_app, tmp_path):
    app = make_app()
    with app.app_context():
        scheduler = start(["jobs", "scheduler", "--interval", "1"], env=worker_env(app), log=tmp_path / "scheduler.log")
        seconds = terminate_once(
            scheduler, lambda: get_redis().exists(SCHEDULER_TICK_KEY), what="the scheduler's first tick"
        )
        print(f"scheduler exited {seconds:.1f} s after SIGTERM")
        assert seconds < EXIT_WITHIN_SECONDS and scheduler.returncode == 0
        # A replacement scheduler can take over at once.
        assert not get_redis().exists("rq:scheduler_lock")


def test_the_web_server_exits_promptly(make_app, tmp_path):
    app = make_app()
    port = free_port()
    with app.app_context():
        web = start(
            ["gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "4", "wsgi:app"],
            env=worker_env(app),
            log=tmp_path / "web.log",
        )

        def answers():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as response:
                    return json.load(response)["status"] == "ok"
            except OSError:
                return False

        seconds = terminate_once(web, answers, what="gunicorn to answer /healthz")
        print(f"gunicorn exited {seconds:.1f} s after SIGTERM")
        assert seconds < EXIT_WITHIN_SECONDS and web.returncode == 0

"""A batch goes from created to every invitation delivered: render, store, mail, track, roll up."""

from __future__ import annotations

import re

from sqlalchemy import select

from bulksign.batches.progress import counts_for
from bulksign.core.extensions import db, get_redis
from bulksign.core.tokens import hash_token
from bulksign.documents.storage import get_storage
from bulksign.models import Batch, Document, Event, OutgoingMail
from bulksign.work.pipeline import RENDER, SEND, enqueue_renders, owners
from bulksign.work.queues import get_queue
from tests.support.batches import make_batch, request_ids, requests_of
from tests.support.clock import NOW
from tests.support.workers import one_per_job


def test_every_recipient_of_a_batch_gets_an_invitation_with_link_and_pixel(app, users, smtp, run_jobs):
    batch = make_batch(user=users["staff"], now=NOW, recipients=3, reply_to="hr@example.com")
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")

    requests = requests_of(batch)
    assert [r.status for r in requests] == ["sent"] * 3
    assert len(smtp.of_kind("invitation")) == 3
    # Every request dispatched, nobody signed yet: the batch awaits signatures and its owner is not told it is done.
    assert smtp.of_kind("completion-notice") == []
    for request in requests:
        (mail,) = smtp.to(request.email)
        link = re.search(r"http://127\.0\.0\.1:5000/sign/([A-Za-z0-9_-]+)", mail.text()).group(1)
        assert hash_token(link) == request.token_hash
        pixel = re.search(r'<img src="([^"]+)"', mail.html()).group(1)
        assert pixel.startswith(f"http://127.0.0.1:5000/t/{request.id}.") and link not in pixel
        assert link in mail.html()
        assert mail.message_id == f"<invitation-{request.id}-{request.token_nonce[:12]}@bulksign.local>"
        assert str(mail.message["Reply-To"]) == "hr@example.com"
        assert "Employment contract" in mail.subject
        assert request.sent_at and request.expires_at and request.expires_at > request.sent_at
        doc = db.session.scalar(select(Document).where(Document.request_id == request.id))
        assert get_storage().get(doc.storage_key).startswith(b"%PDF") and doc.size > 1000
    rows = db.session.scalars(select(OutgoingMail).where(OutgoingMail.kind == "invitation")).all()
    assert {(m.status, m.attempts) for m in rows} == {("sent", 1)}
    assert db.session.get(Batch, batch).status == "awaiting_signatures"
    # Finished jobs leave no owners behind, and their records expire within a minute.
    assert owners(RENDER, request_ids(batch)) == {} and owners(SEND, [m.id for m in rows]) == {}
    assert all(0 < get_redis().ttl(key) <= RENDER.job.result_ttl for key in get_redis().keys("rq:job:*"))


def test_the_open_pixel_records_the_first_open_once_and_always_answers_a_gif(app, users, smtp, run_jobs, client):
    batch = make_batch(user=users["staff"], now=NOW, recipients=1)
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")
    pixel = re.search(r'<img src="http://127.0.0.1:5000([^"]+)"', smtp.of_kind("invitation")[0].html()).group(1)
    for _ in range(2):
        response = client.get(pixel)
        assert response.status_code == 200 and response.mimetype == "image/gif"
        assert "no-store" in response.headers["Cache-Control"]
    (request,) = requests_of(batch)
    assert request.email_opened_at is not None
    assert db.session.scalar(select(db.func.count()).select_from(Event).where(Event.type == "email.opened")) == 1
    forged = client.get(f"/t/{request.id}.{'0' * 32}.gif")
    assert forged.status_code == 200 and forged.mimetype == "image/gif"
    assert client.get("/t/garbage").status_code == 200


def test_batch_counts_always_equal_the_requests(app, users, smtp, run_jobs):
    one_per_job(app)
    batch = make_batch(user=users["staff"], now=NOW, recipients=4)
    ids = request_ids(batch)
    smtp.handler.reject_recipients["person1@example.com"] = "550 5.1.1 No such user"
    enqueue_renders(ids)
    for _ in range(20):
        if not len(get_queue("pdf")) + len(get_queue("mail")):
            break
        run_jobs("pdf", "mail", max_jobs=1)
        counts = counts_for(db.session, [batch])[batch]
        truth = {}
        for r in requests_of(batch):
            truth[r.status] = truth.get(r.status, 0) + 1
        assert {k: v for k, v in counts.by_status.items() if v} == truth and counts.total == 4
    assert db.session.get(Batch, batch).status == "partially_failed"


def test_a_template_that_makes_wkhtmltopdf_hang_fails_with_a_clear_message(make_app):
    from bulksign.jobs.pdf import render_many

    app = make_app(PDF_TIMEOUT_SECONDS=1)
    with app.app_context():
        # A small template (they are capped at 2,000,000 characters) that fills in to a 5 MB table.
        rows = "{% for i in range(60000) %}<tr><td>{{ 'x ' * 40 }}</td></tr>{% endfor %}"
        batch = make_batch(now=NOW, recipients=1, html=f"<p>{{{{ name }}}}</p><table>{rows}</table>")
        assert render_many(request_ids(batch)) == "failed 1"
        (request,) = requests_of(batch)
        assert request.status == "failed"
        assert "longer than 1 s to render" in request.error_message
        assert db.session.get(Batch, batch).status == "closed"  # nobody left who could sign


def test_unwritable_storage_is_retried_then_fails_with_a_clear_message(make_app, smtp, tmp_path):
    from bulksign.documents.storage import LocalStorage
    from tests.support.batches import run_worker

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    app = make_app(
        STORAGE_URL=str(blocker / "storage"), RETRY_BACKOFF_SECONDS=0, RENDER_MAX_ATTEMPTS=2, RENDER_CHUNK_SIZE=1
    )
    with app.app_context():
        batch = make_batch(now=NOW, recipients=2)
        enqueue_renders(request_ids(batch))

        run_worker(app, "pdf", max_jobs=1)
        first = requests_of(batch)[0]
        assert first.status == "pending" and "Could not write the document to storage" in first.error_message

        run_worker(app, "pdf", max_jobs=2)  # the second request's first try, the first request's last
        first = requests_of(batch)[0]
        assert first.status == "failed"
        assert first.error_message.startswith("Could not write the document to storage (Not a directory)")
        assert "gave up after 2 attempts" in first.error_message

        app.extensions["bulksign_storage"] = LocalStorage(tmp_path / "storage")  # the disk is back
        run_worker(app, "pdf", "mail")
        assert [r.status for r in requests_of(batch)] == ["failed", "sent"]


def test_several_worker_processes_share_one_batch(app, users, smtp):
    import subprocess
    import sys

    from bulksign.core.config import BASE_DIR
    from tests.support.batches import worker_env

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
    assert {r.status for r in requests_of(batch)} == {"sent"}
    assert len(smtp.of_kind("invitation")) == 6


def test_a_row_whose_template_raises_any_error_fails_alone_at_once_with_the_template_message(make_app):
    from bulksign.jobs.pdf import render_many

    app = make_app()
    with app.app_context():
        # Only the recipient called "Bad" trips the errors (the save's sample row does not).
        html = (
            "<p>{{ name }}</p>{% macro down(n) %}{{ down(n) }}{% endmacro %}"
            "{% if name == 'Bad' %}{{ name|xmlattr }}{% endif %}{% if name == 'Deep' %}{{ down(1) }}{% endif %}"
        )
        batch = make_batch(
            now=NOW,
            recipients=[
                ("a@example.com", "Ann"),
                ("b@example.com", "Bad"),
                ("c@example.com", "Cy"),
                ("d@example.com", "Deep"),
            ],
            html=html,
        )
        assert render_many(request_ids(batch)) == "generated 2, failed 2"
        by_name = {r.name: r for r in requests_of(batch)}
        assert by_name["Ann"].status == by_name["Cy"].status == "generated"
        assert by_name["Bad"].status == by_name["Deep"].status == "failed"
        assert "AttributeError" in by_name["Bad"].error_message
        assert "a macro calls itself without end" in by_name["Deep"].error_message

"""`make run`'s path: a SQLite database built by the Alembic migrations, and a batch's life on it (create,
render, send, sign or decline, seal, the batch finished). The rest of the suite runs on PostgreSQL."""

from __future__ import annotations

import re

import pytest
from flask_migrate import upgrade
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.models import Batch, Document, SigningRequest, utcnow
from bulksign.people.users import create_user
from bulksign.work.pipeline import enqueue_renders
from tests.support.batches import make_batch, request_ids
from tests.support.signatures import data_url, png
from tests.support.web import csrf_from

pytestmark = pytest.mark.sqlite


@pytest.fixture
def app(make_app, tmp_path):
    """The app on a fresh SQLite file whose schema the migrations made, as `flask db upgrade` in `make run`."""
    app = make_app(DATABASE_URL=f"sqlite:///{tmp_path}/bulksign.db")
    with app.app_context():
        upgrade()
        yield app


@pytest.fixture
def sent(app, smtp, run_jobs):
    """A batch of two on the SQLite database, rendered and invited: its id and each recipient's signing link."""
    assert app.config["SQLALCHEMY_DATABASE_URI"].startswith("sqlite:///")
    owner = create_user(db.session, email="owner@example.com", password="owner-password", role="staff", now=utcnow())
    batch_id = make_batch(user=owner, now=utcnow(), recipients=[("ann@example.com", "Ann"), ("bob@example.com", "Bob")])
    enqueue_renders(request_ids(batch_id))
    run_jobs("pdf", "mail")
    links = {m.rcpt_tos[0]: re.search(r"/sign/[A-Za-z0-9_-]+", m.text()).group(0) for m in smtp.of_kind("invitation")}
    assert set(links) == {"ann@example.com", "bob@example.com"}
    return batch_id, links


def _statuses(batch_id: int) -> dict[str, str]:
    db.session.expire_all()
    return {
        r.email: r.status for r in db.session.scalars(select(SigningRequest).where(SigningRequest.batch_id == batch_id))
    }


def test_the_migrations_build_the_database_a_batch_renders_and_sends_on(app, sent):
    batch_id, _ = sent
    assert _statuses(batch_id) == {"ann@example.com": "sent", "bob@example.com": "sent"}
    assert db.session.get(Batch, batch_id).status == "awaiting_signatures"


def test_on_sqlite_a_recipient_signs_the_copy_is_sealed_and_the_other_declines_which_finishes_the_batch(
    app, client, sent, run_jobs
):
    batch_id, links = sent
    page = client.get(links["ann@example.com"])
    assert page.status_code == 200
    signed = client.post(
        f"{links['ann@example.com']}/sign",
        data={"csrf_token": csrf_from(page), "name": "Ann", "consent": "yes", "signature": data_url(png())},
    )
    assert signed.status_code == 303
    assert run_jobs("pdf") == 1  # the seal
    (ann,) = [r for r in db.session.scalars(select(SigningRequest)) if r.email == "ann@example.com"]
    kinds = db.session.scalars(select(Document.kind).where(Document.request_id == ann.id)).all()
    assert sorted(kinds) == ["original", "signed"]

    page = client.get(links["bob@example.com"])
    declined = client.post(
        f"{links['bob@example.com']}/decline", data={"csrf_token": csrf_from(page), "reason": "Wrong salary"}
    )
    assert declined.status_code == 303
    run_jobs()
    assert _statuses(batch_id) == {"ann@example.com": "signed", "bob@example.com": "declined"}
    assert db.session.get(Batch, batch_id).status == "closed"

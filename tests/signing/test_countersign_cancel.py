"""A countersigner's "Sign all" over a hundred documents (two chunks, two workers) while staff cancel the
batch, on real workers (``flask jobs worker``) and PostgreSQL through PgBouncer: no party is signed on a request once
it is cancelled, and no ``party.signed`` event follows a ``status.cancelled`` one. The cancel is held open until a
worker's signature waits on it, so the race is met every time rather than by luck."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import aliased

from bulksign.batches.progress import cancel_batch
from bulksign.core.extensions import db
from bulksign.jobs.countersign import send_due_digests
from bulksign.models import Event, Party, SigningRequest, utcnow
from bulksign.work.pipeline import enqueue_renders
from tests.signing.test_countersign import _digest_token, _digests, _sign_form
from tests.signing.test_routing import EMPLOYER, _batch
from tests.support.batches import request_ids, worker_env
from tests.support.partydata import recipients_sign
from tests.support.processes import start, stop, wait_for

DOCUMENTS = int(os.environ.get("COUNTERSIGN_CANCEL_DOCUMENTS", "100"))


def _employer_signed() -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).where(Party.role == "employer", Party.status == "signed"))


def _waiting_on_a_lock() -> int:
    """Sessions of the test database waiting for a row lock (asked on a connection of its own)."""
    with db.engine.connect() as connection:
        return connection.scalar(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
        )


@pytest.mark.slow(seconds=15)
def test_a_sign_all_racing_a_batch_cancel_signs_nothing_once_a_request_is_cancelled(
    app, users, client, smtp, run_jobs, tmp_path
):
    rows = "email,name\n" + "".join(f"e{i}@example.com,Employee {i}\n" for i in range(DOCUMENTS))
    batch_id = _batch(users, file=rows, form={**EMPLOYER, "routing": '[["recipient", "employer"]]'})
    ids = request_ids(batch_id)
    enqueue_renders(ids)
    run_jobs("pdf", "mail")
    recipients_sign(db.session, ids)  # the employer's signature is each document's last
    send_due_digests(now=utcnow())
    run_jobs("mail")
    token = _digest_token(_digests(smtp)[-1])

    assert _sign_form(client, token, all="1").status_code == 303
    workers = [
        start(["jobs", "worker", "--burst", "default"], env=worker_env(app), log=tmp_path / f"worker-{n}.log")
        for n in range(2)
    ]
    try:
        wait_for(lambda: _employer_signed() >= 10, timeout=120, what="the first documents signed", every=0.02)
        # Staff cancel the batch: its requests are locked and moved, not yet committed, until a worker's next
        # signature waits on them; then the cancel commits.
        cancel_batch(db.session, batch_id=batch_id, user=db.session.merge(users["staff"]), now=utcnow())
        wait_for(_waiting_on_a_lock, timeout=60, what="a signature waiting on the cancel", every=0.01)
        db.session.commit()
        for worker in workers:
            worker.wait(timeout=120)
    finally:
        for worker in workers:
            stop(worker)

    db.session.rollback()
    statuses = dict(
        db.session.execute(select(SigningRequest.status, func.count()).group_by(SigningRequest.status)).all()
    )
    print(f"{statuses} of {DOCUMENTS}")
    assert set(statuses) == {"signed", "cancelled"} and statuses["signed"] >= 10 and statuses["cancelled"] >= 1
    signed_on_cancelled = db.session.scalar(
        select(func.count())
        .select_from(Party)
        .join(SigningRequest, SigningRequest.id == Party.request_id)
        .where(SigningRequest.status == "cancelled", Party.role == "employer", Party.status == "signed")
    )
    assert signed_on_cancelled == 0
    signed, cancelled = aliased(Event), aliased(Event)
    after = db.session.scalar(
        select(func.count())
        .select_from(signed)
        .join(cancelled, cancelled.request_id == signed.request_id)
        .where(signed.type == "party.signed", cancelled.type == "status.cancelled", signed.id > cancelled.id)
    )
    assert after == 0
    # Each signed document once.
    per_request = db.session.execute(
        select(Event.request_id, func.count())
        .where(Event.type == "party.signed", Event.details["role"].as_string() == "employer")
        .group_by(Event.request_id)
    ).all()
    assert len(per_request) == statuses["signed"] and {n for _, n in per_request} == {1}

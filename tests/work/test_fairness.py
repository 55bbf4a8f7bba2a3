"""One batch does not hold everyone else's work: a small batch of another team gets out while a big one runs."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select

from bulksign.core.extensions import db
from bulksign.models import SigningRequest, utcnow
from bulksign.people.teams import add_member, create_team
from bulksign.people.users import create_user
from bulksign.work.pipeline import enqueue_renders
from bulksign.work.queues import get_queue
from tests.support.batches import make_batch, request_ids, worker_env
from tests.support.processes import start, stop, wait_for

BIG = 200


def _sent(batch_id: int) -> int:
    db.session.rollback()  # a fresh snapshot: the workers commit in other processes
    return db.session.scalar(
        select(func.count()).where(SigningRequest.batch_id == batch_id, SigningRequest.status == "sent")
    )


@pytest.mark.slow(seconds=60)
def test_a_five_recipient_batch_of_another_team_is_sent_before_a_running_big_batch_is_half_done(
    make_app, users, smtp, tmp_path
):
    # Small chunks, so the big batch is many jobs (40 renders, 40 sends), as a 100,000-recipient one is.
    sizes = {"RENDER_CHUNK_SIZE": 5, "SEND_CHUNK_SIZE": 5}
    app = make_app(**sizes)
    with app.app_context():
        big = make_batch(now=utcnow(), user=users["staff"], recipients=BIG, name="Everyone")
        other = create_user(
            db.session, email="other@example.com", password="other-password", role="staff", now=utcnow()
        )
        team = create_team(db.session, name="Other team", now=utcnow())
        add_member(db.session, team=team, user=other, by=None, now=utcnow())
        db.session.commit()
        env = {**worker_env(app), **{key: str(value) for key, value in sizes.items()}}
        # As deployed: render workers and a mail worker, each its own process.
        workers = [
            start(["jobs", "worker", "--processes", "1", queue], env=env, log=tmp_path / f"{queue}.log")
            for queue in ("pdf", "mail")
        ]
        try:
            enqueue_renders(request_ids(big))
            # Only the batch's window waits in line, not its 40 chunks.
            assert len(get_queue("pdf")) == app.config["CHUNKS_QUEUED_PER_BATCH"]
            # Generous: a worker subprocess may take half a minute to import the app on a loaded machine.
            wait_for(lambda: _sent(big) >= 10, timeout=180, what="the big batch's first invitations")

            small = make_batch(
                now=utcnow(),
                user=other,
                recipients=[(f"new{i}@example.com", f"New {i}") for i in range(5)],
                name="Five",
                team_id=team.id,
            )
            created = time.monotonic()
            enqueue_renders(request_ids(small))
            wait_for(lambda: _sent(small) == 5, timeout=120, what="the small batch's invitations")
            waited, big_done = time.monotonic() - created, _sent(big)
            print(f"5-recipient batch sent in {waited:.1f} s, the {BIG}-recipient batch at {big_done} sent")
            assert big_done < BIG // 2
            # And the big batch is not starved: it finishes too.
            wait_for(lambda: _sent(big) == BIG, timeout=300, what="the big batch to finish")
        finally:
            for worker in workers:
                stop(worker)
        assert sorted(to for m in smtp.of_kind("invitation") for to in m.rcpt_tos if to.startswith("new")) == [
            f"new{i}@example.com" for i in range(5)
        ]

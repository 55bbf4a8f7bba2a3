"""The per-batch counters always equal a GROUP BY of the requests: after any moves, rollbacks and races."""

from __future__ import annotations

import io
import random

import pytest
from sqlalchemy import event, select, text, update
from sqlalchemy.orm import Session

from bulksign.batches import counts as batch_counts
from bulksign.batches.states import transition
from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.models import BatchStatusCount, SigningRequest
from bulksign.models.status import TRANSITIONS, Status
from bulksign.people.users import create_api_key
from tests.support.batchdata import batch_in_states
from tests.support.clock import NOW
from tests.support.races import race

S = Status
#: States a request can leave, and states it can reach, for picking moves at random.
MOVABLE = sorted(s for s in Status if TRANSITIONS[s])
REACHABLE = sorted({to for targets in TRANSITIONS.values() for to in targets})


def request_ids(batch_id: int) -> list[int]:
    return list(
        db.session.scalars(
            select(SigningRequest.id).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
        )
    )


def assert_counters_match(batch_ids: list[int]) -> None:
    db.session.rollback()  # a fresh transaction: what is committed
    assert batch_counts.counters(db.session, batch_ids) == batch_counts.recount(db.session, batch_ids)


def random_move(rng: random.Random, ids: list[int]) -> None:
    """One allowed transition, single or bulk; some are compare-and-set losers (a wrong ``frm``)."""
    if rng.random() < 0.5:
        request_id = rng.choice(ids)
        current = Status(db.session.scalar(select(SigningRequest.status).where(SigningRequest.id == request_id)))
        frm = current
        if not TRANSITIONS[current] or rng.random() < 0.15:
            frm = rng.choice(MOVABLE)  # usually not the request's state: the move loses and changes nothing
        transition(db.session, request_id, frm=frm, to=rng.choice(sorted(TRANSITIONS[frm])), now=NOW)
    else:
        to = rng.choice(REACHABLE)
        sources = [s for s in Status if to in TRANSITIONS[s]]
        frm = rng.sample(sources, k=rng.randint(1, len(sources)))
        transition(db.session, rng.sample(ids, k=rng.randint(1, 40)), frm=frm, to=to, now=NOW)


def test_counters_equal_the_group_by_after_random_moves_commits_and_rollbacks(any_db):
    rng = random.Random(20261129)
    batches = [
        batch_in_states(
            db.session, statuses=[rng.choice(list(Status)) for _ in range(n)], now=NOW, name=f"Batch {n}"
        ).id
        for n in (40, 55, 25)
    ]
    ids = [rid for batch_id in batches for rid in request_ids(batch_id)]
    assert_counters_match(batches)
    outcomes = {"commit": 0, "rollback": 0, "close": 0}
    for step in range(200):
        for _ in range(rng.randint(1, 3)):
            random_move(rng, ids)
        roll = rng.random()
        if roll < 0.2:
            db.session.rollback()
            outcomes["rollback"] += 1
        elif roll < 0.3:
            db.session.close()  # ends the transaction with no rollback event: its notes must go too
            outcomes["close"] += 1
        else:
            db.session.commit()
            outcomes["commit"] += 1
        if step % 10 == 9:
            assert_counters_match(batches)
    assert_counters_match(batches)
    assert min(outcomes.values()) > 10
    totals = {bid: sum(c.values()) for bid, c in batch_counts.counters(db.session, batches).items()}
    assert totals == {batches[0]: 40, batches[1]: 55, batches[2]: 25}


@pytest.mark.sqlite
def test_on_sqlite_a_move_committed_just_before_ours_is_counted_from_the_status_it_really_left(make_app, tmp_path):
    # pysqlite begins a transaction only at the first write: a status read before the UPDATE may be stale.
    app = make_app(DATABASE_URL=f"sqlite:///{tmp_path}/race.db")
    with app.app_context():
        db.create_all()
        batch_id = batch_in_states(db.session, statuses=["sent"], now=NOW).id
        (request_id,) = request_ids(batch_id)
        other = Session(db.engine)
        raced = []

        def recipient_opens_first(conn, cursor, statement, parameters, context, executemany):
            if statement.startswith("UPDATE signing_requests") and conn is not other.connection() and not raced:
                raced.append(transition(other, request_id, frm=S.SENT, to=S.OPENED, now=NOW).won)
                other.commit()

        event.listen(db.engine, "before_cursor_execute", recipient_opens_first)
        try:
            won = transition(db.session, request_id, frm=[S.SENT, S.OPENED], to=S.CANCELLED, now=NOW).won
            db.session.commit()
        finally:
            event.remove(db.engine, "before_cursor_execute", recipient_opens_first)
            other.close()
        assert raced == [(request_id,)] and won == (request_id,)
        assert_counters_match([batch_id])


def test_a_rolled_back_savepoint_does_not_leave_its_moves_in_the_counters(app):
    batch_id = batch_in_states(db.session, statuses=["pending"] * 6, now=NOW).id
    ids = request_ids(batch_id)
    transition(db.session, ids[:2], frm=S.PENDING, to=S.GENERATING, now=NOW)
    savepoint = db.session.begin_nested()
    transition(db.session, ids[2:5], frm=S.PENDING, to=S.CANCELLED, now=NOW)
    savepoint.rollback()
    savepoint = db.session.begin_nested()
    transition(db.session, ids[5], frm=S.PENDING, to=S.GENERATING, now=NOW)
    savepoint.commit()
    db.session.commit()
    assert_counters_match([batch_id])
    counts = batch_counts.counters(db.session, [batch_id])[batch_id]
    assert (counts["pending"], counts["generating"], counts["cancelled"]) == (3, 3, 0)


def test_a_transaction_sees_its_own_moves_in_the_counters_only_after_commit(app):
    batch_id = batch_in_states(db.session, statuses=["pending"] * 3, now=NOW).id
    transition(db.session, request_ids(batch_id), frm=S.PENDING, to=S.GENERATING, now=NOW)
    assert batch_counts.counters(db.session, [batch_id])[batch_id]["generating"] == 0
    assert batch_counts.recount(db.session, [batch_id])[batch_id]["generating"] == 3
    db.session.commit()
    assert batch_counts.counters(db.session, [batch_id])[batch_id]["generating"] == 3


def test_one_commit_moves_its_counters_in_one_global_order_with_one_statement(app):
    first, second = (batch_in_states(db.session, statuses=["pending"] * 4, now=NOW, name=n).id for n in ("A", "B"))
    a, b = request_ids(first), request_ids(second)
    statements = []

    def seen(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("UPDATE BATCH_STATUS_COUNTS"):
            statements.append(parameters)

    event.listen(db.engine, "before_cursor_execute", seen)
    try:
        transition(db.session, [b[0], a[0]], frm=S.PENDING, to=S.GENERATING, now=NOW)
        transition(db.session, [a[1], b[1]], frm=S.PENDING, to=S.CANCELLED, now=NOW)
        transition(db.session, a[0], frm=S.GENERATING, to=S.PENDING, now=NOW)  # nets out to nothing for a[0]
        assert statements == []  # nothing is locked before the commit
        db.session.commit()
    finally:
        event.remove(db.engine, "before_cursor_execute", seen)
    (params,) = statements
    assert [(p["b"], p["s"], p["delta"]) for p in params] == [
        (first, "cancelled", 1),
        (first, "pending", -1),
        (second, "cancelled", 1),
        (second, "generating", 1),
        (second, "pending", -2),
    ]
    assert_counters_match([first, second])


#: The pipeline's moves, forward and back, as workers, retries and the reconciler make them.
PIPELINE = [
    (S.PENDING, S.GENERATING),
    (S.GENERATING, S.GENERATED),
    (S.GENERATED, S.SENDING),
    (S.SENDING, S.SENT),
    (S.SENT, S.OPENED),
    (S.OPENED, S.SIGNED),
    (S.GENERATING, S.FAILED),
    (S.FAILED, S.PENDING),
    (S.SENDING, S.GENERATED),
    (S.GENERATING, S.PENDING),
    (S.SENT, S.EXPIRED),
    (S.EXPIRED, S.GENERATED),
]


def test_concurrent_movers_of_one_batch_keep_the_counters_exact_without_deadlocks(app):
    batch_id = batch_in_states(db.session, statuses=["pending"] * 300, now=NOW).id
    ids = request_ids(batch_id)
    rounds = 50

    def mover(number: int) -> int:
        rng, won = random.Random(number), 0
        for _ in range(rounds):
            # Overlapping random sets (many requests are claimed twice at once), split into ascending
            # id ranges with a move each, so one commit touches several counter rows; forward moves mostly.
            chosen = sorted(rng.sample(ids, k=rng.randint(3, 90)))
            third = len(chosen) // 3
            for part in (chosen[:third], chosen[third : 2 * third], chosen[2 * third :]):
                frm, to = rng.choice(PIPELINE[:6] * 3 + PIPELINE[6:])
                won += len(transition(db.session, part, frm=frm, to=to, now=NOW).won)
            db.session.commit()
        return won

    # A deadlock or lock error in a mover is raised here, with its message.
    won = race(app, mover, callers=4, timeout=120)
    assert sum(won.values()) > 300
    assert_counters_match([batch_id])
    assert sum(batch_counts.counters(db.session, [batch_id])[batch_id].values()) == 300


def test_a_batch_created_through_the_upload_api_starts_counted_and_stays_counted_through_the_pipeline(
    client, users, smtp, run_jobs
):
    saved = create_template(db.session, name="Contract", html="<p>{{ name }}</p>", user=users["staff"], now=NOW)
    secret = create_api_key(db.session, user=users["staff"], name="test", now=NOW).secret
    db.session.commit()
    body = "email,name\n" + "".join(f"person{i}@example.com,Person {i}\n" for i in range(12))
    created = client.post(
        "/api/v1/batches",
        data={"template_id": saved.template.id, "file": (io.BytesIO(body.encode()), "people.csv")},
        headers={"Authorization": f"Bearer {secret}"},
        content_type="multipart/form-data",
    )
    assert created.status_code == 201
    batch_id = created.json["id"]

    def shown() -> dict:
        return client.get(f"/api/v1/batches/{batch_id}", headers={"Authorization": f"Bearer {secret}"}).json

    assert shown()["counts"] == {**{s.value: 0 for s in Status}, "pending": 12}
    assert_counters_match([batch_id])
    run_jobs("pdf", "mail")
    assert_counters_match([batch_id])
    assert shown()["counts"]["sent"] == 12 and shown()["status"] == "awaiting_signatures"


def test_pages_read_the_counters_and_rebuild_repairs_them(client, auth, users):
    batch_id = batch_in_states(
        db.session, statuses=["sent"] * 5 + ["signed"] * 2, now=NOW, user_id=users["staff"].id
    ).id
    auth.login()
    assert 'data-status="signed" data-count="2"' in client.get(f"/batches/{batch_id}/progress").get_data(as_text=True)
    # Counters damaged behind the app's back (by hand, or by a writer that bypassed transition()):
    db.session.execute(
        update(BatchStatusCount)
        .where(BatchStatusCount.batch_id == batch_id, BatchStatusCount.status == "signed")
        .values(count=40)
    )
    db.session.commit()
    assert 'data-status="signed" data-count="40"' in client.get(f"/batches/{batch_id}/progress").get_data(as_text=True)
    batch_counts.rebuild(db.session, batch_ids=[batch_id])
    db.session.commit()
    assert_counters_match([batch_id])
    assert 'data-status="signed" data-count="2"' in client.get(f"/batches/{batch_id}/progress").get_data(as_text=True)


def test_rebuild_in_a_transaction_that_already_moved_requests_does_not_count_them_twice(app):
    batch_id = batch_in_states(db.session, statuses=["pending"] * 4, now=NOW).id
    db.session.execute(text("DELETE FROM batch_status_counts"))
    db.session.commit()
    transition(db.session, request_ids(batch_id)[:3], frm=S.PENDING, to=S.GENERATING, now=NOW)
    batch_counts.rebuild(db.session, batch_ids=[batch_id])
    db.session.commit()
    assert_counters_match([batch_id])
    assert batch_counts.counters(db.session, [batch_id])[batch_id]["generating"] == 3

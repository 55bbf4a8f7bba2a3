"""The request state machine: every allowed move wins once, every other move is refused."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from sqlalchemy import select

from bulksign.batches import counts as batch_counts
from bulksign.batches import states
from bulksign.batches.states import move_batches, transition
from bulksign.core.config import BASE_DIR
from bulksign.core.extensions import db
from bulksign.models import Batch, DocumentTemplate, Event, SigningRequest, TemplateVersion
from bulksign.models.status import (
    FINAL,
    TRANSITIONS,
    WAITING_FOR_RECIPIENT,
    WORKING,
    BatchStatus,
    IllegalTransition,
    Status,
    can_move,
    sql_in,
)
from tests.support.clock import NOW

ALL_PAIRS = list(itertools.product(Status, Status))
ALLOWED = [(a, b) for a, b in ALL_PAIRS if b in TRANSITIONS[a]]
REFUSED = [(a, b) for a, b in ALL_PAIRS if b not in TRANSITIONS[a]]


def make_requests(count: int = 1, status: Status = Status.PENDING) -> list[int]:
    template = DocumentTemplate(name="t", latest_version=1)
    db.session.add(template)
    db.session.flush()
    version = TemplateVersion(template_id=template.id, version=1, html="<p>{{ name }}</p>", variables=["name"])
    db.session.add(version)
    db.session.flush()
    batch = Batch(name="b", template_version_id=version.id, status="processing", total_count=count)
    db.session.add(batch)
    db.session.flush()
    rows = [SigningRequest(batch_id=batch.id, email=f"r{i}@example.com", status=status.value) for i in range(count)]
    db.session.add_all(rows)
    batch_counts.rebuild(db.session, batch_ids=[batch.id])
    db.session.commit()
    return [r.id for r in rows]


@pytest.mark.parametrize(("frm", "to"), ALLOWED, ids=[f"{a}->{b}" for a, b in ALLOWED])
def test_every_allowed_move_wins_once_and_appends_an_event(app, frm, to):
    (request_id,) = make_requests(status=frm)
    first = transition(db.session, request_id, frm=frm, to=to, now=NOW)
    db.session.commit()
    assert first.won == (request_id,)
    assert db.session.get(SigningRequest, request_id).status == to
    events = db.session.scalars(select(Event).where(Event.request_id == request_id)).all()
    assert [e.type for e in events] == [f"status.{to}"]
    again = transition(db.session, request_id, frm=frm, to=to, now=NOW)
    assert not again and again.won == ()


@pytest.mark.parametrize(("frm", "to"), REFUSED, ids=[f"{a}->{b}" for a, b in REFUSED])
def test_every_move_outside_the_table_is_refused(app, frm, to):
    (request_id,) = make_requests(status=frm)
    with pytest.raises(IllegalTransition):
        transition(db.session, request_id, frm=frm, to=to, now=NOW)
    db.session.rollback()
    assert db.session.get(SigningRequest, request_id).status == frm
    assert not can_move(frm, to)


@pytest.mark.parametrize("to", [Status.DECLINED, Status.EXPIRED, Status.CANCELLED, Status.OPENED, Status.GENERATED])
def test_a_signed_request_can_never_change_again(app, to):
    (request_id,) = make_requests(status=Status.SIGNED)
    with pytest.raises(IllegalTransition):
        transition(db.session, request_id, frm=Status.SIGNED, to=to, now=NOW)
    db.session.rollback()
    assert db.session.get(SigningRequest, request_id).status == Status.SIGNED


@pytest.mark.parametrize("to", sorted(TRANSITIONS[Status.OPENED]))
def test_a_caller_claiming_a_signed_request_is_still_opened_wins_nothing(app, to):
    (request_id,) = make_requests(status=Status.SIGNED)
    lost = transition(db.session, request_id, frm=Status.OPENED, to=to, now=NOW)
    assert not lost and lost.won == ()
    db.session.commit()
    assert db.session.get(SigningRequest, request_id).status == Status.SIGNED
    assert db.session.scalars(select(Event).where(Event.request_id == request_id)).all() == []


def test_signed_and_cancelled_are_terminal_and_a_declined_request_can_only_be_invited_again_or_corrected():
    assert TRANSITIONS[Status.SIGNED] == TRANSITIONS[Status.CANCELLED] == frozenset()
    assert TRANSITIONS[Status.DECLINED] == frozenset({Status.GENERATED, Status.PENDING})
    assert {Status.SIGNED, Status.DECLINED, Status.CANCELLED} <= FINAL


def test_a_declined_request_moves_back_to_generated_for_a_new_invitation(app):
    (request_id,) = make_requests(1, Status.DECLINED)
    assert transition(db.session, request_id, frm=Status.DECLINED, to=Status.GENERATED, now=NOW, actor="user:1")
    db.session.commit()
    assert db.session.get(SigningRequest, request_id).status == Status.GENERATED
    with pytest.raises(IllegalTransition):
        transition(db.session, request_id, frm=Status.DECLINED, to=Status.SENT, now=NOW)


def test_the_stale_writer_loses_a_race(app):
    """A sign and a decline read the request as opened at the same time: only the first write counts."""
    (request_id,) = make_requests(status=Status.OPENED)
    signed = transition(db.session, request_id, frm=Status.OPENED, to=Status.SIGNED, now=NOW, signed_at=NOW)
    declined = transition(db.session, request_id, frm=Status.OPENED, to=Status.DECLINED, now=NOW, decline_reason="no")
    db.session.commit()
    assert signed and not declined
    request = db.session.get(SigningRequest, request_id)
    assert (request.status, request.signed_at, request.decline_reason) == ("signed", NOW, None)


def test_a_bulk_move_reports_exactly_the_requests_that_moved(app):
    ids = make_requests(count=5)
    transition(db.session, ids[:2], frm=Status.PENDING, to=Status.CANCELLED, now=NOW)
    result = transition(db.session, ids, frm=Status.PENDING, to=Status.GENERATING, now=NOW)
    db.session.commit()
    assert sorted(result.won) == sorted(ids[2:])
    statuses = dict(db.session.execute(select(SigningRequest.id, SigningRequest.status)).all())
    assert [statuses[i] for i in ids] == ["cancelled"] * 2 + ["generating"] * 3


def test_a_move_from_several_states_and_extra_fields(app):
    ids = make_requests(count=2, status=Status.SENT)
    transition(db.session, ids[0], frm=Status.SENT, to=Status.OPENED, now=NOW, opened_at=NOW)
    result = transition(
        db.session,
        ids,
        frm=[Status.SENT, Status.OPENED],
        to=Status.EXPIRED,
        now=NOW,
        actor="system",
        details={"reason": "deadline"},
    )
    db.session.commit()
    assert sorted(result.won) == sorted(ids)
    event = db.session.scalars(select(Event).where(Event.type == "status.expired")).first()
    assert event.details == {"reason": "deadline"}


def test_moves_of_one_shape_share_one_statement_and_each_keeps_its_own_values(app):
    """The hot move's statement is built once per shape and bound per call: the second mail's move
    builds nothing, and writes its own time, fields and event details, not the first one's."""
    first, second = make_requests(2, status=Status.SENDING)
    later = NOW + timedelta(minutes=5)
    before = states._cached_logged_move.cache_info()
    for request_id, now, number in ((first, NOW, 1), (second, later, 2)):
        assert transition(
            db.session, request_id, frm=Status.SENDING, to=Status.SENT, now=now, sent_at=now, details={"n": number}
        )
        db.session.commit()
    after = states._cached_logged_move.cache_info()
    assert after.misses - before.misses <= 1 and after.hits > before.hits
    for request_id, now, number in ((first, NOW, 1), (second, later, 2)):
        request = db.session.get(SigningRequest, request_id)
        assert (request.status, request.sent_at, request.status_changed_at) == (Status.SENT, now, now)
        (event,) = db.session.scalars(select(Event).where(Event.request_id == request_id)).all()
        assert (event.type, event.created_at, event.details) == ("status.sent", now, {"n": number})


def test_status_cannot_be_smuggled_in_as_a_field(app):
    (request_id,) = make_requests()
    with pytest.raises(IllegalTransition):
        transition(db.session, request_id, frm=Status.PENDING, to=Status.GENERATING, now=NOW, status="signed")


def test_a_batch_moves_by_compare_and_set_and_only_along_the_table(app):
    (request_id,) = make_requests()
    batch_id = db.session.get(SigningRequest, request_id).batch_id
    done = dict(frm=BatchStatus.PROCESSING, to=BatchStatus.AWAITING_SIGNATURES, finished_at=NOW)
    assert move_batches(db.session, batch_id, **done) == 1
    assert move_batches(db.session, batch_id, **done) == 0  # the second mover finds it moved already
    db.session.commit()
    assert db.session.get(Batch, batch_id).status == BatchStatus.AWAITING_SIGNATURES
    with pytest.raises(IllegalTransition):
        move_batches(db.session, batch_id, frm=BatchStatus.CANCELLED, to=BatchStatus.PROCESSING)
    with pytest.raises(IllegalTransition):
        move_batches(db.session, batch_id, frm=BatchStatus.AWAITING_SIGNATURES, to=BatchStatus.PENDING)


def test_the_partial_indexes_are_derived_from_the_state_sets_and_match_the_migration():
    migration = (BASE_DIR / "migrations/versions/6d124784f55f_initial_schema.py").read_text()
    indexes = {i.name: i for i in SigningRequest.__table__.indexes}
    assert str(indexes["ix_signing_requests_working"].dialect_options["postgresql"]["where"]) == sql_in(WORKING)
    for name in ("ix_signing_requests_waiting", "ix_signing_requests_waiting_expiry"):
        where = str(indexes[name].dialect_options["postgresql"]["where"])
        assert where == sql_in(WAITING_FOR_RECIPIENT) == "status IN ('sent','opened')"
    for index in indexes.values():
        for dialect in ("postgresql", "sqlite"):
            if (where := index.dialect_options[dialect].get("where")) is not None:
                assert f'{dialect}_where=sa.text("{where}")' in migration, index.name

"""Parties: one transition table moved by compare-and-set, a ``recipient`` party for every request that follows a
single-signer request through the real pipeline, and links of their own for the other parties."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from sqlalchemy import select

from bulksign.batches.batch_settings import BatchSettings
from bulksign.batches.creation import create_batch
from bulksign.batches.resend import resend_with_new_link
from bulksign.batches.states import transition
from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.models import Batch, Event, Party, SigningRequest, User
from bulksign.models.parties import PARTY_LEAVE_NEEDS, PARTY_TRANSITIONS, PartyStatus
from bulksign.models.status import IllegalTransition
from bulksign.recipients.validation import validate_recipients
from bulksign.signing import parties
from bulksign.signing.links import find_by_token
from bulksign.signing.recipient_actions import decline, open_request, sign
from bulksign.work.pipeline import enqueue_renders, enqueue_sends
from tests.support.batches import make_batch, request_ids
from tests.support.clock import NOW

PAIRS = list(itertools.product(PartyStatus, PartyStatus))
ALLOWED = [(a, b) for a, b in PAIRS if b in PARTY_TRANSITIONS[a]]
REFUSED = [(a, b) for a, b in PAIRS if b not in PARTY_TRANSITIONS[a]]


def _recipients(batch_id: int) -> dict[int, Party]:
    db.session.expire_all()
    found = db.session.scalars(select(Party).where(Party.batch_id == batch_id, Party.role == "recipient")).all()
    return {p.request_id: p for p in found}


def _one_party(app, status: PartyStatus = PartyStatus.WAITING, *, request_status: str = "opened") -> Party:
    """A request in ``request_status`` (set directly, as test data) whose one party is in ``status``."""
    (request_id,) = request_ids(make_batch(now=NOW, recipients=1))
    request = db.session.get(SigningRequest, request_id)
    request.status = request_status
    parties.add_recipients(db.session, batch_id=request.batch_id, now=NOW)
    party = db.session.scalar(select(Party).where(Party.request_id == request_id))
    party.status = status.value
    db.session.commit()
    return party


@pytest.mark.parametrize(("frm", "to"), ALLOWED, ids=[f"{a}->{b}" for a, b in ALLOWED])
def test_every_allowed_party_move_wins_once_with_an_event_naming_the_role(app, frm, to):
    # Leaving ``signed`` needs the request corrected (back to pending); every other move, an open request.
    party = _one_party(app, frm, request_status="pending" if frm in PARTY_LEAVE_NEEDS else "opened")
    first = parties.move_parties(db.session, party.id, frm=frm, to=to, now=NOW + timedelta(minutes=1))
    again = parties.move_parties(db.session, party.id, frm=frm, to=to, now=NOW + timedelta(minutes=2))
    db.session.commit()
    assert first.won == (party.id,) and not again
    assert party.status == to and party.status_changed_at == NOW + timedelta(minutes=1)
    events = db.session.scalars(select(Event).where(Event.request_id == party.request_id)).all()
    assert [(e.type, e.details) for e in events] == [(f"party.{to}", {"role": "recipient"})]


@pytest.mark.parametrize(("frm", "to"), REFUSED, ids=[f"{a}->{b}" for a, b in REFUSED])
def test_a_move_off_the_party_table_is_refused(app, frm, to):
    with pytest.raises(IllegalTransition):
        parties.move_parties(db.session, [1], frm=frm, to=to, now=NOW)


@pytest.mark.parametrize("request_status", ["cancelled", "expired", "declined", "bounced", "signed", "generated"])
def test_a_party_neither_signs_nor_declines_once_its_request_stopped_waiting_for_it(app, request_status):
    party = _one_party(app, PartyStatus.OPENED, request_status=request_status)
    signed = parties.move_parties(db.session, party.id, frm="opened", to="signed", now=NOW)
    declined = parties.move_parties(db.session, party.id, frm="opened", to="declined", now=NOW)
    db.session.commit()
    assert not signed and not declined and party.status == "opened"
    assert db.session.scalars(select(Event).where(Event.request_id == party.request_id)).all() == []


def test_of_two_racing_movers_of_a_party_one_wins(app):
    party = _one_party(app, PartyStatus.OPENED)
    signed = parties.move_parties(db.session, party.id, frm="opened", to="signed", now=NOW)
    declined = parties.move_parties(db.session, party.id, frm="opened", to="declined", now=NOW)
    db.session.commit()
    assert signed and not declined and party.status == "signed" and party.signed_at == NOW


def test_the_recipient_party_follows_its_request_through_real_render_send_open_and_sign(app, run_jobs, smtp):
    batch_id = make_batch(now=NOW, recipients=2)
    parties.add_recipients(db.session, batch_id=batch_id, now=NOW)
    db.session.commit()
    first, second = request_ids(batch_id)
    enqueue_renders([first, second])
    run_jobs("pdf", "mail")
    assert len(smtp.received) == 2
    found = _recipients(batch_id)
    assert {p.status for p in found.values()} == {"invited"}
    assert all(p.invited_at is not None for p in found.values())

    later = NOW + timedelta(hours=1)
    open_request(db.session, request_id=first, now=later, ip="127.0.0.1", user_agent="test")
    assert _recipients(batch_id)[first].status == "opened"
    done = sign(
        db.session,
        request_id=first,
        now=later,
        signer_name="Person Zero",
        signature_png=None,
        consent=True,
        ip="127.0.0.1",
        user_agent="test",
    )
    assert done.status == "signed"
    open_request(db.session, request_id=second, now=later, ip="127.0.0.1", user_agent="test")
    decline(db.session, request_id=second, now=later, reason="Wrong salary", ip="127.0.0.1", user_agent="test")
    found = _recipients(batch_id)
    assert (found[first].status, found[first].signed_at) == ("signed", later)
    assert (found[second].status, found[second].declined_at) == ("declined", later)


def test_a_resend_takes_the_recipient_party_back_to_waiting_then_invited_with_the_new_link(app, run_jobs):
    batch_id = make_batch(now=NOW, recipients=1)
    parties.add_recipients(db.session, batch_id=batch_id, now=NOW)
    db.session.commit()
    (request_id,) = request_ids(batch_id)
    enqueue_renders([request_id])
    run_jobs("pdf", "mail")
    first_invited = _recipients(batch_id)[request_id].invited_at
    later = NOW + timedelta(days=1)
    owner = db.session.get(User, db.session.get(Batch, batch_id).created_by_id)
    result = resend_with_new_link(db.session, request_ids=[request_id], user=owner, now=later)
    db.session.commit()
    assert _recipients(batch_id)[request_id].status == "waiting"
    assert result.resent
    enqueue_sends(result.mail_ids)
    run_jobs("mail")
    party = _recipients(batch_id)[request_id]
    assert db.session.get(SigningRequest, request_id).status == "sent"
    assert party.status == "invited" and party.invited_at > first_invited


def test_a_request_with_another_party_takes_its_recipient_party_along_its_link_but_not_to_signed(app):
    (request_id,) = request_ids(make_batch(now=NOW, recipients=1))
    request = db.session.get(SigningRequest, request_id)
    parties.add_recipients(db.session, batch_id=request.batch_id, now=NOW)
    db.session.add(Party(request_id=request_id, batch_id=request.batch_id, role="employer", step=1, email="boss@x.org"))
    db.session.commit()
    for frm, to in [
        ("pending", "generating"),
        ("generating", "generated"),
        ("generated", "sending"),
        ("sending", "sent"),
    ]:
        assert transition(db.session, request_id, frm=frm, to=to, now=NOW)
    assert transition(db.session, request_id, frm="sent", to="opened", now=NOW)
    db.session.commit()
    statuses = dict(db.session.execute(select(Party.role, Party.status).where(Party.request_id == request_id)).all())
    # The request's invitation and page are the recipient's; the employer moves by itself.
    assert statuses == {"recipient": "opened", "employer": "waiting"}
    # Signing is each party's own move: the request is signed once every party has (``routing``).
    assert transition(db.session, request_id, frm="opened", to="signed", now=NOW)
    db.session.commit()
    assert db.session.scalar(select(Party.status).where(Party.request_id == request_id, Party.role == "recipient")) == (
        "opened"
    )


def test_another_partys_link_is_its_own_finds_only_it_and_a_new_one_kills_the_old(app):
    (request_id,) = request_ids(make_batch(now=NOW, recipients=1))
    request = db.session.get(SigningRequest, request_id)
    employer = Party(request_id=request_id, batch_id=request.batch_id, role="employer", step=1, email="boss@x.org")
    db.session.add(employer)
    db.session.flush()
    token = parties.issue_party_link(db.session, party=employer, secret="s", now=NOW)
    db.session.commit()
    assert parties.find_party(db.session, token) is employer
    assert find_by_token(db.session, token) is None  # not a request's link
    assert employer.token_hash != token and len(employer.token_hash) == 64
    newer = parties.issue_party_link(db.session, party=employer, secret="s", now=NOW)
    db.session.commit()
    assert newer != token and parties.find_party(db.session, token) is None
    assert parties.find_party(db.session, newer) is employer
    assert parties.party_token(employer, secret="s") == newer


def test_a_batchs_parties_are_the_rows_own_else_the_fixed_one_each_at_its_step_and_waiting(app):
    from bulksign.recipients.parties import PartyPerson

    batch_id = make_batch(now=NOW, recipients=2)
    first, second = request_ids(batch_id)
    parties.add_parties(
        db.session,
        batch_id=batch_id,
        request_ids=[first, second],
        per_row=[{"employer": PartyPerson("manager@example.com", "Mia Manager")}, {}],
        fixed={"employer": PartyPerson("hr@example.com", "ACME HR", "+491701234567")},
        steps={"employer": 0, "recipient": 1},
        now=NOW,
    )
    db.session.commit()
    found = db.session.execute(
        select(
            Party.request_id, Party.role, Party.step, Party.source, Party.email, Party.name, Party.phone, Party.status
        )
        .where(Party.batch_id == batch_id)
        .order_by(Party.request_id, Party.role)
    ).all()
    assert [tuple(r) for r in found] == [
        (first, "employer", 0, "row", "manager@example.com", "Mia Manager", None, "waiting"),
        (first, "recipient", 1, None, None, None, None, "waiting"),
        (second, "employer", 0, "batch", "hr@example.com", "ACME HR", "+491701234567", "waiting"),
        (second, "recipient", 1, None, None, None, None, "waiting"),
    ]


def test_a_new_batch_gives_each_request_its_recipient_party_at_step_0_waiting(app, users):
    version = create_template(db.session, name="Contract", html="<p>{{ name }}</p>", user=users["staff"], now=NOW)
    file = "email,name\n" + "".join(f"user{i}@example.com,User {i}\n" for i in range(3))
    rows = validate_recipients(file.encode(), filename="r.csv", variables=["name"], keep_rows=True).recipients
    created = create_batch(
        db.session,
        user=users["staff"],
        template_version=version.version,
        rows=rows,
        settings=BatchSettings(name="B"),
        now=NOW,
    )
    found = _recipients(created.batch.id)
    assert sorted(found) == request_ids(created.batch.id)
    assert {(p.role, p.step, p.status, p.email, p.token_hash) for p in found.values()} == {
        ("recipient", 0, "waiting", None, None)
    }

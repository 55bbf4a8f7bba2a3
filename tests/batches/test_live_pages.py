"""Live pages: every state writer bumps its batch's version at commit, and the polled fragments answer 304 while
it stands, having read nothing but that version."""

from __future__ import annotations

from sqlalchemy import event, select

from bulksign.batches import versions
from bulksign.batches.states import move_batches, transition
from bulksign.core.extensions import db
from bulksign.models import Party, SigningRequest
from bulksign.people.teams import create_team
from bulksign.signing.parties import move_parties
from tests.support.batchdata import batch_in_states
from tests.support.clock import NOW
from tests.support.partydata import make_two_party_batch


def _sent(batch_id: int) -> list[int]:
    return list(
        db.session.scalars(
            select(SigningRequest.id)
            .where(SigningRequest.batch_id == batch_id, SigningRequest.status == "sent")
            .order_by(SigningRequest.id)
        )
    )


def test_each_state_writer_bumps_the_version_once_per_commit_and_a_rollback_none(app, users):
    batch = batch_in_states(db.session, statuses=["sent"] * 3, now=NOW, user_id=users["staff"].id)
    other = batch_in_states(db.session, statuses=["sent"], now=NOW, user_id=users["staff"].id)
    batch_id, other_id = batch.id, other.id
    assert versions.version_of(db.session, batch_id=batch_id) == 0
    first, second, third = _sent(batch_id)
    transition(db.session, first, frm="sent", to="opened", now=NOW)
    transition(db.session, second, frm="sent", to="opened", now=NOW)
    db.session.commit()
    assert versions.versions(db.session, batch_ids=[batch_id, other_id]) == {batch_id: 1, other_id: 0}
    transition(db.session, third, frm="sent", to="opened", now=NOW)
    db.session.rollback()
    assert versions.version_of(db.session, batch_id=batch_id) == 1
    assert move_batches(db.session, batch_id, frm="processing", to="awaiting_signatures") == 1
    db.session.commit()
    assert versions.version_of(db.session, batch_id=batch_id) == 2
    # A move that wins nothing changes nothing.
    transition(db.session, first, frm="sent", to="opened", now=NOW)
    db.session.commit()
    assert versions.version_of(db.session, batch_id=batch_id) == 2


def test_a_commit_versions_the_batches_it_touched_still_there_from_one_then_by_one(any_db):
    first = batch_in_states(db.session, statuses=["sent"] * 2, now=NOW, name="First").id
    second = batch_in_states(db.session, statuses=["sent"], now=NOW, name="Second").id
    assert versions.versions(db.session, batch_ids=[first, second]) == {first: 0, second: 0}
    gone = second + 1000  # a batch deleted in the transaction that touched it: nothing to version
    versions.touch(db.session, [second, gone, first])
    db.session.commit()
    assert versions.versions(db.session, batch_ids=[first, second, gone]) == {first: 1, second: 1, gone: 0}
    versions.touch(db.session, [first])
    versions.touch(db.session, [first])
    db.session.commit()
    assert versions.versions(db.session, batch_ids=[first, second, gone]) == {first: 2, second: 1, gone: 0}


def test_a_party_signing_bumps_its_batch(app, users):
    batch_id = make_two_party_batch(db.session, now=NOW, user_id=users["staff"].id)
    before = versions.version_of(db.session, batch_id=batch_id)
    employer = db.session.scalar(
        select(Party.id).where(Party.batch_id == batch_id, Party.role == "employer", Party.status == "invited")
    )
    assert move_parties(db.session, employer, frm="invited", to="opened", now=NOW)
    db.session.commit()
    assert versions.version_of(db.session, batch_id=batch_id) == before + 1


class _Queries:
    def __init__(self):
        self.statements: list[str] = []

    def __enter__(self):
        event.listen(db.engine, "before_cursor_execute", self._note)
        return self

    def __exit__(self, *exc):
        event.remove(db.engine, "before_cursor_execute", self._note)

    def _note(self, conn, cursor, statement, *args):
        self.statements.append(statement)


def test_the_progress_fragment_is_304_while_nothing_changed_and_new_after_a_signature(client, auth, users):
    batch = batch_in_states(db.session, statuses=["sent"] * 4, now=NOW, user_id=users["staff"].id)
    batch_id = batch.id
    auth.login()
    url = f"/batches/{batch_id}/progress"
    first = client.get(url)
    tag = first.headers["ETag"]
    assert first.status_code == 200 and first.headers["Cache-Control"] == "no-store"
    assert f"data-etag='{tag}'" in first.get_data(as_text=True)
    with _Queries() as queries:
        same = client.get(url, headers={"If-None-Match": tag})
    assert same.status_code == 304 and same.get_data() == b"" and same.headers["ETag"] == tag
    # Only the login, the batch's reach and its version: no counters, no rows.
    assert not any("batch_status_counts" in s or "FROM signing_requests" in s for s in queries.statements)
    transition(db.session, _sent(batch_id)[0], frm="sent", to="opened", now=NOW)
    db.session.commit()
    changed = client.get(url, headers={"If-None-Match": tag})
    assert changed.status_code == 200 and changed.headers["ETag"] != tag
    assert 'data-status="opened" data-count="1"' in changed.get_data(as_text=True)
    # A forged tag is just another tag: the fragment in full.
    assert client.get(url, headers={"If-None-Match": '"forged", *'}).status_code == 200
    assert client.get(url, headers={"If-None-Match": "garbage\x7f"}).status_code == 200


def test_the_request_panel_and_the_home_page_are_live_the_same_way(client, auth, users):
    batch = batch_in_states(db.session, statuses=["sent"] * 2, now=NOW, user_id=users["staff"].id, name="Live home")
    batch_id = batch.id
    request_id = _sent(batch_id)[0]
    auth.login()
    for url in (f"/batches/{batch_id}/requests/{request_id}", "/home/live"):
        first = client.get(url)
        tag = first.headers["ETag"]
        assert first.status_code == 200 and f"data-etag='{tag}'" in first.get_data(as_text=True)
        assert client.get(url, headers={"If-None-Match": tag}).status_code == 304
    panel_tag = client.get(f"/batches/{batch_id}/requests/{request_id}").headers["ETag"]
    home_tag = client.get("/home/live").headers["ETag"]
    transition(db.session, request_id, frm="sent", to="opened", now=NOW)
    db.session.commit()
    panel = client.get(f"/batches/{batch_id}/requests/{request_id}", headers={"If-None-Match": panel_tag})
    assert panel.status_code == 200 and "opened" in panel.get_data(as_text=True)
    home = client.get("/home/live", headers={"If-None-Match": home_tag})
    assert home.status_code == 200 and "Live home" in home.get_data(as_text=True)


def test_another_teams_batch_is_404_whatever_tag_is_sent(client, auth, users):
    team = create_team(db.session, name="Elsewhere", now=NOW)
    db.session.commit()
    foreign = batch_in_states(db.session, statuses=["sent"], now=NOW, team_id=team.id, user_id=None)
    foreign_id, request_id = foreign.id, _sent(foreign.id)[0]
    auth.login()
    for url in (f"/batches/{foreign_id}/progress", f"/batches/{foreign_id}/requests/{request_id}"):
        assert client.get(url).status_code == 404
        assert client.get(url, headers={"If-None-Match": "*"}).status_code == 404
    # The home page counts only the batches the user sees: a change elsewhere keeps it 304.
    tag = client.get("/home/live").headers["ETag"]
    transition(db.session, request_id, frm="sent", to="opened", now=NOW)
    db.session.commit()
    assert client.get("/home/live", headers={"If-None-Match": tag}).status_code == 304

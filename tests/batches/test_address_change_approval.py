"""Where a document goes after approval: in a team that requires approval, a change of a recipient's or another
party's address after a manager approved the batch waits, sending nothing to the new address, until a manager of
the team or an admin who did not ask for it approves; the approval sends the new link there, a rejection keeps the
old address. On real workers, the reconciler and real mail (aiosmtpd), over the API and the web."""

from __future__ import annotations

from sqlalchemy import select

from bulksign.batches import approval
from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.models import Event, Party, SigningRequest, utcnow
from tests.batches import test_approval
from tests.batches.test_approval import MANAGER, _create, _everything_runs, _key, _login, _post
from tests.signing.test_routing import _batch, _sign, _token
from tests.support.races import race
from tests.support.web import csrf_from

#: The fixture: the users' team requires approval, with a manager in it.
team = test_approval.team
NEW = "anna.private@example.net"
EMPLOYER_NEW = "payroll@acme-group.example"


def _approved_and_sent(client, keys, smtp, run_jobs) -> tuple[int, int]:
    """A batch of the team created by its staff user, approved by its manager and sent: its id and Anna's request."""
    batch_id = _create(client, keys["staff"])["id"]
    assert _post(client, f"/api/v1/batches/{batch_id}/approve", keys["manager"]).status_code == 200
    run_jobs("pdf", "mail")
    assert len(smtp.to("anna@example.com")) == 1
    anna = db.session.scalar(
        select(SigningRequest.id).where(SigningRequest.batch_id == batch_id, SigningRequest.email == "anna@example.com")
    )
    return batch_id, anna


def _trail(request_id: int) -> list[str]:
    db.session.expire_all()
    return list(
        db.session.scalars(
            select(Event.type)
            .where(
                Event.request_id == request_id, Event.type.like("address_change.%") | (Event.type == "email.changed")
            )
            .order_by(Event.id)
        )
    )


def _keys(team) -> dict[str, str]:
    """An API key of each user of the team (made first: a call ends the session its users were loaded in)."""
    return {who: _key(team[who]) for who in ("staff", "manager", "admin")}


def _headers(secret: str) -> dict:
    return {"Authorization": f"Bearer {secret}"}


def test_an_address_change_over_the_api_waits_for_a_manager_whose_approval_sends_the_new_link_there(
    app, client, team, smtp, run_jobs
):
    keys = _keys(team)
    creator, approver = keys["staff"], keys["manager"]
    batch_id, anna = _approved_and_sent(client, keys, smtp, run_jobs)
    old_token = _token(smtp.to("anna@example.com")[0])

    asked = _post(
        client, f"/api/v1/requests/{anna}/email", creator, json={"email": NEW, "note": "Her work mailbox is closed."}
    )
    assert asked.status_code == 202, asked.get_json()
    body = asked.get_json()
    assert (body["status"], body["email"], body["changed"]) == ("waiting_for_approval", "anna@example.com", False)
    change = body["pending_change"]
    assert (change["role"], change["old_email"], change["new_email"], change["note"], change["requested_by"]) == (
        "recipient",
        "anna@example.com",
        NEW,
        "Her work mailbox is closed.",
        "staff@example.com",
    )
    # Held: with every worker and the reconciler running nothing goes to the new address, and a resend that would
    # send a new link to the old one while the change waits is refused with the reason.
    _everything_runs(app, run_jobs)
    resend = _post(client, f"/api/v1/requests/{anna}/resend", creator)
    assert resend.status_code == 409 and resend.get_json()["error"]["details"]["reason"] == "address_change_pending"
    assert smtp.to(NEW) == [] and db.session.get(SigningRequest, anna).email == "anna@example.com"
    seen = client.get(f"/api/v1/requests/{anna}", headers=_headers(creator)).get_json()
    assert [(c["old_email"], c["new_email"]) for c in seen["pending_address_changes"]] == [("anna@example.com", NEW)]

    # Whoever asked, or a staff user, cannot approve it; the team's manager sees old → new and approves.
    own = _post(client, f"/api/v1/batches/{batch_id}/address-changes/{change['id']}/approve", creator)
    assert own.status_code == 403
    listed = client.get(f"/api/v1/batches/{batch_id}/address-changes", headers=_headers(approver)).get_json()
    assert [(c["request_id"], c["old_email"], c["new_email"], c["status"]) for c in listed["items"]] == [
        (anna, "anna@example.com", NEW, "pending")
    ]
    approved = _post(client, f"/api/v1/batches/{batch_id}/address-changes/{change['id']}/approve", approver)
    assert approved.status_code == 200, approved.get_json()
    decided = approved.get_json()
    assert (decided["status"], decided["decided_by"], decided["sent"]) == ("approved", MANAGER[0], True)
    again = _post(client, f"/api/v1/batches/{batch_id}/address-changes/{change['id']}/approve", approver)
    assert again.status_code == 409

    run_jobs("mail")
    (invitation,) = smtp.to(NEW)
    assert _token(invitation) != old_token
    assert "not valid" in client.get(f"/sign/{old_token}").get_data(as_text=True).lower()
    assert db.session.get(SigningRequest, anna).email == NEW
    assert _trail(anna) == ["address_change.requested", "address_change.approved", "email.changed"]


def test_an_address_change_on_the_web_waits_and_the_managers_rejection_keeps_the_old_address(
    app, client, team, smtp, run_jobs
):
    batch_id, anna = _approved_and_sent(client, _keys(team), smtp, run_jobs)
    _login(client, "staff@example.com", "staff-password")
    panel = client.get(f"/batches/{batch_id}/requests/{anna}")
    asked = client.post(
        f"/requests/{anna}/email",
        data={"email": NEW, "note": "She asked by phone.", "csrf_token": csrf_from(panel)},
        headers={"HX-Request": "true"},
    )
    text = asked.get_data(as_text=True)
    assert asked.status_code == 200 and "waits for approval" in text and NEW in text, text
    _everything_runs(app, run_jobs)
    assert smtp.to(NEW) == []
    # Its creator sees the change waiting, without the approver's buttons.
    html = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    assert 'id="address-changes"' in html and NEW in html and 'data-change-action="approve"' not in html

    client = _browser(app, *MANAGER)
    page = client.get(f"/batches/{batch_id}")
    html = page.get_data(as_text=True)
    assert 'id="address-changes"' in html and "anna@example.com" in html and NEW in html
    assert "She asked by phone." in html and 'data-change-action="approve"' in html
    (change_id,) = [int(i) for i in _change_ids(batch_id)]
    empty = client.post(
        f"/batches/{batch_id}/address-changes/{change_id}/reject", data={"reason": " ", "csrf_token": csrf_from(page)}
    )
    assert empty.status_code == 303 and _change_status(change_id) == "pending"
    rejected = client.post(
        f"/batches/{batch_id}/address-changes/{change_id}/reject",
        data={"reason": "Call her on the number we have first.", "csrf_token": csrf_from(page)},
    )
    assert rejected.status_code == 303
    assert _change_status(change_id) == "rejected"
    assert db.session.get(SigningRequest, anna).email == "anna@example.com"
    _everything_runs(app, run_jobs)
    assert smtp.to(NEW) == []
    assert _trail(anna) == ["address_change.requested", "address_change.rejected"]
    after = client.get(f"/batches/{batch_id}/requests/{anna}").get_data(as_text=True)
    assert "Call her on the number we have first." in after  # the history says why


def test_whoever_asked_cannot_approve_it_even_as_a_manager_and_an_admin_can(app, client, team, smtp, run_jobs):
    keys = _keys(team)
    manager = keys["manager"]
    batch_id, anna = _approved_and_sent(client, keys, smtp, run_jobs)
    asked = _post(client, f"/api/v1/requests/{anna}/email", manager, json={"email": NEW})
    assert asked.status_code == 202 and asked.get_json()["status"] == "waiting_for_approval"
    change_id = asked.get_json()["pending_change"]["id"]
    own = _post(client, f"/api/v1/batches/{batch_id}/address-changes/{change_id}/approve", manager)
    assert own.status_code == 403 and "someone else" in own.get_json()["error"]["message"]
    assert (
        _post(client, f"/api/v1/batches/{batch_id}/address-changes/{change_id}/approve", keys["admin"]).status_code
        == 200
    )
    run_jobs("mail")
    assert len(smtp.to(NEW)) == 1


def test_an_employers_address_change_is_held_the_same_way_and_approving_on_the_web_invites_it_there(
    app, client, team, smtp, run_jobs
):
    creator = _key(team["staff"])
    batch_id = _batch(team)
    approval.approve(db.session, batch_id=batch_id, user=team["manager"], now=utcnow())
    db.session.commit()
    run_jobs("pdf", "mail")
    (request_id,) = db.session.scalars(select(SigningRequest.id).where(SigningRequest.batch_id == batch_id))
    assert _sign(client, _token(smtp.to("eva@example.com")[0]), "Eva Employee").status_code == 303
    run_jobs("pdf", "mail")
    (first,) = smtp.to("hr@acme.example")
    old_token = _token(first)

    asked = _post(
        client,
        f"/api/v1/requests/{request_id}/email",
        creator,
        json={"email": EMPLOYER_NEW, "role": "employer"},
    )
    assert asked.status_code == 202, asked.get_json()
    assert (asked.get_json()["status"], asked.get_json()["pending_change"]["role"]) == (
        "waiting_for_approval",
        "employer",
    )
    _everything_runs(app, run_jobs)
    assert smtp.to(EMPLOYER_NEW) == []
    assert db.session.scalar(select(Party.email).where(Party.request_id == request_id, Party.role == "employer")) == (
        "hr@acme.example"
    )

    _login(client, *MANAGER)
    panel = client.get(f"/batches/{batch_id}/requests/{request_id}")
    html = panel.get_data(as_text=True)
    assert 'data-change-action="approve"' in html and "hr@acme.example" in html and EMPLOYER_NEW in html
    # No new link for the old address while the change waits (reminding it stays).
    assert 'data-party-action="resend-employer"' not in html and 'data-party-action="remind-employer"' in html
    (change_id,) = _change_ids(batch_id)
    approved = client.post(
        f"/batches/{batch_id}/address-changes/{change_id}/approve", data={"csrf_token": csrf_from(panel)}
    )
    assert approved.status_code == 303
    run_jobs("mail")
    (invitation,) = smtp.to(EMPLOYER_NEW)
    assert _token(invitation) != old_token
    assert "not valid" in client.get(f"/sign/{old_token}").get_data(as_text=True).lower()
    assert _trail(request_id) == ["address_change.requested", "address_change.approved", "email.changed"]


def test_a_team_without_approval_changes_the_address_at_once_as_before(app, client, users, smtp, run_jobs):
    create_template(
        db.session, name="Contract", html="<p>{{ name }}: {{ position }}</p>", user=users["staff"], now=utcnow()
    )
    db.session.commit()
    creator = _key(users["staff"])
    batch_id = _create(client, creator)["id"]
    run_jobs("pdf", "mail")
    anna = db.session.scalar(
        select(SigningRequest.id).where(SigningRequest.batch_id == batch_id, SigningRequest.email == "anna@example.com")
    )
    changed = _post(client, f"/api/v1/requests/{anna}/email", creator, json={"email": NEW})
    assert changed.status_code == 200
    assert (changed.get_json()["status"], changed.get_json()["email"], changed.get_json()["changed"]) == (
        "changed",
        NEW,
        True,
    )
    assert changed.get_json()["pending_change"] is None
    assert _post(client, f"/api/v1/requests/{anna}/resend", creator).status_code == 202
    run_jobs("mail")
    assert len(smtp.to(NEW)) == 1
    assert _trail(anna) == ["email.changed"]


def test_asking_again_replaces_the_waiting_change_and_asking_for_the_current_address_takes_it_back(
    app, client, team, smtp, run_jobs
):
    keys = _keys(team)
    batch_id, anna = _approved_and_sent(client, keys, smtp, run_jobs)
    url = f"/api/v1/requests/{anna}/email"
    first = _post(client, url, keys["staff"], json={"email": "anna.typo@example.net"}).get_json()["pending_change"]
    again = _post(client, url, keys["staff"], json={"email": "anna.typo@example.net"}).get_json()["pending_change"]
    assert again["id"] == first["id"]  # the same change asked twice is one
    second = _post(client, url, keys["staff"], json={"email": NEW}).get_json()["pending_change"]
    listed = client.get(
        f"/api/v1/batches/{batch_id}/address-changes?status=withdrawn", headers=_headers(keys["manager"])
    )
    assert [(c["id"], c["new_email"]) for c in listed.get_json()["items"]] == [(first["id"], "anna.typo@example.net")]
    # A change no longer waiting cannot be approved.
    stale = _post(client, f"/api/v1/batches/{batch_id}/address-changes/{first['id']}/approve", keys["manager"])
    assert stale.status_code == 409

    back = _post(client, url, keys["staff"], json={"email": "anna@example.com"})
    assert back.status_code == 200 and back.get_json()["status"] == "unchanged"
    assert _change_status(second["id"]) == "withdrawn"
    _everything_runs(app, run_jobs)
    assert smtp.to(NEW) == [] and smtp.to("anna.typo@example.net") == []
    assert _trail(anna) == [
        "address_change.requested",
        "address_change.withdrawn",
        "address_change.requested",
        "address_change.withdrawn",
    ]


def test_two_approvers_at_once_make_one_change_and_send_one_link(app, client, team, smtp, run_jobs):
    keys = _keys(team)
    batch_id, anna = _approved_and_sent(client, keys, smtp, run_jobs)
    change_id = _post(client, f"/api/v1/requests/{anna}/email", keys["staff"], json={"email": NEW}).get_json()[
        "pending_change"
    ]["id"]
    approvers = [keys["manager"], keys["admin"]]

    def approve(n: int) -> int:
        caller = app.test_client()
        return _post(
            caller, f"/api/v1/batches/{batch_id}/address-changes/{change_id}/approve", approvers[n]
        ).status_code

    answers = race(app, approve, callers=2)
    assert sorted(answers.values()) == [200, 409], answers
    run_jobs("mail")
    assert len(smtp.to(NEW)) == 1
    assert _trail(anna) == ["address_change.requested", "address_change.approved", "email.changed"]


def test_two_changes_asked_at_once_leave_one_waiting(app, client, team, smtp, run_jobs):
    from bulksign.models import AddressChange

    keys = _keys(team)
    batch_id, anna = _approved_and_sent(client, keys, smtp, run_jobs)
    asks = [keys["staff"], keys["manager"]]

    def ask(n: int):
        answer = _post(
            app.test_client(), f"/api/v1/requests/{anna}/email", asks[n], json={"email": f"anna{n}@new.example"}
        )
        return answer.status_code, answer.get_json()

    answers = race(app, ask, callers=2)
    db.session.expire_all()
    waiting = db.session.scalars(select(AddressChange).where(AddressChange.status == "pending")).all()
    assert len(waiting) == 1
    # Each was held, or told the other came first; never two waiting changes of one address.
    for status, body in answers.values():
        assert status == 202 or (status == 409 and "at the same moment" in body["error"]["message"]), body


def _browser(app, email: str, password: str):
    """Another person's browser, logged in (the test shares one app context: its CSRF token is forgotten too)."""
    from flask import g

    g.pop("csrf_token", None)
    client = app.test_client()
    assert _login(client, email, password).status_code == 302
    return client


def _change_ids(batch_id: int) -> list[int]:
    from bulksign.models import AddressChange

    db.session.expire_all()
    return list(db.session.scalars(select(AddressChange.id).where(AddressChange.batch_id == batch_id)))


def _change_status(change_id: int) -> str:
    from bulksign.models import AddressChange

    db.session.expire_all()
    return db.session.get(AddressChange, change_id).status


def test_the_purge_empties_the_addresses_and_words_of_a_requests_address_changes(app, users):
    from bulksign.batches import retention
    from bulksign.documents.storage import get_storage
    from bulksign.models import AddressChange
    from tests.batches.test_retention import declined_request
    from tests.support.signing_requests import fresh

    r = declined_request(users["staff"])
    change = AddressChange(
        request_id=r.id,
        batch_id=r.batch_id,
        role="recipient",
        old_email="ivan@example.com",
        new_email="ivan.home@example.net",
        note="He moved to Riga.",
        status="rejected",
        requested_by_id=users["staff"].id,
        requested_at=utcnow(),
        reason="Ask Ivan first.",
    )
    db.session.add(change)
    db.session.commit()
    change_id = change.id
    retention.purge_requests(db.session, storage=get_storage(), request_ids=[r.id], now=utcnow(), reason="erasure")
    db.session.commit()
    assert fresh(r.id).purged_at is not None
    db.session.expire_all()
    kept = db.session.get(AddressChange, change_id)
    assert (kept.old_email, kept.new_email, kept.note, kept.reason, kept.status) == ("", "", None, None, "rejected")

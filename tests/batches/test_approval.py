"""Approval before sending: a team that requires it gets batches that wait, mail nothing, even with
workers and the reconciler running, until a manager or an admin who is not the creator approves; a rejection
tells the creator why, in their language. As the creator, the approver and an integrator see it."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from pypdf import PdfReader
from sqlalchemy import func, select

from bulksign.batches.reconciler import reconcile
from bulksign.core.extensions import db, get_redis
from bulksign.doc_templates.versions import create_template
from bulksign.models import Batch, Document, SigningRequest, utcnow
from bulksign.people.teams import add_member
from bulksign.people.users import create_api_key, create_user
from tests.integrations.test_webhooks_out import receiver  # noqa: F401 (a fixture)
from tests.support.clock import NOW
from tests.support.web import csrf_from

GOOD = b"email,name,position\nanna@example.com,Anna,Accountant\njohn@example.com,John,Engineer\n"
MANAGER = ("manager@example.com", "manager-password")


@pytest.fixture
def team(app, users):
    """The users' team requires approval (turned on from the command line), with a manager in it."""
    result = app.test_cli_runner().invoke(args=["teams", "update", "Default", "--require-approval"])
    assert result.exit_code == 0, result.output
    assert "now wait for approval" in result.output
    from bulksign.models import Team

    default = db.session.scalar(select(Team).where(Team.name == "Default"))
    manager = create_user(db.session, email=MANAGER[0], password=MANAGER[1], role="manager", now=NOW)
    add_member(db.session, team=default, user=manager, by=None, now=NOW)
    create_template(db.session, name="Contract", html="<p>{{ name }}: {{ position }}</p>", user=users["staff"], now=NOW)
    db.session.commit()
    return {"team": default, "manager": manager, **users}


def _key(user) -> str:
    secret = create_api_key(db.session, user=user, name="test", now=NOW).secret
    db.session.commit()
    return secret


def _post(client, path, secret, **kwargs):
    return client.post(path, headers={"Authorization": f"Bearer {secret}"}, **kwargs)


def _create(client, secret) -> dict:
    from bulksign.models import DocumentTemplate

    template_id = db.session.scalar(select(DocumentTemplate.id).where(DocumentTemplate.name == "Contract"))
    created = _post(
        client,
        "/api/v1/batches",
        secret,
        data={"template_id": template_id, "file": (io.BytesIO(GOOD), "people.csv"), "name": "November"},
        content_type="multipart/form-data",
    )
    assert created.status_code == 201, created.get_json()
    return created.get_json()


def _everything_runs(app, run_jobs) -> None:
    """Workers on every queue and the reconciler, as a running installation would have them."""
    run_jobs("pdf", "mail", "default")
    reconcile(db.session, redis=get_redis(), app=app, now=utcnow() + timedelta(hours=1), stale_after=timedelta(0))
    run_jobs("pdf", "mail", "default")


def test_nothing_is_rendered_or_mailed_until_someone_else_approves_then_it_goes_out(app, client, team, smtp, run_jobs):
    creator, approver = _key(team["staff"]), _key(team["manager"])
    body = _create(client, creator)
    batch_id = body["id"]
    seen = client.get(f"/api/v1/batches/{batch_id}", headers={"Authorization": f"Bearer {creator}"}).get_json()
    assert (seen["status"], seen["approval"]) == (
        "awaiting_approval",
        {"state": "waiting", "by": None, "at": None, "reason": None},
    )

    _everything_runs(app, run_jobs)
    # Only the team's manager is told, once, that the batch waits for them.
    assert [(m.kind, m.rcpt_tos) for m in smtp.received] == [("approval-requested", [MANAGER[0]])]
    assert db.session.scalar(select(func.count()).select_from(Document)) == 0
    assert set(db.session.scalars(select(SigningRequest.status).where(SigningRequest.batch_id == batch_id))) == {
        "pending"
    }
    # Nor can a retry or a reminder slip something out.
    retried = _post(client, f"/api/v1/batches/{batch_id}/retry-failed", creator)
    assert retried.status_code == 409

    refused = _post(client, f"/api/v1/batches/{batch_id}/approve", creator)
    assert refused.status_code == 403
    assert "someone else" in refused.get_json()["error"]["message"]
    assert _post(client, "/api/v1/batches/999999/approve", approver).status_code == 404

    approved = _post(client, f"/api/v1/batches/{batch_id}/approve", approver)
    assert approved.status_code == 200, approved.get_json()
    decided = approved.get_json()
    assert (decided["status"], decided["approval"]["state"], decided["approval"]["by"]) == (
        "sending",
        "approved",
        MANAGER[0],
    )
    assert decided["approval"]["at"] is not None
    assert _post(client, f"/api/v1/batches/{batch_id}/approve", approver).status_code == 409
    assert _post(client, f"/api/v1/batches/{batch_id}/reject", approver, json={"reason": "late"}).status_code == 409

    run_jobs("pdf", "mail")
    assert sorted(m.message["To"] for m in smtp.of_kind("invitation")) == ["anna@example.com", "john@example.com"]


def _login(client, email, password):
    from flask import g

    # The test shares the client's app context: forget the API key's user of the calls before.
    g.pop("_login_user", None)
    g.pop("_flask_babel", None)
    page = client.get("/auth/login")
    return client.post("/auth/login", data={"email": email, "password": password, "csrf_token": csrf_from(page)})


@pytest.mark.parametrize(
    "locale, subject, words",
    [
        ("en", 'Batch "November" was not approved', ["rejected the batch", "Their reason:", "salary column"]),
        ("ru", "Рассылка «November» не одобрена", ["отклонил(а) рассылку", "Причина:", "salary column"]),
    ],
)
def test_the_approver_sees_counts_and_real_samples_and_a_rejection_tells_the_creator_why(
    app, client, team, smtp, run_jobs, locale, subject, words
):
    team["staff"].locale = locale
    team["manager"].locale = locale
    db.session.commit()
    batch_id = _create(client, _key(team["staff"]))["id"]

    _login(client, *MANAGER)
    page = client.get(f"/batches/{batch_id}")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and 'id="approve-batch"' in html and 'id="reject-batch"' in html
    # Nothing is being prepared or sent, and there are no documents to gather yet.
    assert "still being prepared or sent" not in html and 'id="export"' not in html and 'id="evidence"' not in html
    first = db.session.scalar(
        select(SigningRequest.id).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
    )
    sample = client.get(f"/batches/{batch_id}/samples/{first}.pdf")
    assert sample.mimetype == "application/pdf"
    assert " ".join(PdfReader(io.BytesIO(sample.data)).pages[0].extract_text().split()) == "Anna: Accountant"
    assert db.session.scalar(select(func.count()).select_from(Document)) == 0  # looked at, not stored

    empty = client.post(f"/batches/{batch_id}/reject", data={"reason": " ", "csrf_token": csrf_from(page)})
    assert db.session.get(Batch, batch_id).status == "awaiting_approval" and empty.status_code == 303
    client.post(
        f"/batches/{batch_id}/reject",
        data={"reason": "The salary column is last month's.", "csrf_token": csrf_from(page)},
    )
    db.session.expire_all()
    batch = db.session.get(Batch, batch_id)
    assert (batch.status, batch.approval, batch.approval_by_id) == ("cancelled", "rejected", team["manager"].id)
    assert set(db.session.scalars(select(SigningRequest.status).where(SigningRequest.batch_id == batch_id))) == {
        "cancelled"
    }
    after = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    assert 'id="approval-history"' in after and "salary column" in after and 'id="approve-batch"' not in after

    run_jobs("pdf", "mail", "default")
    (told,) = smtp.of_kind("approval-rejected")
    assert told.message["To"] == team["staff"].email and told.subject == subject
    assert all(word in told.text() for word in words), told.text()
    assert f"/batches/{batch_id}" in told.text()


def test_the_creator_waits_and_a_team_without_approval_sends_at_once(app, client, team, smtp, run_jobs):
    batch_id = _create(client, _key(team["staff"]))["id"]
    _login(client, "staff@example.com", "staff-password")
    html = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    assert 'id="approval-wait"' in html and 'id="approve-batch"' not in html
    assert 'id="approval-samples"' in html

    result = app.test_cli_runner().invoke(args=["teams", "update", "Default", "--no-require-approval"])
    assert "go out without approval" in result.output
    later = _create(client, _key(team["staff"]))
    assert (later["status"], later.get("approval")) == ("sending", None)
    run_jobs("pdf", "mail")
    assert len(smtp.of_kind("invitation")) == 2  # the second batch's; the first still waits


def test_a_rejection_needs_a_reason_and_only_an_approver_may_give_it(app, client, team):
    batch_id = _create(client, _key(team["staff"]))["id"]
    approver = _key(team["manager"])
    assert _post(client, f"/api/v1/batches/{batch_id}/reject", approver, json={}).status_code == 400
    assert (
        _post(client, f"/api/v1/batches/{batch_id}/reject", _key(team["staff"]), json={"reason": "x"}).status_code
        == 403
    )
    rejected = _post(client, f"/api/v1/batches/{batch_id}/reject", approver, json={"reason": "Wrong salaries"})
    assert rejected.status_code == 200
    assert rejected.get_json()["status"] == "cancelled"
    assert rejected.get_json()["approval"]["reason"] == "Wrong salaries"


def test_an_approval_is_told_to_webhooks_as_batch_approved_and_a_rejection_is_not(
    app,
    client,
    team,
    receiver,  # noqa: F811
    run_jobs,
):
    from bulksign.integrations import webhooks_out
    from bulksign.jobs.webhooks import dispatch

    webhooks_out.create_endpoint(db.session, url=receiver.url, events=["batch.approved"], user_id=None, now=NOW)
    db.session.commit()
    dispatch(now=utcnow())
    creator, approver = _key(team["staff"]), _key(team["manager"])
    approved, rejected = _create(client, creator)["id"], _create(client, creator)["id"]
    assert _post(client, f"/api/v1/batches/{approved}/approve", approver).status_code == 200
    assert _post(client, f"/api/v1/batches/{rejected}/reject", approver, json={"reason": "No"}).status_code == 200
    assert dispatch(now=utcnow()) == 1
    run_jobs("webhooks")
    (told,) = [json.loads(body) for _, body in receiver.received]
    assert (told["event"], told["data"]["batch"]["id"], told["data"]["batch"]["status"]) == (
        "batch.approved",
        approved,
        "sending",
    )


def test_the_manager_is_mailed_once_with_a_link_and_sees_the_batch_first_with_everything_that_goes_out(
    app, client, team, smtp, run_jobs
):
    team["manager"].display_name = "Mia Manager"
    db.session.commit()
    batch_id = _create(client, _key(team["staff"]))["id"]
    _everything_runs(app, run_jobs)
    (asked,) = smtp.of_kind("approval-requested")
    assert asked.rcpt_tos == [MANAGER[0]] and asked.subject == 'Batch "November" waits for your approval'
    assert f"/batches/{batch_id}#approval" in asked.text() and "of 2 documents" in asked.text()

    _login(client, *MANAGER)
    home = client.get("/").get_data(as_text=True)
    attention = home.split('id="attention"', 1)[1]
    # Waiting for this manager's approval comes first, linked to the batch; it is not "being prepared".
    assert attention.index('data-kind="approval"') < attention.index('data-kind="failed"')
    assert f'href="/batches/{batch_id}" data-kind="approval"' in home
    assert "waiting for approval" in home and "still being prepared or sent" not in home
    page = client.get(f"/batches/{batch_id}").get_data(as_text=True)
    facts = page.split('id="approval-facts"', 1)[1].split("</dl>", 1)[0]
    assert "Contract, version 1" in facts and "English" in facts and "Deadline" in facts and "Reminders" in facts
    assert "Waiting for approval by Mia Manager." in page

    # The creator reads who is asked; a staff user who cannot approve has no approval tile.
    client.post("/auth/logout", data={"csrf_token": csrf_from(client.get("/"))})
    _login(client, "staff@example.com", "staff-password")
    assert "Waiting for approval by Mia Manager." in client.get(f"/batches/{batch_id}").get_data(as_text=True)
    assert 'data-kind="approval"' not in client.get("/").get_data(as_text=True)

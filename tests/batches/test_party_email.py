"""Correcting another party's address (a line manager's from the row's ``manager_email``) and mending a request
that party's returned invitation bounced: on real workers, the real bounce webhook and real mail."""

from __future__ import annotations

import json
import subprocess

import pytest
from sqlalchemy import select

from bulksign.batches.sending import TransientFailure
from bulksign.batches.states import transition
from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.integrations import webhooks_out
from bulksign.jobs.mail import send_many
from bulksign.jobs.webhooks import dispatch
from bulksign.models import Batch, Document, Event, OutgoingMail, Party, SigningRequest, Suppression, utcnow
from bulksign.models.status import Status
from bulksign.people.teams import add_member, create_team
from bulksign.people.users import create_api_key, create_user
from bulksign.signing.digests import digest_addresses, served_by_digest
from bulksign.work.pipeline import enqueue_renders
from tests.signing.test_countersign import HR, TWO_ROWS, _party, _ready
from tests.signing.test_party_staff_actions import _api
from tests.signing.test_routing import PAGE, _batch, _mails_to, _parties, _sent, _sign, _token
from tests.support.batches import request_ids
from tests.support.web import csrf_from

SECRET = "bounce-secret-123"
WITH_MANAGER = PAGE.format(
    body="<h1>Employment contract</h1><p>Employee {{ name }} joins ACME.</p>"
    "<p>The employee: {{ signature }}</p><p>Line manager: {{ signature_manager }}</p>"
)
ROWS = "email,name,manager_email,manager_name\neva@example.com,Eva Employee,mia@exmaple.com,Mia Manager\n"


def _manager_invited(users, client, smtp, run_jobs) -> int:
    """A request signed by the employee, then by her line manager (a mistyped address in the row's column), whose
    employee signed and whose manager was invited at the typo."""
    request_id = _sent(users, run_jobs, html=WITH_MANAGER, file=ROWS, form={})
    assert _sign(client, _token(smtp.received[0]), "Eva Employee").status_code == 303
    run_jobs("pdf", "mail")
    (invitation,) = _mails_to(smtp, "mia@exmaple.com")
    assert _parties(request_id)["manager"].status == "invited"
    return request_id


def _changes(request_id: int) -> list[dict]:
    return list(
        db.session.scalars(select(Event.details).where(Event.request_id == request_id, Event.type == "email.changed"))
    )


def _party_invitation_id(request_id: int) -> str:
    return db.session.scalar(
        select(OutgoingMail.message_id).where(
            OutgoingMail.request_id == request_id, OutgoingMail.kind == "party_invitation"
        )
    )


def _bounce(client, body):
    return client.post(
        "/webhooks/bounces", data=json.dumps(body), headers={"X-Bounce-Secret": SECRET}, content_type="application/json"
    )


def test_a_line_managers_mistyped_address_is_corrected_before_it_signs_and_the_new_link_goes_there(
    app, users, client, smtp, run_jobs, auth
):
    request_id = _manager_invited(users, client, smtp, run_jobs)
    batch_id = db.session.get(SigningRequest, request_id).batch_id
    (typo,) = _mails_to(smtp, "mia@exmaple.com")
    old = _token(typo)
    auth.login()
    panel = client.get(f"/batches/{batch_id}/requests/{request_id}")
    html = panel.get_data(as_text=True)
    assert 'data-party-action="email-manager"' in html and 'value="mia@exmaple.com"' in html
    form = {"csrf_token": csrf_from(panel), "request_ids": str(request_id), "role": "manager"}
    hx = {"HX-Request": "true"}

    changed = client.post(f"/requests/{request_id}/email", data={**form, "email": " Mia@Example.com "}, headers=hx)
    assert changed.status_code == 200
    assert "manager" in changed.get_data(as_text=True) and "to Mia@example.com" in changed.get_data(as_text=True)
    assert _changes(request_id) == [{"role": "manager", "old": "mia@exmaple.com", "new": "Mia@example.com"}]
    found = _parties(request_id)
    assert (found["manager"].email, found["manager"].status) == ("Mia@example.com", "invited")
    assert db.session.get(SigningRequest, request_id).email == "eva@example.com"  # the employee's stays

    assert client.post(f"/requests/{request_id}/resend", data=form, headers=hx).status_code == 200
    run_jobs("mail")
    (invitation,) = _mails_to(smtp, "Mia@example.com")
    assert "Mia Manager" in invitation.text()
    new = _token(invitation)
    assert new != old and "not valid" in client.get(f"/sign/{old}").get_data(as_text=True).lower()
    assert _sign(client, new, "Mia Manager").status_code == 303
    assert db.session.get(SigningRequest, request_id).status == "signed"
    # Signed: the address is part of the record now.
    panel = client.get(f"/batches/{batch_id}/requests/{request_id}").get_data(as_text=True)
    assert 'data-party-action="email-manager"' not in panel


def test_a_managers_bounce_names_the_manager_and_a_corrected_resend_mends_the_request(
    app, users, client, smtp, run_jobs, auth, tmp_path
):
    app.config["BOUNCE_WEBHOOK_SECRET"] = SECRET
    request_id = _manager_invited(users, client, smtp, run_jobs)
    batch_id = db.session.get(SigningRequest, request_id).batch_id
    bounced = _bounce(client, {"message_id": _party_invitation_id(request_id), "reason": "550 5.1.1 no such domain"})
    assert bounced.status_code == 200 and bounced.json["bounced"] == 1

    request = db.session.get(SigningRequest, request_id)
    assert request.status == "bounced"  # the dashboards count it
    assert request.error_message == (
        "The manager's mail server returned the invitation to mia@exmaple.com: 550 5.1.1 no such domain"
    )
    event = db.session.scalar(
        select(Event.details).where(Event.request_id == request_id, Event.type == "status.bounced")
    )
    assert (event["role"], event["email"]) == ("manager", "mia@exmaple.com")
    found = _parties(request_id)
    assert (found["recipient"].status, found["manager"].status) == ("signed", "invited")  # her signature stays
    # The manager's address is suppressed, not the employee's; only the manager's mail is marked returned.
    assert db.session.scalars(select(Suppression.email)).all() == ["mia@exmaple.com"]
    mails = dict(
        db.session.execute(
            select(OutgoingMail.kind, OutgoingMail.status).where(OutgoingMail.request_id == request_id)
        ).all()
    )
    assert (mails["invitation"], mails["party_invitation"]) == ("sent", "bounced")
    assert db.session.get(Batch, batch_id).status == "closed"  # nobody could sign any more

    auth.login()
    panel = client.get(f"/batches/{batch_id}/requests/{request_id}").get_data(as_text=True)
    assert "The invitation to the Manager could not be delivered" in panel
    assert 'data-party-action="email-manager"' in panel and 'data-party-action="resend-manager"' in panel
    assert "Resend with a new link" not in panel  # the employee's resend would not mend it

    post = _api(client, users)
    # A new link for the employee would not mend it; staff correct the manager's address first (a resend would go
    # to the typo again).
    employee = post(f"/api/v1/requests/{request_id}/resend")
    assert employee.status_code == 409 and employee.json["error"]["details"]["reason"] == "party_bounced"
    changed = post(f"/api/v1/requests/{request_id}/email", {"email": "mia@example.com", "role": "manager"})
    assert changed.status_code == 200, changed.json
    assert (changed.json["role"], changed.json["email"], changed.json["changed"]) == (
        "manager",
        "mia@example.com",
        True,
    )
    assert db.session.get(SigningRequest, request_id).status == "bounced"  # until resent
    resent = post(f"/api/v1/requests/{request_id}/resend", {"role": "manager"})
    assert resent.status_code == 202, resent.json
    assert (resent.json["role"], resent.json["status"]) == ("manager", "opened")  # where its routing stood
    request = db.session.get(SigningRequest, request_id)
    assert request.error_message is None
    assert db.session.get(Batch, batch_id).status == "awaiting_signatures"
    found = _parties(request_id)
    assert (found["recipient"].status, found["manager"].status) == ("signed", "invited")

    run_jobs("mail")
    (invitation,) = _mails_to(smtp, "mia@example.com")
    assert len(smtp.of_kind("invitation")) == 1  # the employee is not invited again
    assert _sign(client, _token(invitation), "Mia Manager").status_code == 303
    assert db.session.get(SigningRequest, request_id).status == "signed"
    run_jobs("pdf", "mail")
    (signed,) = db.session.scalars(select(Document).where(Document.request_id == request_id, Document.kind == "signed"))
    path = tmp_path / "signed.pdf"
    path.write_bytes(get_storage().get(signed.storage_key))
    out = subprocess.run(["pdfsig", str(path)], capture_output=True, text=True, timeout=30).stdout
    assert out.count("Signature #") == 1 and "Signature is Valid" in out
    assert db.session.get(Batch, batch_id).status == "all_signed"


def test_an_address_change_is_refused_for_a_party_that_signed_a_role_the_request_lacks_and_another_teams_request(
    app, users, client, smtp, run_jobs
):
    request_id = _manager_invited(users, client, smtp, run_jobs)
    post = _api(client, users)
    signed = post(f"/api/v1/requests/{request_id}/email", {"email": "eve@example.com"})  # the employee signed
    assert signed.status_code == 409 and "signed" in signed.json["error"]["message"]
    missing = post(f"/api/v1/requests/{request_id}/email", {"email": "boss@example.com", "role": "employer"})
    assert missing.status_code == 404 and "employer" in missing.json["error"]["message"]
    bad = post(f"/api/v1/requests/{request_id}/email", {"email": "not an address", "role": "manager"})
    assert bad.status_code == 422

    stranger = create_user(db.session, email="legal@example.com", password="x" * 12, role="staff", now=utcnow())
    add_member(
        db.session, team=create_team(db.session, name="Legal", now=utcnow()), user=stranger, by=None, now=utcnow()
    )
    secret = create_api_key(db.session, user=stranger, name="legal", now=utcnow()).secret
    db.session.commit()
    foreign = client.post(
        f"/api/v1/requests/{request_id}/email",
        json={"email": "mia@example.com", "role": "manager"},
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert foreign.status_code == 404

    (invitation,) = _mails_to(smtp, "mia@exmaple.com")
    assert _sign(client, _token(invitation), "Mia Manager").status_code == 303
    done = post(f"/api/v1/requests/{request_id}/email", {"email": "mia@example.com", "role": "manager"})
    assert done.status_code == 409  # the request is signed
    assert _parties(request_id)["manager"].email == "mia@exmaple.com" and _changes(request_id) == []


def test_the_openapi_description_says_an_address_correction_takes_a_role(app, client):
    spec = client.get("/api/v1/openapi.json").get_json()
    body = spec["components"]["schemas"]["EmailBody"]["properties"]
    assert "role" in body and "manager" in body["role"]["description"]
    operation = spec["paths"]["/requests/{request_id}/email"]["post"]
    assert "bounced" in operation["description"] and "`role`" in operation["description"]


def test_a_waiting_managers_address_corrected_before_its_step_gets_the_invitation_when_the_step_starts(
    app, users, client, smtp, run_jobs
):
    request_id = _sent(users, run_jobs, html=WITH_MANAGER, file=ROWS, form={})
    post = _api(client, users)
    changed = post(f"/api/v1/requests/{request_id}/email", {"email": "mia@example.com", "role": "manager"})
    assert changed.status_code == 200 and _parties(request_id)["manager"].status == "waiting"
    assert _sign(client, _token(smtp.received[0]), "Eva Employee").status_code == 303
    run_jobs("pdf", "mail")
    assert _mails_to(smtp, "mia@exmaple.com") == []
    (invitation,) = _mails_to(smtp, "mia@example.com")
    assert _sign(client, _token(invitation), "Mia Manager").status_code == 303
    assert db.session.get(SigningRequest, request_id).status == "signed"


def test_a_countersigners_document_given_another_address_leaves_its_digest_for_a_link_of_its_own(
    app, users, client, smtp, run_jobs
):
    ids, token = _ready(users, client, smtp, run_jobs, signed=2, rows=TWO_ROWS)
    post = _api(client, users)
    changed = post(f"/api/v1/requests/{ids[0]}/email", {"email": "deputy@acme.example", "role": "employer"})
    assert changed.status_code == 200, changed.json
    # The digest finds its documents by their current addresses: this one left it; the other stays.
    assert digest_addresses(db.session, batch_id=_party(ids[0]).batch_id, emails=[HR]) == set()
    served = set(db.session.scalars(select(Party.request_id).where(Party.role == "employer", served_by_digest())))
    assert served == {ids[1]}
    page = client.get(f"/countersign/{token}").get_data(as_text=True)
    assert f'name="party_ids" value="{_party(ids[1]).id}"' in page
    assert f'name="party_ids" value="{_party(ids[0]).id}"' not in page
    resent = post(f"/api/v1/requests/{ids[0]}/resend", {"role": "employer"})
    assert resent.status_code == 202, resent.json
    run_jobs("mail")
    (invitation,) = _mails_to(smtp, "deputy@acme.example")
    assert invitation in smtp.of_kind("party-invitation")
    assert _sign(client, _token(invitation), "Dan Deputy").status_code == 303
    assert db.session.get(SigningRequest, ids[0]).status == "signed"


def test_the_request_bounced_webhook_names_the_party_whose_invitation_came_back(app, users, client, smtp, run_jobs):
    from tests.integrations.test_webhooks_out import Receiver

    app.config["BOUNCE_WEBHOOK_SECRET"] = SECRET
    app.config["WEBHOOK_ALLOW_LOCAL"] = True
    with Receiver() as receiver:
        webhooks_out.create_endpoint(
            db.session, url=receiver.url, events=["request.bounced"], user_id=users["admin"].id, now=utcnow()
        )
        db.session.commit()
        dispatch(now=utcnow())  # the cursor: what happens from now on
        request_id = _manager_invited(users, client, smtp, run_jobs)
        _bounce(client, {"message_id": _party_invitation_id(request_id), "reason": "550"})
        dispatch(now=utcnow())
        run_jobs("webhooks")
        (told,) = [json.loads(body) for _headers, body in receiver.received]
        assert (told["event"], told["data"]["party"]) == ("request.bounced", {"role": "manager"})
        assert told["data"]["request"]["id"] == request_id


def test_a_bounce_naming_only_the_managers_address_bounces_the_request_it_waits_on(app, users, client, smtp, run_jobs):
    app.config["BOUNCE_WEBHOOK_SECRET"] = SECRET
    request_id = _manager_invited(users, client, smtp, run_jobs)
    postmark = {
        "RecordType": "Bounce",
        "Type": "HardBounce",
        "Email": "MIA@exmaple.com",
        "Description": "no such domain",
    }
    bounced = _bounce(client, postmark)
    assert bounced.status_code == 200 and bounced.json["bounced"] == 1
    request = db.session.get(SigningRequest, request_id)
    assert request.status == "bounced" and request.error_message.startswith(
        "The manager's mail server returned the invitation to mia@exmaple.com: HardBounce"
    )
    assert _parties(request_id)["recipient"].status == "signed"


PARALLEL = {"routing": '[["recipient", "manager"]]'}
BOTH_MISTYPED = "email,name,manager_email,manager_name\neva@exmaple.com,Eva Employee,mia@exmaple.com,Mia Manager\n"
DEAD = "550 5.1.1 no such domain"


def _invitation_id(request_id: int, kind: str) -> str:
    return db.session.scalar(
        select(OutgoingMail.message_id).where(OutgoingMail.request_id == request_id, OutgoingMail.kind == kind)
    )


def _both_bounced(users, client, smtp, run_jobs) -> int:
    """A request the employee and her line manager sign at once (a parallel step), both addresses mistyped, whose
    two invitations came back: the employee's first, then the manager's."""
    request_id = _sent(users, run_jobs, html=WITH_MANAGER, file=BOTH_MISTYPED, form=PARALLEL)
    assert sorted(m.rcpt_tos[0] for m in smtp.received) == ["eva@exmaple.com", "mia@exmaple.com"]
    first = _bounce(client, {"message_id": _invitation_id(request_id, "invitation"), "reason": DEAD})
    assert (first.json["bounced"], first.json["bounced_too"]) == (1, 0)
    second = _bounce(client, {"message_id": _invitation_id(request_id, "party_invitation"), "reason": DEAD})
    assert (second.json["bounced"], second.json["bounced_too"]) == (0, 1)
    return request_id


def _bounce_events(request_id: int) -> list[tuple[str, str, str]]:
    return [
        (kind, details["role"], details["email"])
        for kind, details in db.session.execute(
            select(Event.type, Event.details)
            .where(Event.request_id == request_id, Event.type.in_(["status.bounced", "email.bounced"]))
            .order_by(Event.id)
        )
    ]


def test_both_parties_of_a_parallel_step_bounce_and_the_request_goes_on_only_once_both_are_resent(
    app, users, client, smtp, run_jobs, auth
):
    app.config["BOUNCE_WEBHOOK_SECRET"] = SECRET
    request_id = _both_bounced(users, client, smtp, run_jobs)
    batch_id = db.session.get(SigningRequest, request_id).batch_id
    old = {address: _token(mail) for mail in smtp.received for address in mail.rcpt_tos}

    # Both named: the request's error, an event each, each party's mail marked returned, both addresses suppressed.
    request = db.session.get(SigningRequest, request_id)
    assert request.status == "bounced"
    assert request.error_message == (
        f"The recipient's mail server returned the invitation: {DEAD}; "
        f"the manager's mail server returned the invitation to mia@exmaple.com: {DEAD}"
    )
    assert _bounce_events(request_id) == [
        ("status.bounced", "recipient", "eva@exmaple.com"),
        ("email.bounced", "manager", "mia@exmaple.com"),
    ]
    mails = {
        kind: (status, error)
        for kind, status, error in db.session.execute(
            select(OutgoingMail.kind, OutgoingMail.status, OutgoingMail.error).where(
                OutgoingMail.request_id == request_id
            )
        )
    }
    assert mails == {
        "invitation": ("bounced", f"The recipient's mail server returned the invitation: {DEAD}"),
        "party_invitation": (
            "bounced",
            f"The manager's mail server returned the invitation to mia@exmaple.com: {DEAD}",
        ),
    }
    assert sorted(db.session.scalars(select(Suppression.email))) == ["eva@exmaple.com", "mia@exmaple.com"]
    # The provider telling the manager's bounce again changes nothing.
    again = _bounce(client, {"message_id": _invitation_id(request_id, "party_invitation"), "reason": DEAD})
    assert (again.json["bounced"], again.json["bounced_too"]) == (0, 0) and len(_bounce_events(request_id)) == 2

    # The panel offers a resend to each: the manager's on its line, the employee's as the request's own.
    auth.login()
    panel = client.get(f"/batches/{batch_id}/requests/{request_id}").get_data(as_text=True)
    assert "The invitations to Recipient, Manager could not be delivered" in panel
    assert 'data-party-action="resend-manager"' in panel and "Resend with a new link" in panel
    assert "party's invitation bounced" in panel  # the manager's bounce in the history

    # The manager's address corrected and resent to: its new invitation goes out, the request stays bounced.
    form = {"csrf_token": csrf_from(client.get(f"/batches/{batch_id}/requests/{request_id}")), "role": "manager"}
    hx = {"HX-Request": "true"}
    changed = client.post(f"/requests/{request_id}/email", data={**form, "email": "mia@example.com"}, headers=hx)
    assert changed.status_code == 200
    resent = client.post(f"/requests/{request_id}/resend", data=form, headers=hx).get_data(as_text=True)
    assert "1 new link sent" in resent and "1 request stays bounced" in resent
    request = db.session.get(SigningRequest, request_id)
    db.session.refresh(request)
    assert request.status == "bounced"
    assert request.error_message == f"The recipient's mail server returned the invitation: {DEAD}"
    run_jobs("mail")
    (manager,) = _mails_to(smtp, "mia@example.com")
    panel = client.get(f"/batches/{batch_id}/requests/{request_id}").get_data(as_text=True)
    assert 'data-party-action="resend-manager"' not in panel and "Resend with a new link" in panel

    # The employee's corrected and resent: nobody's bounce stands, the request goes on.
    post = _api(client, users)
    assert post(f"/api/v1/requests/{request_id}/email", {"email": "eva@example.com"}).status_code == 200
    last = post(f"/api/v1/requests/{request_id}/resend")
    assert last.status_code == 202, last.json
    run_jobs("mail")
    request = db.session.get(SigningRequest, request_id)
    db.session.refresh(request)
    assert (request.status, request.error_message) == ("sent", None)
    assert db.session.get(Batch, batch_id).status == "awaiting_signatures"
    (employee,) = _mails_to(smtp, "eva@example.com")
    assert _mails_to(smtp, "mia@example.com") == [manager]  # the manager is not invited a third time
    for token in old.values():
        assert "not valid" in client.get(f"/sign/{token}").get_data(as_text=True).lower()
    assert _sign(client, _token(manager), "Mia Manager").status_code == 303
    assert _sign(client, _token(employee), "Eva Employee").status_code == 303
    assert db.session.get(SigningRequest, request_id).status == "signed"


def test_the_employee_resent_first_stays_bounced_until_the_managers_resend_and_then_signs_on_that_link(
    app, users, client, smtp, run_jobs
):
    app.config["BOUNCE_WEBHOOK_SECRET"] = SECRET
    request_id = _both_bounced(users, client, smtp, run_jobs)
    post = _api(client, users)

    assert post(f"/api/v1/requests/{request_id}/email", {"email": "eva@example.com"}).status_code == 200
    first = post(f"/api/v1/requests/{request_id}/resend")
    assert first.status_code == 202 and first.json["status"] == "bounced", first.json
    request = db.session.get(SigningRequest, request_id)
    db.session.refresh(request)
    assert request.error_message == f"The manager's mail server returned the invitation to mia@exmaple.com: {DEAD}"
    assert request.expires_at is not None
    assert db.session.get(Batch, request.batch_id).status == "closed"  # nobody can sign yet
    run_jobs("mail")
    (employee,) = _mails_to(smtp, "eva@example.com")
    assert "Eva Employee" in employee.text()
    # Her new link waits for the manager's address: it says so instead of sending her to the sender.
    waiting = client.get(f"/sign/{_token(employee)}")
    assert waiting.status_code == 200 and "cannot be signed just yet" in waiting.get_data(as_text=True)
    # The manager's resend alone mends the request now; the employee's again would mend nothing.
    assert post(f"/api/v1/requests/{request_id}/resend").json["error"]["details"]["reason"] == "party_bounced"

    changed = post(f"/api/v1/requests/{request_id}/email", {"email": "mia@example.com", "role": "manager"})
    assert changed.status_code == 200
    last = post(f"/api/v1/requests/{request_id}/resend", {"role": "manager"})
    assert last.status_code == 202 and last.json["status"] == "sent", last.json
    request = db.session.get(SigningRequest, request_id)
    db.session.refresh(request)
    assert request.error_message is None
    assert db.session.get(Batch, request.batch_id).status == "awaiting_signatures"
    run_jobs("mail")
    (manager,) = _mails_to(smtp, "mia@example.com")
    assert _sign(client, _token(employee), "Eva Employee").status_code == 303
    assert _sign(client, _token(manager), "Mia Manager").status_code == 303
    assert db.session.get(SigningRequest, request_id).status == "signed"


def test_a_managers_bounce_after_the_employees_fires_request_bounced_again_naming_the_manager(
    app, users, client, smtp, run_jobs
):
    from tests.integrations.test_webhooks_out import Receiver

    app.config["BOUNCE_WEBHOOK_SECRET"] = SECRET
    app.config["WEBHOOK_ALLOW_LOCAL"] = True
    with Receiver() as receiver:
        webhooks_out.create_endpoint(
            db.session, url=receiver.url, events=["request.bounced"], user_id=users["admin"].id, now=utcnow()
        )
        db.session.commit()
        dispatch(now=utcnow())
        request_id = _both_bounced(users, client, smtp, run_jobs)
        # Told again: nothing more.
        _bounce(client, {"message_id": _invitation_id(request_id, "party_invitation"), "reason": DEAD})
        dispatch(now=utcnow())
        run_jobs("webhooks")
        told = [json.loads(body) for _headers, body in receiver.received]
        assert [(t["event"], t["data"]["party"], t["data"]["request"]["id"]) for t in told] == [
            ("request.bounced", {"role": "recipient"}, request_id),
            ("request.bounced", {"role": "manager"}, request_id),
        ]


def test_an_employees_address_refused_at_sending_and_the_managers_bounce_are_both_named_in_their_own_words(
    app, users, client, smtp, run_jobs
):
    app.config["BOUNCE_WEBHOOK_SECRET"] = SECRET
    refused = "550 5.1.1 No such user here"
    smtp.handler.reject_recipients["eva@exmaple.com"] = refused
    request_id = _sent(users, run_jobs, html=WITH_MANAGER, file=BOTH_MISTYPED, form=PARALLEL)
    own = db.session.get(SigningRequest, request_id).error_message
    assert own.startswith("The recipient's mail server refused the address") and refused in own
    late = _bounce(client, {"message_id": _invitation_id(request_id, "party_invitation"), "reason": DEAD})
    assert late.json["bounced_too"] == 1
    request = db.session.get(SigningRequest, request_id)
    db.session.refresh(request)
    assert request.error_message == (
        f"{own}; the manager's mail server returned the invitation to mia@exmaple.com: {DEAD}"
    )

    post = _api(client, users)
    changed = post(f"/api/v1/requests/{request_id}/email", {"email": "mia@example.com", "role": "manager"})
    assert changed.status_code == 200
    resent = post(f"/api/v1/requests/{request_id}/resend", {"role": "manager"})
    assert resent.status_code == 202 and resent.json["status"] == "bounced", resent.json
    db.session.refresh(request)
    assert request.error_message == own  # the employee's, as the mail worker put it


def test_a_managers_invitation_refused_at_sending_bounces_the_request_naming_the_manager(
    app, users, client, smtp, run_jobs
):
    refused = "550 5.1.1 No such user here"
    smtp.handler.reject_recipients["mia@exmaple.com"] = refused
    request_id = _sent(users, run_jobs, html=WITH_MANAGER, file=ROWS, form=PARALLEL)
    request = db.session.get(SigningRequest, request_id)
    assert request.status == "bounced"
    assert request.error_message == f"The manager's mail server refused the address mia@exmaple.com: {refused}"
    assert _bounce_events(request_id) == [("status.bounced", "manager", "mia@exmaple.com")]
    assert _invitation_id(request_id, "party_invitation")
    post = _api(client, users)
    # The employee's resend would mend nothing: the manager's is the one to correct and resend.
    assert post(f"/api/v1/requests/{request_id}/resend").json["error"]["details"]["reason"] == "party_bounced"
    assert (
        post(f"/api/v1/requests/{request_id}/email", {"email": "mia@example.com", "role": "manager"}).status_code == 200
    )
    resent = post(f"/api/v1/requests/{request_id}/resend", {"role": "manager"})
    assert resent.status_code == 202 and resent.json["status"] == "sent", resent.json
    run_jobs("mail")
    (invitation,) = _mails_to(smtp, "mia@example.com")
    assert _sign(client, _token(invitation), "Mia Manager").status_code == 303


def test_a_managers_invitation_refused_while_the_employees_is_being_sent_bounces_the_request(
    app, users, smtp, run_jobs
):
    """A parallel step's two invitations go out from separate mail jobs: the manager's may be refused while another
    worker is still sending the employee's (the request ``sending``). It bounces the request naming the manager, as
    a provider's report would then, instead of being lost."""
    refused = "550 5.1.1 No such user here"
    smtp.handler.reject_recipients["mia@exmaple.com"] = refused
    (request_id,) = request_ids(_batch(users, html=WITH_MANAGER, file=ROWS, form=PARALLEL))
    enqueue_renders([request_id])
    run_jobs("pdf")
    # Another mail worker has claimed the employee's invitation and is sending it.
    assert transition(db.session, request_id, frm=Status.GENERATED, to=Status.SENDING, now=utcnow()).won
    db.session.commit()
    manager_mail = db.session.scalar(
        select(OutgoingMail.id).where(OutgoingMail.request_id == request_id, OutgoingMail.kind == "party_invitation")
    )
    send_many([manager_mail])
    db.session.expire_all()
    request = db.session.get(SigningRequest, request_id)
    assert request.status == "bounced"
    assert request.error_message == f"The manager's mail server refused the address mia@exmaple.com: {refused}"
    assert _bounce_events(request_id) == [("status.bounced", "manager", "mia@exmaple.com")]
    assert db.session.get(OutgoingMail, manager_mail).status == "bounced"


def test_a_managers_invitation_waits_until_the_employees_of_the_same_step_is_out(app, users, smtp, run_jobs):
    """Two mail workers may take a parallel step's chunks at once: the manager's invitation is held (untried, no
    attempt counted) while the request's own is not yet claimed, so a dead manager's address is never refused while
    the request cannot bounce; it goes once the employee's is out."""
    (request_id,) = request_ids(_batch(users, html=WITH_MANAGER, file=ROWS, form=PARALLEL))
    enqueue_renders([request_id])
    run_jobs("pdf")
    mails = dict(
        db.session.execute(
            select(OutgoingMail.kind, OutgoingMail.id).where(OutgoingMail.request_id == request_id)
        ).all()
    )
    with pytest.raises(TransientFailure, match="held"):
        send_many([mails["party_invitation"]])
    db.session.expire_all()
    held = db.session.get(OutgoingMail, mails["party_invitation"])
    assert (held.status, held.attempts) == ("queued", 0) and not _mails_to(smtp, "mia@exmaple.com")
    send_many([mails["invitation"]])
    send_many([mails["party_invitation"]])
    assert len(_mails_to(smtp, "eva@example.com")) == 1 and len(_mails_to(smtp, "mia@exmaple.com")) == 1

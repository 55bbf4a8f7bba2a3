"""Staff remind and resend per party: from the request's panel on the batch page and the API's remind and
resend with ``role``; on real workers and real mail. The recipient's actions stay the request's."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.models import CountersignLink, OutgoingMail, Party, SigningRequest, utcnow
from bulksign.people.users import create_api_key
from tests.signing.test_countersign import TWO_ROWS, _digest_token, _digests, _party, _ready
from tests.signing.test_party_reminders import _employer_invited
from tests.signing.test_routing import _parties, _sent, _sign, _token
from tests.support.web import csrf_from


def _api(client, users):
    secret = create_api_key(db.session, user=db.session.merge(users["staff"]), name="test", now=utcnow()).secret
    db.session.commit()

    def post(path: str, body: dict | None = None):
        return client.post(path, json=body, headers={"Authorization": f"Bearer {secret}"})

    return post


def test_the_api_reminds_the_employer_with_its_own_link_and_resends_it_a_new_one(app, users, client, smtp, run_jobs):
    request_id = _employer_invited(users, client, smtp, run_jobs)
    batch_id = db.session.get(SigningRequest, request_id).batch_id
    post = _api(client, users)
    (invitation,) = smtp.of_kind("party-invitation")
    old = _token(invitation)

    # Invited a moment ago: skipped with the reason, unless sent anyway.
    soon = post(f"/api/v1/batches/{batch_id}/remind", {"request_ids": [request_id], "role": "employer"})
    assert soon.status_code == 202 and soon.json["queued"] == 0 and soon.json["skipped"] == {"invited_recently": 1}
    reminded = post(
        f"/api/v1/batches/{batch_id}/remind", {"request_ids": [request_id], "role": "employer", "force": True}
    )
    assert reminded.status_code == 202 and reminded.json["queued"] == 1, reminded.json
    run_jobs("mail")
    (reminder,) = smtp.of_kind("party-reminder")
    assert reminder.rcpt_tos == ["hr@acme.example"] and _token(reminder) == old
    assert _parties(request_id)["employer"].reminder_count == 1
    assert db.session.get(SigningRequest, request_id).reminder_count == 0  # the employee was not reminded

    resent = post(f"/api/v1/requests/{request_id}/resend", {"role": "employer"})
    assert resent.status_code == 202, resent.json
    assert (resent.json["role"], resent.json["status"], resent.json["resent"]) == ("employer", "opened", 1)
    run_jobs("mail")
    first, second = smtp.of_kind("party-invitation")
    assert second.rcpt_tos == ["hr@acme.example"] and "Anna Boss" in second.text()
    new = _token(second)
    assert new != old
    assert "not valid" in client.get(f"/sign/{old}").get_data(as_text=True).lower()  # the old link died
    employer = _parties(request_id)["employer"]
    assert (employer.status, employer.reminder_count) == ("invited", 0)  # a fresh series from the new invitation
    assert _sign(client, new, "Anna Boss").status_code == 303
    assert db.session.get(SigningRequest, request_id).status == "signed"
    # Signed: nothing more to resend, and the answer says why.
    done = post(f"/api/v1/requests/{request_id}/resend", {"role": "employer"})
    assert done.status_code == 409 and done.json["error"]["details"]["reason"] == "signed"


def test_a_party_whose_step_has_not_started_gets_no_new_link_and_an_unknown_role_is_named(
    app, users, client, smtp, run_jobs
):
    request_id = _sent(users, run_jobs)
    batch_id = db.session.get(SigningRequest, request_id).batch_id
    post = _api(client, users)
    waiting = post(f"/api/v1/requests/{request_id}/resend", {"role": "employer"})
    assert waiting.status_code == 409 and waiting.json["error"]["details"]["reason"] == "not_started"
    assert _parties(request_id)["employer"].token_hash is None
    unknown = post(f"/api/v1/batches/{batch_id}/remind", {"all_unsigned": True, "role": "boss"})
    assert unknown.status_code == 422 and "boss" in unknown.json["error"]["message"]
    assert "employer" in unknown.json["error"]["message"]


def test_the_recipient_of_a_document_several_sign_gets_a_new_link_before_signing(app, users, client, smtp, run_jobs):
    request_id = _sent(users, run_jobs)
    old = _token(smtp.received[0])
    post = _api(client, users)
    resent = post(f"/api/v1/requests/{request_id}/resend")  # no role: the recipient, as for one signer
    assert resent.status_code == 202, resent.json  # refused ("several_parties") before
    assert (resent.json["role"], resent.json["status"]) == ("recipient", "generated")
    run_jobs("mail")
    first, second = smtp.of_kind("invitation")
    new = _token(second)
    assert new != old and second.rcpt_tos == ["eva@example.com"]
    assert "not valid" in client.get(f"/sign/{old}").get_data(as_text=True).lower()
    found = _parties(request_id)
    assert (found["recipient"].status, found["employer"].status) == ("invited", "waiting")
    assert _sign(client, new, "Eva Employee").status_code == 303
    # Signed: the recipient's resend is refused with the reason, the employer's step is next.
    again = post(f"/api/v1/requests/{request_id}/resend")
    assert again.status_code == 409 and again.json["error"]["details"]["reason"] == "signed"


def test_staff_remind_and_resend_the_employer_from_the_requests_panel(app, users, client, smtp, run_jobs, auth):
    request_id = _employer_invited(users, client, smtp, run_jobs)
    batch_id = db.session.get(SigningRequest, request_id).batch_id
    auth.login()
    panel = client.get(f"/batches/{batch_id}/requests/{request_id}")
    html = panel.get_data(as_text=True)
    assert 'data-party-action="remind-employer"' in html and 'data-party-action="resend-employer"' in html
    assert 'data-party-action="remind-recipient"' not in html  # the employee signed; her actions are the request's
    assert "Resend with a new link" not in html  # and she needs no new link
    token = csrf_from(panel)
    form = {"csrf_token": token, "request_ids": str(request_id), "role": "employer"}
    hx = {"HX-Request": "true"}
    soon = client.post(f"/batches/{batch_id}/remind", data=form, headers=hx).get_data(as_text=True)
    assert "invited less than an hour ago" in soon and 'name="role" value="employer"' in soon  # send anyway keeps it
    sent = client.post(f"/batches/{batch_id}/remind", data={**form, "force": "1"}, headers=hx)
    assert "1 reminder queued" in sent.get_data(as_text=True)
    run_jobs("mail")  # a reminder still queued at the resend would not go: its link is dead
    resent = client.post(f"/requests/{request_id}/resend", data=form, headers=hx)
    assert resent.status_code == 200 and "1" in resent.get_data(as_text=True)
    run_jobs("mail")
    assert [m.rcpt_tos for m in smtp.of_kind("party-reminder")] == [["hr@acme.example"]]
    assert len(smtp.of_kind("party-invitation")) == 2
    kinds = db.session.scalars(select(OutgoingMail.kind).where(OutgoingMail.request_id == request_id)).all()
    assert sorted(kinds).count("party_invitation") == 2


def test_a_remind_of_the_employer_run_as_a_background_job_keeps_the_role(app, users, client, smtp, run_jobs):
    from bulksign.batches.bulk_actions import enqueue_bulk

    request_id = _employer_invited(users, client, smtp, run_jobs)
    batch_id = db.session.get(SigningRequest, request_id).batch_id
    enqueue_bulk(
        action="remind",
        batch_id=batch_id,
        user_id=db.session.merge(users["staff"]).id,
        request_ids=[request_id],
        force=True,
        role="employer",
    )
    run_jobs("default", "mail")
    assert [m.rcpt_tos for m in smtp.of_kind("party-reminder")] == [["hr@acme.example"]]
    assert smtp.of_kind("reminder") == []


def _countersigner_waiting_an_hour(users, client, smtp, run_jobs) -> tuple[list[int], str]:
    """Two documents ready for the fixed employer, a countersigner (``test_countersign._ready``), invited and sent
    its first digest two hours ago: its request ids and its digest link."""
    ids, token = _ready(users, client, smtp, run_jobs, signed=2, rows=TWO_ROWS)
    earlier = timedelta(hours=2)
    for party in db.session.scalars(select(Party).where(Party.request_id.in_(ids))):
        party.invited_at = party.invited_at and party.invited_at - earlier
    link = db.session.scalars(select(CountersignLink)).one()
    link.last_digest_at -= earlier
    db.session.commit()
    return ids, token


def test_the_api_reminds_a_countersigner_by_its_digest_and_gives_it_no_link_per_document(
    app, users, client, smtp, run_jobs
):
    ids, token = _countersigner_waiting_an_hour(users, client, smtp, run_jobs)
    batch_id = db.session.get(SigningRequest, ids[0]).batch_id
    # One document's fields make the countersigner open it on its own page: a link of its own, still the digest's.
    db.session.get(SigningRequest, ids[0]).batch.template_version.fields = [
        {"name": "start_date", "type": "date", "role": "employer"}
    ]
    db.session.commit()
    page = client.get(f"/countersign/{token}")
    client.post(f"/countersign/{token}/documents/{_party(ids[0]).id}/open", data={"csrf_token": csrf_from(page)})
    assert _party(ids[0]).token_hash is not None
    post = _api(client, users)

    reminded = post(f"/api/v1/batches/{batch_id}/remind", {"request_ids": ids, "role": "employer"})
    assert reminded.status_code == 202 and (reminded.json["queued"], reminded.json["skipped"]) == (1, {})
    run_jobs("mail")
    assert smtp.of_kind("party-reminder") == [] and smtp.of_kind("party-invitation") == []
    _first, again = _digests(smtp)  # one digest for both documents, with the one link
    assert _digest_token(again) == token
    assert again.subject == "2 documents of “Employment contract” wait for your signature"
    for body in ({"request_ids": ids, "role": "employer"}, {"all_unsigned": True, "role": "employer", "force": True}):
        twice = post(f"/api/v1/batches/{batch_id}/remind", body)
        assert (twice.json["queued"], twice.json["skipped"]) == (0, {"reminded_recently": 2}), twice.json

    # No link per document for it: refused, saying why; its link and documents stay as they were.
    resent = post(f"/api/v1/requests/{ids[0]}/resend", {"role": "employer"})
    assert resent.status_code == 409 and resent.json["error"]["details"]["reason"] == "countersign_digest"
    assert [_party(i).status for i in ids] == ["invited", "invited"]
    assert "All 2 documents" not in client.get(f"/countersign/{token}").get_data(as_text=True)  # own pages now
    assert client.get(f"/countersign/{token}").status_code == 200
    run_jobs("mail")
    assert len(_digests(smtp)) == 2 and smtp.of_kind("party-invitation") == []


def test_the_requests_panel_offers_a_countersigners_digest_not_a_link_of_its_own(
    app, users, client, smtp, run_jobs, auth
):
    ids, token = _countersigner_waiting_an_hour(users, client, smtp, run_jobs)
    batch_id = db.session.get(SigningRequest, ids[0]).batch_id
    auth.login()
    panel = client.get(f"/batches/{batch_id}/requests/{ids[0]}")
    html = panel.get_data(as_text=True)
    assert "Signs through the countersigner’s digest" in html
    assert 'data-party-action="remind-employer">Send the digest now<' in html
    assert 'data-party-action="resend-employer"' not in html
    form = {"csrf_token": csrf_from(panel), "request_ids": str(ids[0]), "role": "employer"}
    hx = {"HX-Request": "true"}
    sent = client.post(f"/batches/{batch_id}/remind", data=form, headers=hx)
    assert "1 reminder queued" in sent.get_data(as_text=True)
    # A resend posted anyway (an old page, a script) is refused with the reason in words.
    refused = client.post(f"/requests/{ids[0]}/resend", data=form, headers=hx).get_data(as_text=True)
    assert "served by the countersigner’s digest" in refused.replace("&#39;", "’").replace("'", "’")
    run_jobs("mail")
    assert len(_digests(smtp)) == 2 and smtp.of_kind("party-invitation") == []

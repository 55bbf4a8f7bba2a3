"""Correct and resend: a declined two-party contract is corrected from its panel and signed by both on the new
version; the old links say they were replaced, the signatures on the old version are void, every party who saw it
is told; in a team that requires approval the correction waits for someone else. Real workers, PDFs and mail."""

from __future__ import annotations

import subprocess

import pytest
from flask import g
from sqlalchemy import select, update

from bulksign.batches.corrections import CorrectionAsked, correct_request
from bulksign.batches.progress import BatchActionError
from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.models import Correction, Document, Event, FieldValue, Party, SigningRequest, Team, utcnow
from bulksign.models.parties import PartyStatus
from bulksign.models.status import IllegalTransition
from bulksign.people.teams import add_member
from bulksign.people.users import create_user
from bulksign.signing.parties import move_parties
from tests.batches.test_approval import MANAGER, _login
from tests.signing.test_routing import PAGE, _mails_to, _parties, _sent, _sign, _token
from tests.support.web import csrf_from

CONTRACT = PAGE.format(
    body="<h1>Employment contract</h1><p>Employee {{ name }} joins ACME as {{ position }}.</p>"
    "<p>The employee: {{ signature }}</p><p>For the employer: {{ signature_employer }}</p>"
)
FILE = "email,name,position\neva@example.com,Eva Employee,Accountant\n"


def _as_signer() -> None:
    """The test shares the client's app context: forget the user an earlier call loaded (the cookie says who)."""
    for name in list(vars(g)):
        g.pop(name)


def _signs(client, token: str, name: str):
    _as_signer()
    return _sign(client, token, name)


def _text(pdf: bytes, tmp_path, name: str) -> str:
    path = tmp_path / name
    path.write_bytes(pdf)
    return subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, timeout=30).stdout


def _declined_by_the_employer(users, client, smtp, run_jobs) -> tuple[int, str, str]:
    """The employee signed, the employer declined: the request, and the two links of version 1."""
    request_id = _sent(users, run_jobs, html=CONTRACT, file=FILE)
    employee = _token(smtp.received[0])
    assert _sign(client, employee, "Eva Employee").status_code == 303
    run_jobs("pdf", "mail")
    employer = _token(_mails_to(smtp, "hr@acme.example")[0])
    page = client.get(f"/sign/{employer}")
    declined = client.post(f"/sign/{employer}/decline", data={"csrf_token": csrf_from(page), "reason": "Wrong job"})
    assert declined.status_code == 303
    run_jobs("mail")
    return request_id, employee, employer


def _panel(client, request_id: int) -> str:
    _as_signer()
    batch_id = db.session.get(SigningRequest, request_id).batch_id
    return client.get(f"/batches/{batch_id}/requests/{request_id}").get_data(as_text=True)


def _correct(client, request_id: int, **form):
    _as_signer()
    batch_id = db.session.get(SigningRequest, request_id).batch_id
    page = client.get(f"/batches/{batch_id}/requests/{request_id}")
    return client.post(
        f"/requests/{request_id}/correction",
        data={"csrf_token": csrf_from(page), **form},
        headers={"HX-Request": "true"},
    )


def test_a_declined_two_party_contract_is_corrected_and_signed_by_both_on_the_new_version(
    app, users, auth, client, smtp, run_jobs, tmp_path
):
    request_id, employee_v1, employer_v1 = _declined_by_the_employer(users, client, smtp, run_jobs)
    (notice,) = smtp.of_kind("decline-notice")
    assert "Correct and resend" in notice.text()  # the owner is told the way forward
    auth.login()
    panel = _panel(client, request_id)
    assert "Correct and resend" in panel and 'name="value-position" value="Accountant"' in panel
    assert 'name="email-employer" value="hr@acme.example"' in panel

    # The note is required: nothing changes without it.
    refused = _correct(client, request_id, **{"value-position": "Engineer", "note": "  "})
    assert refused.status_code == 422 and "every party reads it" in refused.get_data(as_text=True)
    assert db.session.get(SigningRequest, request_id).status == "declined"

    answer = _correct(
        client, request_id, **{"value-position": "Engineer", "note": "The position was wrong: Engineer, as agreed."}
    )
    assert answer.status_code == 200 and "new version" in answer.get_data(as_text=True)
    db.session.expire_all()
    request = db.session.get(SigningRequest, request_id)
    assert (request.status, request.document_version, request.data["position"]) == ("pending", 2, "Engineer")
    assert {p.status for p in _parties(request_id).values()} == {"waiting"}  # the employee's signature is void
    assert _parties(request_id)["recipient"].signature_image is None

    run_jobs("pdf", "mail")
    # Both who saw version 1 are told what changed and why; the employee gets a new link to version 2.
    told = smtp.of_kind("corrected")
    assert sorted(m.rcpt_tos[0] for m in told) == ["eva@example.com", "hr@acme.example"]
    assert all("position: Accountant → Engineer" in m.text() and "as agreed" in m.text() for m in told)
    invitations = [m for m in smtp.of_kind("invitation") if "eva@example.com" in m.rcpt_tos]
    assert len(invitations) == 2
    employee_v2 = _token(invitations[-1])
    assert employee_v2 != employee_v1
    # The old links say they were replaced, in a full sentence, and cannot sign.
    for old in (employee_v1, employer_v1):
        _as_signer()
        page = client.get(f"/sign/{old}")
        assert page.status_code == 410 and "replaced by a newer version" in page.get_data(as_text=True)
    # Version 1 is kept; version 2 says the corrected value.
    originals = db.session.scalars(
        select(Document).where(Document.request_id == request_id, Document.kind == "original").order_by(Document.id)
    ).all()
    assert [d.storage_key.rsplit("/", 1)[1] for d in originals] == ["original.pdf", "original-v2.pdf"]
    assert "Accountant" in _text(get_storage().get(originals[0].storage_key), tmp_path, "v1.pdf")
    v2 = _text(get_storage().get(originals[1].storage_key), tmp_path, "v2.pdf")
    assert "Engineer" in v2 and "Accountant" not in v2

    assert _signs(client, employee_v2, "Eva Employee").status_code == 303
    run_jobs("pdf", "mail")
    employer_v2 = _token([m for m in smtp.of_kind("party-invitation") if "hr@acme.example" in m.rcpt_tos][-1])
    assert employer_v2 != employer_v1
    assert _signs(client, employer_v2, "Anna Boss").status_code == 303
    run_jobs("pdf", "mail")
    request = db.session.get(SigningRequest, request_id)
    assert request.status == "signed"
    (signed,) = db.session.scalars(select(Document).where(Document.request_id == request_id, Document.kind == "signed"))
    sealed = _text(get_storage().get(signed.storage_key), tmp_path, "signed.pdf")
    assert "Engineer" in sealed and "Accountant" not in sealed and "Anna Boss" in sealed
    history = _panel(client, request_id)
    assert "Version 2" in history and "as agreed" in history
    events = db.session.scalars(select(Event.type).where(Event.request_id == request_id)).all()
    assert "correction.applied" in events


def test_what_cannot_be_corrected_is_refused_with_the_reason_and_changes_nothing(
    app, users, auth, client, smtp, run_jobs
):
    request_id, _employee, _employer = _declined_by_the_employer(users, client, smtp, run_jobs)

    def ask(**asked):
        staff = db.session.merge(users["staff"])
        return correct_request(
            db.session, request_id=request_id, asked=CorrectionAsked(**asked), user=staff, now=utcnow()
        )

    for asked, said in [
        ({"note": "x", "values": {"salary": "1"}}, "no column salary"),
        ({"note": "x", "values": {"email": "a@b.example"}}, "no column email"),
        ({"note": "x", "values": {"position": "y" * 2001}}, "longer than 2000"),
        ({"note": "x" * 501, "values": {"position": "y"}}, "longer than 500"),
        ({"note": "x", "emails": {"employer": "not an address"}}, "Not a valid email address"),
        ({"note": "x", "names": {"boss": "Bob"}}, "no boss party"),
        ({"note": "x", "names": {"recipient": " "}}, "1 to 300"),
    ]:
        with pytest.raises(BatchActionError) as refused:
            ask(**asked)
        assert said in str(refused.value.message), asked
        db.session.rollback()
    assert ask(note="x", values={"position": "Accountant"}).outcome == "unchanged"
    db.session.rollback()
    # Hostile text is shown as text in the panel, never as markup.
    auth.login()
    hostile = "<script>alert(1)</script>"
    assert _correct(client, request_id, **{"value-position": hostile, "note": hostile}).status_code == 200
    panel = _panel(client, request_id)
    assert hostile not in panel and "&lt;script&gt;alert(1)&lt;/script&gt;" in panel
    run_jobs("pdf", "mail")
    # A complete document cannot be corrected.
    db.session.execute(update(SigningRequest).where(SigningRequest.id == request_id).values(status="signed"))
    db.session.commit()
    with pytest.raises(BatchActionError) as done:
        ask(note="x", values={"position": "y"})
    assert done.value.status == 409 and "complete" in str(done.value.message)


def test_a_signature_is_voided_only_while_its_request_is_back_to_pending(app, users, client, smtp, run_jobs):
    request_id = _sent(users, run_jobs, html=CONTRACT, file=FILE)
    assert _sign(client, _token(smtp.received[0]), "Eva Employee").status_code == 303
    recipient = _parties(request_id)["recipient"]
    moved = move_parties(db.session, recipient.id, frm=PartyStatus.SIGNED, to=PartyStatus.WAITING, now=utcnow())
    assert not moved.won  # the request is open: no one un-signs it
    db.session.rollback()
    assert _parties(request_id)["recipient"].status == "signed"
    with pytest.raises(IllegalTransition):  # a signed party moves on its own, never among others
        move_parties(
            db.session, recipient.id, frm=[PartyStatus.SIGNED, PartyStatus.OPENED], to=PartyStatus.WAITING, now=utcnow()
        )


def test_in_a_team_that_requires_approval_a_correction_waits_for_a_manager(app, users, auth, client, smtp, run_jobs):
    request_id, _employee, _employer = _declined_by_the_employer(users, client, smtp, run_jobs)
    # From now on the team requires approval, with a manager in it.
    assert app.test_cli_runner().invoke(args=["teams", "update", "Default", "--require-approval"]).exit_code == 0
    default = db.session.scalar(select(Team).where(Team.name == "Default"))
    manager = create_user(db.session, email=MANAGER[0], password=MANAGER[1], role="manager", now=utcnow())
    add_member(db.session, team=default, user=manager, by=None, now=utcnow())
    db.session.commit()
    batch_id = db.session.get(SigningRequest, request_id).batch_id
    _as_signer()
    _login(client, "staff@example.com", "staff-password")
    panel = _panel(client, request_id)
    assert "Ask for the correction" in panel
    held = _correct(client, request_id, **{"value-position": "Engineer", "note": "Engineer, as agreed"})
    assert "waits for approval" in held.get_data(as_text=True)
    db.session.expire_all()
    assert db.session.get(SigningRequest, request_id).status == "declined"  # nothing changed yet
    (waiting,) = db.session.scalars(select(Correction).where(Correction.request_id == request_id)).all()
    assert waiting.status == "pending"
    mailed = len(smtp.received)
    run_jobs("pdf", "mail")
    assert len(smtp.received) == mailed
    # Whoever asked cannot approve it.
    _as_signer()
    page = client.get(f"/batches/{batch_id}/requests/{request_id}")
    assert "approve-correction" not in page.get_data(as_text=True)
    _as_signer()
    own = client.post(
        f"/batches/{batch_id}/corrections/{waiting.id}",
        data={"csrf_token": csrf_from(page), "decision": "approve"},
        headers={"HX-Request": "true"},
    )
    assert own.status_code == 403
    _as_signer()
    auth.logout()
    _as_signer()
    _login(client, *MANAGER)
    _as_signer()
    page = client.get(f"/batches/{batch_id}/requests/{request_id}")
    shown = page.get_data(as_text=True)
    assert "approve-correction" in shown and "Engineer, as agreed" in shown and "Accountant → Engineer" in shown
    _as_signer()
    approved = client.post(
        f"/batches/{batch_id}/corrections/{waiting.id}",
        data={"csrf_token": csrf_from(page), "decision": "approve"},
        headers={"HX-Request": "true"},
    )
    assert approved.status_code == 200, approved.get_data(as_text=True)
    db.session.expire_all()
    request = db.session.get(SigningRequest, request_id)
    assert (request.status, request.document_version) == ("pending", 2)
    run_jobs("pdf", "mail")
    assert len(smtp.of_kind("corrected")) == 2
    assert not db.session.scalars(select(FieldValue).where(FieldValue.request_id == request_id)).all()
    assert {p.status for p in db.session.scalars(select(Party).where(Party.request_id == request_id))} == {
        "invited",
        "waiting",
    }

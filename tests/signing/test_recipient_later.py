"""Routing whose first step is not the recipient's: ``[["employer"], ["recipient"]]``. The request goes
out to the employer (sent, with no invitation or link for the recipient yet), the recipient is invited with the
request's own link once the employer signed, reminders count from each one's own invitation, and the request is
signed and sealed once after the last; on real workers and real mail."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from bulksign.batches.manual_reminders import send_manual_reminders
from bulksign.batches.resend import resend_with_new_link
from bulksign.core.extensions import db
from bulksign.core.tokens import hash_token
from bulksign.documents.storage import get_storage
from bulksign.jobs.routing import advance_stalled
from bulksign.models import Document, Event, SigningRequest, utcnow
from bulksign.work.queues import get_queue
from tests.signing.test_party_reminders import tick
from tests.signing.test_routing import EMPLOYER, _mails_to, _parties, _sent, _sign, _text, _token

LATER = {**EMPLOYER, "routing": '[["employer"], ["recipient"]]'}
DAY = timedelta(days=1)


def test_the_employer_signs_first_then_the_recipient_is_invited_with_the_requests_link(
    app, users, client, smtp, run_jobs, tmp_path
):
    request_id = _sent(users, run_jobs, form=LATER)
    request = db.session.get(SigningRequest, request_id)
    # Out to the first step: the employer alone; the request is sent, the recipient has no link and no mail.
    assert [m.rcpt_tos for m in smtp.received] == [["hr@acme.example"]]
    assert (request.status, request.token_hash, request.expires_at is not None) == ("sent", None, True)
    found = _parties(request_id)
    assert (found["employer"].status, found["recipient"].status, found["recipient"].step) == ("invited", "waiting", 1)
    sent_at = request.sent_at
    # Reminders: the employer on its schedule, the recipient never before its step (automatic or by staff).
    assert tick(sent_at + 2 * DAY + timedelta(minutes=1)) == 1
    staff = db.session.merge(users["staff"])
    by_hand = send_manual_reminders(
        db.session, batch_id=request.batch_id, user=staff, now=utcnow(), selector="not_signed", force=True
    )
    db.session.commit()
    assert (by_hand.queued, by_hand.skipped) == (0, {"not_started": 1})
    resent = resend_with_new_link(db.session, request_ids=[request_id], user=staff, now=utcnow())
    db.session.commit()
    assert (resent.resent, resent.skipped) == (0, {"not_started": 1})
    run_jobs("mail")
    assert [m.kind for m in smtp.received] == ["party-invitation", "party-reminder"]

    assert _sign(client, _token(_mails_to(smtp, "hr@acme.example")[0]), "Anna Boss").status_code == 303
    assert db.session.get(SigningRequest, request_id).status == "sent"
    run_jobs("pdf", "mail")  # the next step: the employer's signature kept, the recipient invited
    (invitation,) = _mails_to(smtp, "eva@example.com")
    assert "Eva Employee" in invitation.text()
    employee = _token(invitation)
    request = db.session.get(SigningRequest, request_id)
    assert hash_token(employee) == request.token_hash  # the request's own link
    assert _parties(request_id)["recipient"].status == "invited"
    assert request.sent_at > sent_at  # the recipient's reminders count from its own invitation
    shown = _text(client.get(f"/sign/{employee}/document").data, tmp_path, "step.pdf")
    assert shown.count("Signed electronically") == 1 and "Anna Boss" in shown

    assert _sign(client, employee, "Eva Employee").status_code == 303
    assert db.session.get(SigningRequest, request_id).status == "signed"
    run_jobs("pdf", "mail")
    (signed,) = db.session.scalars(select(Document).where(Document.request_id == request_id, Document.kind == "signed"))
    text = _text(get_storage().get(signed.storage_key), tmp_path, "signed.pdf")
    assert "Eva Employee" in text and "Anna Boss" in text
    assert len(_mails_to(smtp, "eva@example.com")) == 2 and len(_mails_to(smtp, "hr@acme.example")) == 3
    statuses = db.session.scalars(
        select(Event.type).where(Event.request_id == request_id, Event.type.like("status.%")).order_by(Event.id)
    ).all()
    assert statuses.count("status.sent") == 1 and statuses[-1] == "status.signed"


def test_a_lost_job_inviting_the_recipient_is_queued_again_by_the_reconciler(app, users, client, smtp, run_jobs):
    request_id = _sent(users, run_jobs, form=LATER)
    _sign(client, _token(smtp.received[0]), "Anna Boss")
    get_queue("pdf").empty()  # Redis lost the next step's job
    assert advance_stalled(now=utcnow() + timedelta(minutes=10)) == 1
    run_jobs("pdf", "mail")
    assert _parties(request_id)["recipient"].status == "invited"
    assert len(_mails_to(smtp, "eva@example.com")) == 1

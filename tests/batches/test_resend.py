"""Resend with a new link (the old link dies at once) and address corrections, through the real mail worker."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from flask import current_app
from sqlalchemy import select, update

from bulksign.batches.address_changes import change_email
from bulksign.batches.expiry import expire_due
from bulksign.batches.progress import BatchActionError
from bulksign.batches.reminders import queue_due_reminders
from bulksign.batches.resend import resend_with_new_link
from bulksign.batches.states import transition
from bulksign.core.extensions import db
from bulksign.core.tokens import hash_token
from bulksign.models import Batch, Event, User, utcnow
from bulksign.models.status import Status
from bulksign.signing.links import current_token, find_by_token
from bulksign.work.pipeline import enqueue_renders, enqueue_sends
from tests.support.batches import make_batch, request_ids
from tests.support.clock import NOW
from tests.support.waiting import mails, request, sent_batch
from tests.support.web import csrf_from

DAY = timedelta(days=1)


def _token(request_id):
    return current_token(request(request_id), secret=current_app.config["SECRET_KEY"])


def _resend(user, ids, now, **kwargs):
    result = resend_with_new_link(db.session, request_ids=ids, user=user, now=now, **kwargs)
    db.session.commit()
    enqueue_sends(result.mail_ids)
    return result


def _link_in(mail) -> str:
    return re.search(r"/sign/([A-Za-z0-9_-]+)", mail.text()).group(1)


def test_resend_kills_the_old_link_at_once_and_a_new_invitation_goes_out(app, users, smtp, run_jobs):
    _, (rid,) = sent_batch(user=users["staff"], sent_at=NOW)
    old = _token(rid)
    result = _resend(users["staff"], [rid], NOW + 2 * DAY)
    assert (result.resent, result.skipped) == (1, {})
    assert find_by_token(db.session, old) is None
    assert request(rid).status == "generated"
    run_jobs("mail")
    (invitation,) = smtp.of_kind("invitation")
    new = _link_in(invitation)
    assert new != old and hash_token(new) == request(rid).token_hash
    req = request(rid)
    assert req.status == "sent" and req.sent_at > NOW + DAY and req.expires_at == req.sent_at + 7 * DAY
    assert invitation.message_id == f"<invitation-{rid}-{req.token_nonce[:12]}@bulksign.local>"


def test_an_expired_request_can_be_resent_with_an_extended_deadline(app, users, smtp, run_jobs, client):
    _, (rid,) = sent_batch(user=users["staff"], sent_at=NOW)
    expire_due(db.session, now=NOW + 7 * DAY)
    db.session.commit()
    assert request(rid).status == "expired"
    resent_at = utcnow()
    assert _resend(users["staff"], [rid], resent_at, extend_days=14).resent == 1
    run_jobs("mail")
    req = request(rid)
    # The old deadline has passed: the extra days count from the resend.
    assert req.status == "sent" and req.expires_at == resent_at + 14 * DAY
    assert client.get(f"/sign/{_link_in(smtp.of_kind('invitation')[-1])}").status_code == 200


def test_a_resend_past_the_batchs_fixed_deadline_needs_extra_days(app, users):
    _, (rid,) = sent_batch(user=users["staff"], sent_at=NOW, deadline_at=NOW + 3 * DAY)
    skipped = resend_with_new_link(db.session, request_ids=[rid], user=users["staff"], now=NOW + 4 * DAY)
    assert (skipped.resent, skipped.skipped) == (0, {"deadline_passed": 1})
    extended = resend_with_new_link(
        db.session, request_ids=[rid], user=users["staff"], now=NOW + 4 * DAY, extend_days=5
    )
    assert extended.resent == 1 and request(rid).deadline_days == 5


def test_resend_skips_what_cannot_get_a_new_link_and_says_why(app, users):
    _, ids = sent_batch(user=users["staff"], sent_at=NOW, recipients=3)
    transition(db.session, ids[0], frm="sent", to="opened", now=NOW)
    transition(db.session, ids[0], frm="opened", to="signed", now=NOW)
    transition(db.session, ids[1], frm="sent", to="cancelled", now=NOW)
    db.session.commit()
    result = resend_with_new_link(db.session, request_ids=[*ids, 424242], user=users["staff"], now=NOW + DAY)
    assert (result.resent, result.skipped) == (1, {"signed": 1, "cancelled": 1, "not_found": 1})
    with pytest.raises(BatchActionError):
        resend_with_new_link(db.session, request_ids=ids, user=users["staff"], now=NOW, extend_days=0)


def test_a_cancelled_batch_gets_no_new_links(app, users):
    from bulksign.batches.progress import cancel_batch

    batch_id, (rid,) = sent_batch(user=users["staff"], sent_at=NOW)
    transition(db.session, rid, frm="sent", to="bounced", now=NOW)
    cancel_batch(db.session, batch_id=batch_id, user=users["staff"], now=NOW)
    result = resend_with_new_link(db.session, request_ids=[rid], user=users["staff"], now=NOW + DAY)
    assert (result.resent, result.skipped) == (0, {"cancelled": 1})


def test_a_double_click_resends_once(app, users):
    _, (rid,) = sent_batch(user=users["staff"], sent_at=NOW)
    first = resend_with_new_link(db.session, request_ids=[rid], user=users["staff"], now=NOW + DAY)
    second = resend_with_new_link(db.session, request_ids=[rid], user=users["staff"], now=NOW + DAY)
    db.session.commit()
    assert (first.resent, second.resent, second.skipped) == (1, 0, {"not_sent": 1})
    assert len(mails("invitation")) == 1


def test_reminders_start_afresh_for_the_new_link(app, users):
    _, (rid,) = sent_batch(user=users["staff"], sent_at=NOW)
    assert queue_due_reminders(db.session, now=NOW + 2 * DAY).queued == 1
    resend_with_new_link(db.session, request_ids=[rid], user=users["staff"], now=NOW + 3 * DAY)
    assert mails("reminder")[0].status == "cancelled"
    # As the send job does for the new invitation:
    transition(db.session, rid, frm="generated", to="sending", now=NOW + 3 * DAY)
    transition(db.session, rid, frm="sending", to="sent", now=NOW + 3 * DAY, sent_at=NOW + 3 * DAY)
    db.session.commit()
    assert queue_due_reminders(db.session, now=NOW + 5 * DAY).queued == 1
    db.session.commit()
    old, new = mails("reminder")
    assert old.message_id != new.message_id and request(rid).token_nonce[:12] in new.message_id


def test_bounced_then_address_corrected_then_resent_reaches_the_new_address(app, users, smtp, run_jobs):
    staff_id = users["staff"].id
    batch = make_batch(user=users["staff"], now=NOW, recipients=[("typo@exmaple.com", "Ann")])
    smtp.handler.reject_recipients["typo@exmaple.com"] = "550 5.1.1 No such user"
    enqueue_renders(request_ids(batch))
    run_jobs("pdf", "mail")
    (rid,) = request_ids(batch)
    assert request(rid).status == "bounced"
    staff = db.session.get(User, staff_id)
    change = change_email(db.session, request_id=rid, new_email=" ann@example.com ", user=staff, now=NOW + DAY)
    db.session.commit()
    assert (change.old_email, change.new_email, change.changed) == ("typo@exmaple.com", "ann@example.com", True)
    event = db.session.scalar(select(Event).where(Event.type == "email.changed"))
    assert event.details == {"role": "recipient", "old": "typo@exmaple.com", "new": "ann@example.com"}
    assert event.actor == f"user:{staff_id}"
    assert _resend(staff, [rid], NOW + DAY).resent == 1
    run_jobs("mail")
    (mail,) = smtp.to("ann@example.com")
    assert request(rid).status == "sent" and hash_token(_link_in(mail)) == request(rid).token_hash
    assert db.session.get(Batch, batch).status == "awaiting_signatures"


def test_an_address_change_is_validated_and_refused_on_closed_records(app, users):
    _, (rid,) = sent_batch(user=users["staff"], sent_at=NOW)
    for bad in ("not an email", "a@b", ""):
        with pytest.raises(BatchActionError) as caught:
            change_email(db.session, request_id=rid, new_email=bad, user=users["staff"], now=NOW)
        assert caught.value.status == 400 and "valid email" in caught.value.message
    with pytest.raises(BatchActionError) as missing:
        change_email(db.session, request_id=999999, new_email="x@example.com", user=users["staff"], now=NOW)
    assert missing.value.status == 404
    transition(db.session, rid, frm="sent", to="opened", now=NOW)
    transition(db.session, rid, frm="opened", to="signed", now=NOW)
    with pytest.raises(BatchActionError) as closed:
        change_email(db.session, request_id=rid, new_email="x@example.com", user=users["staff"], now=NOW)
    assert closed.value.status == 409


def test_only_the_owner_or_an_admin_may_resend(app, users):
    _, (rid,) = sent_batch(user=users["admin"], sent_at=NOW)
    with pytest.raises(BatchActionError) as denied:
        resend_with_new_link(db.session, request_ids=[rid], user=users["staff"], now=NOW + DAY)
    assert denied.value.status == 403
    db.session.execute(update(Batch).values(created_by_id=users["staff"].id))
    assert resend_with_new_link(db.session, request_ids=[rid], user=users["staff"], now=NOW + DAY).resent == 1
    assert request(rid).status == Status.GENERATED


# The API and the staff forms


def _api_key(user):
    from bulksign.people.users import create_api_key

    secret = create_api_key(db.session, user=user, name="erp", now=NOW).secret
    db.session.commit()
    return {"Authorization": f"Bearer {secret}"}


def test_api_resend_answers_202_and_the_old_link_dies(app, users, client):
    _, (rid,) = sent_batch(user=users["staff"], sent_at=NOW)
    old, headers = _token(rid), _api_key(users["staff"])
    response = client.post(f"/api/v1/requests/{rid}/resend", json={"extend_days": 10}, headers=headers)
    body = response.get_json()
    assert response.status_code == 202 and (body["resent"], body["request_id"], body["status"]) == (1, rid, "generated")
    assert datetime.fromisoformat(body["expires_at"]) == request(rid).expires_at
    assert find_by_token(db.session, old) is None and request(rid).deadline_days == 10
    again = client.post(f"/api/v1/requests/{rid}/resend", headers=headers)
    assert again.status_code == 409 and again.get_json()["error"]["details"]["reason"] == "not_sent"
    assert client.post("/api/v1/requests/999999/resend", headers=headers).status_code == 404
    for bad in ({"extend_days": 0}, {"extend_days": "7"}, {"extend_days": 1000}, [1]):
        assert client.post(f"/api/v1/requests/{rid}/resend", json=bad, headers=headers).status_code == 400


def test_api_corrects_an_address(app, users, client):
    _, (rid,) = sent_batch(user=users["staff"], sent_at=NOW)
    headers = _api_key(users["staff"])
    bad = client.post(f"/api/v1/requests/{rid}/email", json={"email": "nope"}, headers=headers)
    assert bad.status_code == 422 and "valid email" in bad.get_json()["error"]["message"]
    ok = client.post(f"/api/v1/requests/{rid}/email", json={"email": "new@example.com"}, headers=headers)
    assert ok.status_code == 200 and ok.get_json()["changed"] and request(rid).email == "new@example.com"


def test_staff_correct_an_address_then_resend_from_the_batch_page(app, users, client, auth):
    batch_id, (rid,) = sent_batch(user=users["staff"], sent_at=NOW)
    old = _token(rid)
    auth.login()
    token = csrf_from(client.get(f"/batches/{batch_id}"))
    changed = client.post(
        f"/requests/{rid}/email",
        data={"email": "fixed@example.com", "csrf_token": token},
        headers={"HX-Request": "true"},
    )
    assert changed.status_code == 200 and "fixed@example.com" in changed.get_data(as_text=True)
    invalid = client.post(
        f"/requests/{rid}/email", data={"email": "fixed@", "csrf_token": token}, headers={"HX-Request": "true"}
    )
    assert invalid.status_code == 400 and "valid email" in invalid.get_data(as_text=True)
    resent = client.post(
        f"/batches/{batch_id}/resend", data={"request_ids": [str(rid)], "extend_days": "3", "csrf_token": token}
    )
    assert resent.status_code == 302
    assert "1 new link sent; the old link no longer works." in client.get(f"/batches/{batch_id}").get_data(as_text=True)
    assert find_by_token(db.session, old) is None
    (invitation,) = mails("invitation")
    assert invitation.to_email == "fixed@example.com"
    assert client.post(f"/requests/{rid}/resend", data={"extend_days": "x", "csrf_token": token}).status_code == 400


def test_extra_days_extend_the_deadline_and_never_shorten_it(app, users, smtp, run_jobs, client, auth):
    batch_id, (rid,) = sent_batch(user=users["staff"], sent_at=utcnow() - DAY, deadline_at=utcnow() + 6 * DAY)
    db.session.execute(update(Batch).where(Batch.id == batch_id).values(timezone="Europe/Berlin"))
    db.session.commit()
    old_deadline = request(rid).expires_at
    auth.login()
    token = csrf_from(client.get(f"/batches/{batch_id}"))
    answer = client.post(
        f"/batches/{batch_id}/resend",
        data={"request_ids": [str(rid)], "extend_days": "3", "csrf_token": token},
        headers={"HX-Request": "true"},
    )
    new_deadline = old_deadline + 3 * DAY  # from the batch's deadline, not from today
    assert request(rid).expires_at == new_deadline
    shown = new_deadline.astimezone(ZoneInfo("Europe/Berlin"))
    said = f"New deadline: {shown.day} {shown:%B %Y, %H:%M} (Europe/Berlin)."
    assert said in answer.get_data(as_text=True)
    run_jobs("mail")
    assert request(rid).status == "sent" and request(rid).expires_at == new_deadline
    assert f"{shown.day} {shown:%B %Y, %H:%M} (Europe/Berlin)" in smtp.of_kind("invitation")[-1].text()


def test_a_resend_without_extra_days_keeps_an_earlier_extension(app, users):
    _, (rid,) = sent_batch(user=users["staff"], sent_at=NOW, deadline_at=NOW + 3 * DAY)
    first = resend_with_new_link(db.session, request_ids=[rid], user=users["staff"], now=NOW + DAY, extend_days=10)
    assert first.deadlines == (NOW + 13 * DAY, NOW + 13 * DAY)
    transition(db.session, rid, frm="generated", to="sending", now=NOW + DAY)
    transition(db.session, rid, frm="sending", to="sent", now=NOW + DAY, sent_at=NOW + DAY)
    resend_with_new_link(db.session, request_ids=[rid], user=users["staff"], now=NOW + 2 * DAY)
    assert request(rid).expires_at == NOW + 13 * DAY


def test_a_declined_recipient_can_be_invited_again(app, users, smtp, run_jobs, client):
    _, (rid,) = sent_batch(user=users["staff"], sent_at=utcnow())
    transition(db.session, rid, frm="sent", to="opened", now=utcnow())
    transition(
        db.session, rid, frm="opened", to="declined", now=utcnow(), declined_at=utcnow(), decline_reason="Wrong salary"
    )
    db.session.commit()
    assert _resend(users["staff"], [rid], utcnow()).resent == 1
    run_jobs("mail")
    req = request(rid)
    assert req.status == "sent" and req.declined_at is None and req.decline_reason is None
    page = client.get(f"/sign/{_link_in(smtp.of_kind('invitation')[-1])}")
    assert page.status_code == 200 and 'id="sign-form"' in page.get_data(as_text=True)


def test_a_russian_batch_invites_in_russian_with_the_deadline_in_its_time_zone(app, users, smtp, run_jobs):
    _, (rid,) = sent_batch(user=users["staff"], sent_at=utcnow(), language="ru", timezone="Europe/Moscow")
    _resend(users["staff"], [rid], utcnow())
    run_jobs("mail")
    (invitation,) = smtp.of_kind("invitation")
    deadline = request(rid).expires_at.astimezone(ZoneInfo("Europe/Moscow"))
    assert invitation.subject.startswith("Пожалуйста, подпишите:")
    assert "Здравствуйте" in invitation.text() and f"{deadline:%H:%M} (Europe/Moscow)" in invitation.text()

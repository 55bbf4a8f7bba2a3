"""A request staff cancel keeps its link, which says the sender cancelled it (and why), and every party already
invited is told by a short mail with the sender's reason: from the batch page (one request, with the confirmation
step's reason) and from the API (a whole batch, a countersigner told once for all their documents) — on real
workers and real mail (aiosmtpd)."""

from __future__ import annotations

import re

from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.models import OutgoingMail, SigningRequest, utcnow
from bulksign.people.users import create_api_key
from bulksign.signing.parties import add_recipients
from bulksign.work.pipeline import enqueue_renders
from tests.signing.test_countersign import HR, TWO_ROWS, _digest_token, _ready
from tests.support.batches import make_batch, request_ids
from tests.support.web import csrf_from

REASON = "The salary in it was wrong; a corrected contract follows."


def _token(mail) -> str:
    return re.search(r"/sign/([A-Za-z0-9_-]+)", mail.text()).group(1)


def test_a_request_cancelled_on_the_batch_page_says_so_on_its_link_and_its_recipient_is_told_why(
    app, users, client, auth, smtp, run_jobs
):
    batch_id = make_batch(user=users["staff"], now=utcnow(), recipients=2)
    add_recipients(db.session, batch_id=batch_id, now=utcnow())  # as batch creation gives every request its party
    db.session.commit()
    enqueue_renders(request_ids(batch_id))
    run_jobs("pdf", "mail")
    first, second = request_ids(batch_id)
    (invitation,) = smtp.to("person0@example.com")
    token = _token(invitation)

    auth.login()
    page = f"/batches/{batch_id}"
    form = {"csrf_token": csrf_from(client.get(page)), "action": "cancel", "request_ids": [str(first)]}
    asked = client.post(f"/batches/{batch_id}/actions", data=form).get_data(as_text=True)
    assert "Cancel 1 request?" in asked and 'name="reason"' in asked  # the confirmation asks for a reason
    done = client.post(
        f"/batches/{batch_id}/actions", data={**form, "reason": REASON, "confirmed": "1"}, follow_redirects=True
    )
    assert "1 request cancelled" in done.get_data(as_text=True)
    run_jobs("mail")

    shown = client.get(f"/sign/{token}")
    words = shown.get_data(as_text=True)
    assert shown.status_code == 410 and "This request was withdrawn" in words and REASON in words
    assert "not valid" not in words
    (notice,) = smtp.of_kind("cancelled")
    assert notice.rcpt_tos == ["person0@example.com"]
    assert notice.subject == "Cancelled: Employment contract"
    assert REASON in notice.text() and "nothing to sign" in notice.text()
    assert db.session.get(SigningRequest, second).status == "sent" and not smtp.to("person1@example.com")[1:]


def test_a_batch_cancelled_over_the_api_tells_each_invited_party_once_with_the_reason(
    app, users, client, smtp, run_jobs
):
    # Both employees signed; the employer (one countersigner for both documents) has their digest.
    ids, digest = _ready(users, client, smtp, run_jobs, signed=2, rows=TWO_ROWS)
    secret = create_api_key(db.session, user=db.session.merge(users["staff"]), name="t", now=utcnow()).secret
    db.session.commit()
    batch_id = db.session.get(SigningRequest, ids[0]).batch_id
    answer = client.post(
        f"/api/v1/batches/{batch_id}/cancel", json={"reason": REASON}, headers={"Authorization": f"Bearer {secret}"}
    )
    assert answer.status_code == 202 and answer.get_json()["cancelled"] == 2, answer.get_json()
    run_jobs("mail")

    notices = smtp.of_kind("cancelled", "cancelled-countersign")
    assert sorted(m.rcpt_tos[0] for m in notices) == sorted(["e1@example.com", "e2@example.com", HR])
    (employer,) = [m for m in notices if HR in m.rcpt_tos]
    assert "2 documents of “Employment contract”" in employer.text() and REASON in employer.text()
    for notice in notices:
        assert REASON in notice.text()
    (invitation,) = [m for m in smtp.of_kind("invitation") if "e1@example.com" in m.rcpt_tos]
    page = client.get(f"/sign/{_token(invitation)}")
    assert page.status_code == 410 and REASON in page.get_data(as_text=True)
    assert _digest_token(smtp.of_kind("countersign-digest")[0]) == digest
    # A second cancel finds nothing open: nobody is told twice.
    again = client.post(f"/api/v1/batches/{batch_id}/cancel", headers={"Authorization": f"Bearer {secret}"})
    assert again.status_code == 202 and again.get_json()["cancelled"] == 0
    run_jobs("mail")
    kinds = db.session.scalars(select(OutgoingMail.kind).where(OutgoingMail.kind.like("cancel%"))).all()
    assert len(kinds) == 3

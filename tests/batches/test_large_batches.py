"""Set-based staff actions on a batch bigger than one SQL statement's parameter limit (65,535).

The rows are inserted with one INSERT ... SELECT: the point is what cancel and retry do with them,
not how they got there.
"""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, text

from bulksign.batches import counts as batch_counts
from bulksign.core.extensions import db
from bulksign.models import Batch, OutgoingMail, SigningRequest
from bulksign.people.users import create_api_key
from tests.support.batches import make_batch
from tests.support.clock import NOW
from tests.support.web import csrf_from

pytestmark = pytest.mark.slow(seconds=35)

#: The batch size the product promises, well past 65,535 bind parameters (the limit of one PostgreSQL statement).
BIG = 100_000
#: Just past that limit: enough for the paths the 100,000-row test does not take, in less time.
OVER_LIMIT = 70_000


def _big_batch(owner, *, status: str, count: int = BIG) -> int:
    """A batch of ``count`` requests in ``status``, the first thousand with a queued invitation."""
    batch_id = make_batch(now=NOW, user=owner, recipients=0)
    db.session.execute(
        text(
            "INSERT INTO signing_requests (batch_id, row_number, email, name, data, status, status_changed_at,"
            " created_at, attempts, reminder_count)"
            " SELECT :batch, n + 1, 'person' || n || '@example.com', 'Person ' || n, '{}', :status, :now, :now, 0, 0"
            " FROM generate_series(1, :count) AS n"
        ),
        {"batch": batch_id, "status": status, "now": NOW, "count": count},
    )
    db.session.execute(
        text(
            "INSERT INTO outgoing_mails (request_id, batch_id, kind, message_id, to_email, subject, status, created_at,"
            " attempts, attachments)"
            " SELECT id, batch_id, 'invitation', '<m' || id || '@bulksign>', email, '', 'queued', :now, 0, '[]'"
            " FROM signing_requests"
            " WHERE batch_id = :batch ORDER BY id LIMIT 1000"
        ),
        {"batch": batch_id, "now": NOW},
    )
    batch_counts.rebuild(db.session, batch_ids=[batch_id])
    db.session.commit()
    return batch_id


def _statuses(batch_id: int) -> dict[str, int]:
    db.session.expire_all()
    return dict(
        db.session.execute(
            select(SigningRequest.status, func.count())
            .where(SigningRequest.batch_id == batch_id)
            .group_by(SigningRequest.status)
        ).all()
    )


def _api(users):
    secret = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    return {"Authorization": f"Bearer {secret}"}


def _staff_post(client, auth, batch_id: int, route: str, **form):
    """A staff user's form post from the batch page, the question it asks answered yes; the redirect back to it."""
    auth.login()
    page = client.get(f"/batches/{batch_id}")
    response = client.post(
        f"/batches/{batch_id}/{route}", data={**form, "confirmed": "1", "csrf_token": csrf_from(page)}
    )
    assert response.status_code == 302
    return response


def test_the_api_cancels_a_batch_of_100000_open_requests(client, users, run_jobs):
    batch_id = _big_batch(users["staff"], status="sent")
    response = client.post(f"/api/v1/batches/{batch_id}/cancel", headers=_api(users))
    assert response.status_code == 202, response.get_data(as_text=True)
    assert response.json["status"] == "cancelled" and response.json["in_background"] == BIG
    run_jobs("default")
    assert _statuses(batch_id) == {"cancelled": BIG}
    assert batch_counts.counters(db.session, [batch_id])[batch_id]["cancelled"] == BIG
    assert set(db.session.scalars(select(OutgoingMail.status))) == {"cancelled"}


def test_the_web_cancels_a_batch_of_more_open_requests_than_one_statement_takes(client, auth, users, run_jobs):
    batch_id = _big_batch(users["staff"], status="pending", count=OVER_LIMIT)
    response = _staff_post(client, auth, batch_id, "actions", action="cancel_batch")
    assert "in the background" in client.get(response.headers["Location"]).get_data(as_text=True)
    assert db.session.get(Batch, batch_id).status == "cancelled"  # at once; the job stops the requests
    run_jobs("default")
    assert _statuses(batch_id) == {"cancelled": OVER_LIMIT}


def test_cancel_all_matching_reaches_every_request_past_one_statements_limit(client, auth, users, run_jobs):
    batch_id = _big_batch(users["staff"], status="sent", count=OVER_LIMIT)
    _staff_post(client, auth, batch_id, "actions", action="cancel", select_all="1", status="", q="")
    run_jobs("default")
    assert _statuses(batch_id) == {"cancelled": OVER_LIMIT}


def test_retry_failed_takes_more_request_ids_than_one_statement_takes(client, users, run_jobs):
    # Few of them failed: the point is the id list, not rendering thousands of documents again.
    batch_id = _big_batch(users["staff"], status="sent", count=OVER_LIMIT)
    ids = list(
        db.session.scalars(
            select(SigningRequest.id).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
        )
    )
    db.session.execute(text("UPDATE signing_requests SET status = 'failed' WHERE id <= :top"), {"top": ids[99]})
    batch_counts.rebuild(db.session, batch_ids=[batch_id])
    db.session.commit()
    response = client.post(f"/api/v1/batches/{batch_id}/retry-failed", json={"request_ids": ids}, headers=_api(users))
    assert response.status_code == 202, response.get_data(as_text=True)
    assert response.json["in_background"] == OVER_LIMIT
    run_jobs("default")
    assert _statuses(batch_id) == {"pending": 100, "sent": OVER_LIMIT - 100}


def test_the_api_reminds_more_listed_requests_than_one_statement_takes(client, users, run_jobs):
    batch_id = _big_batch(users["staff"], status="sent", count=OVER_LIMIT)
    ids = list(
        db.session.scalars(
            select(SigningRequest.id).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
        )
    )
    # A hundred were invited three days ago; the rest just now, too soon for a reminder.
    db.session.execute(
        text(
            "UPDATE signing_requests SET sent_at = now() - CASE WHEN id <= :top"
            " THEN interval '3 days' ELSE interval '0' END WHERE batch_id = :batch"
        ),
        {"top": ids[99], "batch": batch_id},
    )
    db.session.commit()
    response = client.post(f"/api/v1/batches/{batch_id}/remind", json={"request_ids": ids}, headers=_api(users))
    assert response.status_code == 202 and response.json["in_background"] == OVER_LIMIT
    run_jobs("default")
    reminded = db.session.scalars(select(OutgoingMail.request_id).where(OutgoingMail.kind == "reminder"))
    assert sorted(reminded) == ids[:100]


def test_remind_all_not_signed_on_a_big_batch_runs_as_a_job(client, auth, users, run_jobs):
    batch_id = _big_batch(users["staff"], status="sent", count=1500)
    db.session.execute(
        text("UPDATE signing_requests SET sent_at = now() - interval '3 days' WHERE batch_id = :b"), {"b": batch_id}
    )
    db.session.commit()
    response = _staff_post(client, auth, batch_id, "remind", selector="not_signed")
    assert "1500 recipients in the background" in client.get(response.headers["Location"]).get_data(as_text=True)
    assert db.session.scalar(select(func.count()).select_from(OutgoingMail).where(OutgoingMail.kind == "reminder")) == 0
    run_jobs("default")
    assert (
        db.session.scalar(select(func.count()).select_from(OutgoingMail).where(OutgoingMail.kind == "reminder")) == 1500
    )


def test_a_stopped_batch_renders_and_sends_nothing_more_while_its_cancel_job_waits(app, users, smtp, run_jobs):
    from bulksign.batches.progress import stop_batch
    from bulksign.models import Document, User, utcnow
    from bulksign.work.pipeline import enqueue_renders
    from tests.support.batches import request_ids, requests_of

    staff_id = users["staff"].id
    rendered = make_batch(now=NOW, user=users["staff"], recipients=2, name="Rendered")
    enqueue_renders(request_ids(rendered))
    run_jobs("pdf")  # invitations queued, not sent yet
    staff = db.session.get(User, staff_id)
    pending = make_batch(now=NOW, user=staff, recipients=2, name="Pending")
    enqueue_renders(request_ids(pending))
    for batch_id in (rendered, pending):  # as a big cancel does, before its job reaches the requests
        stop_batch(db.session, batch_id=batch_id, user=staff, now=utcnow())
    db.session.commit()
    run_jobs("pdf", "mail")
    assert [r.status for r in requests_of(rendered) + requests_of(pending)] == ["cancelled"] * 4
    assert smtp.received == []
    assert (
        db.session.scalar(
            select(func.count())
            .select_from(Document)
            .join(SigningRequest, SigningRequest.id == Document.request_id)
            .where(SigningRequest.batch_id == pending)
        )
        == 0
    )

"""A purged request as its readers meet it: the API answers with ``purged_at`` and no personal fields, its files are
gone (410, not a storage error), the recipient's link says the document is no longer available, and staff cannot
send it again."""

from __future__ import annotations

from datetime import timedelta

from bulksign.batches import retention
from bulksign.batches.resend import resend_with_new_link
from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.people.users import create_api_key
from bulksign.signing.recipient_actions import decline, open_request
from tests.support.clock import NOW
from tests.support.signing_requests import make_sent_request

LATER = NOW + timedelta(days=120)


def _purged_declined(owner):
    r = make_sent_request(now=NOW, owner=owner, name="Anna Berg", email="anna@example.com")
    open_request(db.session, request_id=r.id, now=NOW, ip="203.0.113.5", user_agent="Phone/1")
    decline(db.session, request_id=r.id, now=NOW, reason="Wrong salary", ip="203.0.113.5", user_agent="Phone/1")
    assert (
        retention.purge_due(
            db.session, storage=get_storage(), now=LATER, on_page=db.session.commit, upload_hours=24
        ).requests
        == 1
    )
    return r


def test_the_api_answers_a_purged_request_without_its_person_and_its_files_as_gone(app, client, users):
    secret = create_api_key(db.session, user=users["staff"], name="integration", now=NOW).secret
    headers = {"Authorization": f"Bearer {secret}"}
    r = _purged_declined(users["staff"])

    body = client.get(f"/api/v1/requests/{r.id}", headers=headers).json
    assert body["purged_at"].startswith(LATER.date().isoformat()) and body["status"] == "declined"
    assert (body["email"], body["name"], body["decline_reason"], body["error"]) == (None, None, None, None)
    assert body["declined_at"] and body["document"]["sha256"]  # the times and the fingerprint stay
    listed = client.get(f"/api/v1/batches/{r.batch_id}/requests", headers=headers).json["items"]
    assert [(i["email"], i["purged_at"] is not None) for i in listed] == [(None, True)]
    gone = client.get(f"/api/v1/requests/{r.id}/document", headers=headers)
    assert gone.status_code == 410 and gone.json["error"]["code"] == "purged"


def test_the_recipient_s_link_says_the_document_is_no_longer_available(app, client, users):
    r = _purged_declined(users["staff"])
    for path in (f"/sign/{r.token}", f"/sign/{r.token}/document"):
        page = client.get(path)
        assert page.status_code == 410, path
        html = page.get_data(as_text=True)
        assert "no longer available" in html and "Anna Berg" not in html


def test_staff_cannot_send_a_purged_request_again(app, users):
    r = _purged_declined(users["staff"])
    result = resend_with_new_link(db.session, request_ids=[r.id], user=users["staff"], now=LATER)
    assert result.skipped == {"purged": 1}


def test_the_batch_page_its_table_its_panel_and_its_csv_show_a_purged_request_without_its_person(
    app, client, auth, users
):
    r = _purged_declined(users["staff"])
    auth.login()
    for path in (
        f"/batches/{r.batch_id}",
        f"/batches/{r.batch_id}/requests",
        f"/batches/{r.batch_id}/requests/{r.id}",
        f"/batches/{r.batch_id}/export.csv",
    ):
        page = client.get(path)
        assert page.status_code == 200, path
        body = page.get_data(as_text=True)
        assert "anna@example.com" not in body and "Anna Berg" not in body and "Wrong salary" not in body, path
    panel = client.get(f"/batches/{r.batch_id}/requests/{r.id}").get_data(as_text=True)
    assert "deleted on" in panel and "documents and personal data deleted (retention or erasure)" in panel
    assert "resend with a new link" not in panel  # nothing is left to send again

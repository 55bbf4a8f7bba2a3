"""What a purge and an erasure reach beyond the requests: the uploaded recipients file (and its errors CSV) and the
outgoing webhook deliveries that named the person, delivered ones emptied and pending ones sent without them."""

from __future__ import annotations

import io
import json
import re
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from flask import current_app
from sqlalchemy import select, update

from bulksign.batches import retention
from bulksign.batches.erasure import erase_person
from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.documents.storage import get_storage
from bulksign.integrations import webhooks_out
from bulksign.jobs.webhooks import dispatch
from bulksign.models import Team, WebhookDelivery, utcnow
from bulksign.people.users import create_api_key
from bulksign.signing.field_entry import FilledForm, Upload
from tests.signing.test_field_entry import CONTRACT, FIELDS, a_png, sign_filled
from tests.support.clock import NOW
from tests.support.signing_requests import make_sent_request
from tests.support.web import csrf_from

DAY = timedelta(days=1)
#: Anna and Ivan are mailed; Bob's row is left out for its address, Olga's for her empty salary.
FILE = (
    "email,name,salary\n"
    "anna@example.com,Anna Karenina,100\n"
    "not-an-address,Bob Builder,200\n"
    "ivan@example.com,Иван Петров,300\n"
    "olga@example.com,Olga Sergeevna,\n"
).encode()


def _validate(client, template_id: int, data: bytes = FILE):
    """Check a file on the new-batch page: (the page, the stored upload's id)."""
    page = client.get(f"/batches/new?template_id={template_id}")
    preview = client.post(
        "/batches/new/validate",
        content_type="multipart/form-data",
        data={"csrf_token": csrf_from(page), "template_id": template_id, "file": (io.BytesIO(data), "people.csv")},
    )
    return page, re.search(r'name="upload_id" value="([0-9a-f]+)"', preview.get_data(as_text=True)).group(1)


def _create(client, template_id: int, data: bytes = FILE) -> tuple[int, str]:
    """A batch made on the new-batch page from ``data``: (its id, its upload's id)."""
    page, upload_id = _validate(client, template_id, data)
    token = re.search(r'name="form_token" value="([0-9a-f]+)"', page.get_data(as_text=True)).group(1)
    made = client.post(
        "/batches/new", data={"csrf_token": csrf_from(page), "upload_id": upload_id, "form_token": token}
    )
    assert made.status_code == 303, made.get_data(as_text=True)[:500]
    return int(made.headers["Location"].rsplit("/", 1)[1]), upload_id


def purge(now):
    return retention.purge_due(
        db.session,
        storage=get_storage(),
        now=now,
        on_page=db.session.commit,
        upload_hours=current_app.config["UPLOAD_KEEP_HOURS"],
    )


def _stored(upload_id: str) -> bytes | None:
    key = f"uploads/{upload_id}/file"
    return get_storage().get(key) if get_storage().exists(key) else None


@pytest.fixture
def template_id(users, auth):
    saved = create_template(
        db.session, name="Pay", html="<p>{{ name }}: {{ salary }}</p>", user=users["staff"], now=utcnow()
    )
    db.session.commit()
    auth.login()
    return saved.template.id


def test_a_batch_s_purge_deletes_its_uploaded_file_and_the_errors_csv_of_its_left_out_rows(app, client, template_id):
    batch_id, upload_id = _create(client, template_id)
    assert b"Bob Builder" in _stored(upload_id)
    assert "Bob Builder" in client.get(f"/batches/uploads/{upload_id}/errors.csv").get_data(as_text=True)

    # Bob's and Olga's rows were left out at creation: they go the batch's unsigned days after it (90).
    purge(utcnow() + 89 * DAY)
    assert _stored(upload_id) is not None
    result = purge(utcnow() + 91 * DAY)

    assert result.skipped_rows == 2 and result.uploads == 1
    assert _stored(upload_id) is None
    gone = client.get(f"/batches/uploads/{upload_id}/errors.csv")
    assert gone.status_code == 410 and "Bob Builder" not in gone.get_data(as_text=True)


def test_an_upload_never_made_into_a_batch_expires_after_its_hours(app, client, template_id):
    assert app.config["UPLOAD_KEEP_HOURS"] == 24
    _, upload_id = _validate(client, template_id)
    later = utcnow()

    purge(later + timedelta(hours=23))
    assert b"Olga Sergeevna" in _stored(upload_id)
    assert client.get(f"/batches/uploads/{upload_id}/errors.csv").status_code == 200

    result = purge(later + timedelta(hours=25))
    assert result.uploads == 1 and _stored(upload_id) is None
    gone = client.get(f"/batches/uploads/{upload_id}/errors.csv")
    assert gone.status_code == 410 and "Olga" not in gone.get_data(as_text=True)


def test_an_erasure_deletes_every_uploaded_file_that_holds_the_person_and_says_so(app, client, template_id):
    _, made_into_batch = _create(client, template_id)
    _, waiting_with_olga = _validate(client, template_id)  # Olga is a left-out row of it: its errors CSV names her
    _, without_olga = _validate(client, template_id, b"email,name,salary\nanna@example.com,Anna,100\n")
    assert "olga@example.com" in client.get(f"/batches/uploads/{waiting_with_olga}/errors.csv").get_data(as_text=True)

    erasure = erase_person(db.session, storage=get_storage(), email="OLGA@example.com", by=None, now=utcnow())
    db.session.commit()

    assert erasure.skipped_rows == 1 and erasure.uploads == 2
    assert _stored(made_into_batch) is None and _stored(waiting_with_olga) is None
    gone = client.get(f"/batches/uploads/{waiting_with_olga}/errors.csv")
    assert gone.status_code == 410 and "olga" not in gone.get_data(as_text=True).lower()
    # A file that does not name her is the staff member's still, to make a batch of.
    assert b"Anna" in _stored(without_olga)


def test_the_admin_page_and_the_api_say_which_uploaded_files_an_erasure_deleted(app, client, auth, users, template_id):
    _, first = _validate(client, template_id)
    _, second = _validate(client, template_id)
    auth.logout()
    auth.login_admin()
    token = csrf_from(client.get("/admin/privacy/"))
    page = client.post("/admin/privacy/erase", data={"csrf_token": token, "email": "olga@example.com", "confirm": "1"})
    said = page.get_data(as_text=True)
    assert "Deleted: 2 uploaded recipients files that held the address" in said
    assert "Nothing is left of this address." not in said
    assert _stored(first) is None and _stored(second) is None

    _, third = _validate(client, template_id)
    secret = create_api_key(db.session, user=users["admin"], name="privacy", now=NOW).secret
    db.session.commit()
    answer = client.post(
        "/api/v1/privacy/erasures",
        json={"email": "bob.builder@example.com"},
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert answer.json["uploads"] == 0 and _stored(third) is not None  # Bob's row has no address: nothing names him
    answer = client.post(
        "/api/v1/privacy/erasures", json={"email": "Ivan@Example.com"}, headers={"Authorization": f"Bearer {secret}"}
    )
    assert (answer.json["uploads"], answer.json["deliveries_emptied"], answer.json["deliveries_rebuilt"]) == (1, 0, 0)
    assert _stored(third) is None


class Endpoint:
    """A loopback HTTP endpoint that records the bodies it is sent and answers 500 while ``down``."""

    def __init__(self):
        self.bodies: list[bytes] = []
        self.down = False
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                endpoint.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
                self.send_response(500 if endpoint.down else 200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoints(app):
    app.config["WEBHOOK_ALLOW_LOCAL"] = True
    up, down = Endpoint(), Endpoint()
    down.down = True
    yield up, down
    up.close()
    down.close()


#: What the signer is and filled in: none of it may stay in a delivery, nor be sent after the purge.
PERSONAL = ("ivan@example.com", "Иван Петров", "DE89370400440532013000", "4500", "passport-ivan.png")


@pytest.mark.parametrize("how", ["purge", "erasure"])
def test_webhook_deliveries_of_a_purged_or_erased_person_keep_nothing_of_them_and_send_nothing(
    app, users, endpoints, run_jobs, how
):
    up, down = endpoints
    for endpoint in endpoints:
        webhooks_out.create_endpoint(db.session, url=endpoint.url, events=["request.signed"], user_id=None, now=NOW)
    db.session.commit()
    dispatch(now=NOW)  # the cursor: what happens from now on is told
    r = make_sent_request(now=NOW, owner=users["staff"], html=CONTRACT, fields=FIELDS)
    filled = FilledForm(
        typed={"iban": "DE89370400440532013000", "salary": "4500", "start": "2027-03-01", "rules": "yes", "tax": "I"},
        files={"id_scan": Upload(filename="passport-ivan.png", data=a_png())},
        attachment_max_bytes=10**6,
        storage=get_storage(),
    )
    assert sign_filled(r.id, filled, now=NOW + DAY) == "signed"
    assert dispatch(now=NOW + DAY) == 2
    run_jobs("webhooks")
    sent = up.bodies[0].decode()
    assert all(word in sent for word in PERSONAL) and len(down.bodies) == 1
    by_status = {d.status: d for d in db.session.scalars(select(WebhookDelivery))}
    delivered, pending = by_status["delivered"], by_status["pending"]
    delivered_id, pending_id, delivered_at = delivered.id, pending.id, delivered.created_at

    retention.set_team_retention(
        db.session, team=db.session.scalar(select(Team)), keep_signed_days=30, keep_unsigned_days=30, now=NOW
    )
    db.session.commit()
    later = NOW + 40 * DAY
    if how == "purge":
        result = purge(later)
    else:
        result = erase_person(db.session, storage=get_storage(), email="ivan@example.com", by=None, now=later)
        db.session.commit()
    assert (result.deliveries_emptied, result.deliveries_rebuilt) == (1, 1)

    db.session.expire_all()
    delivered = db.session.get(WebhookDelivery, delivered_id)
    assert delivered.payload == {} and delivered.status == "delivered"
    assert (delivered.event, delivered.created_at) == ("request.signed", delivered_at)
    stored = json.dumps(db.session.get(WebhookDelivery, pending_id).payload, ensure_ascii=False)
    assert not [word for word in PERSONAL if word in stored]

    # The endpoint is back: the retry tells the event, with nothing of the person.
    down.down = False
    db.session.execute(update(WebhookDelivery).values(next_attempt_at=NOW))
    db.session.commit()
    assert dispatch(now=later) == 1
    run_jobs("webhooks")
    retried = down.bodies[-1].decode()
    assert len(down.bodies) == 2 and json.loads(retried)["data"]["request"]["id"] == r.id
    assert not [word for word in PERSONAL if word in retried]
    assert db.session.get(WebhookDelivery, pending_id).status == "delivered"

"""One-time codes: a recipient of a batch that asks for one confirms a code (mail or SMS) before signing."""

from __future__ import annotations

import io
import json
import re
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from flask import g
from pypdf import PdfReader
from sqlalchemy import select

from bulksign.batches.batch_settings import BatchError, settings_from_form
from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.documents.audit_certificate import audit_certificate
from bulksign.documents.audit_record import audit_record
from bulksign.documents.storage import get_storage
from bulksign.mail.devmail import list_caught, mailbox_folder, read_caught
from bulksign.mail.sms import HttpSmsProvider, SmsError
from bulksign.models import Batch, Document, Event, OneTimeCode, OutgoingMail, SigningRequest, utcnow
from bulksign.people.users import create_api_key
from bulksign.signing import code_owners
from bulksign.signing import one_time_codes as otp
from bulksign.signing.recipient_actions import decline, sign
from tests.support.batches import run_worker
from tests.support.clock import NOW
from tests.support.services import free_port
from tests.support.signing_requests import make_sent_request
from tests.support.web import csrf_from

SECRET = "test-secret-key"
CLIENT = {"ip": "203.0.113.7", "user_agent": "pytest"}


def issue(request_id: int, *, now=NOW) -> otp.CodeSent:
    return otp.send_code(db.session, request_id=request_id, secret=SECRET, now=now, **CLIENT)


def code_of(sent: otp.CodeSent, request_id: int) -> str:
    """The code the recipient received (re-derived as the mail and SMS jobs do)."""
    row = db.session.get(OneTimeCode, sent.code_id)
    assert code_owners.binding(row) == str(request_id)
    return code_owners.derive_code(secret=SECRET, bound_to=code_owners.binding(row), nonce=row.nonce)


def check(request_id: int, code: str, *, now=NOW) -> otp.CodeCheck:
    return otp.verify_code(db.session, request_id=request_id, code=code, secret=SECRET, now=now, **CLIENT)


def wrong(code: str) -> str:
    return str((int(code) + 1) % 1_000_000).zfill(6)


def event_types(request_id: int) -> list[str]:
    return list(
        db.session.scalars(
            select(Event.type).where(Event.request_id == request_id, Event.type.like("code.%")).order_by(Event.id)
        )
    )


def sign_with(request_id: int, code_id: int | None, *, now=NOW):
    return sign(
        db.session,
        request_id=request_id,
        now=now,
        signer_name="Иван Петров",
        signature_png=None,
        consent=True,
        code_id=code_id,
        **CLIENT,
    )


@pytest.fixture
def guarded(app, users):
    """A sent request of a batch that asks for a one-time code (no phone: codes go by mail)."""
    return make_sent_request(now=NOW - timedelta(minutes=5), owner=users["staff"], one_time_code=True)


# --- the rules -----------------------------------------------------------------------------------


def test_the_right_code_verifies_and_lets_that_session_sign(guarded):
    sent = issue(guarded.id)
    assert (sent.status, sent.channel, sent.masked_to) == ("sent", "email", "i•••@example.com")
    assert sign_with(guarded.id, None).status == "code_needed"
    result = check(guarded.id, code_of(sent, guarded.id)[:3] + " " + code_of(sent, guarded.id)[3:])
    assert (result.status, result.code_id) == ("verified", sent.code_id)
    assert otp.is_verified(db.session, request_id=guarded.id, code_id=sent.code_id, now=NOW)
    assert sign_with(guarded.id, sent.code_id).status == "signed"
    assert event_types(guarded.id) == ["code.sent", "code.verified"]


def test_wrong_codes_count_down_and_the_fifth_locks_the_code(guarded):
    sent = issue(guarded.id)
    right = code_of(sent, guarded.id)
    results = [check(guarded.id, wrong(right)) for _ in range(otp.MAX_TRIES)]
    assert [(r.status, r.tries_left) for r in results] == [
        ("wrong", 4),
        ("wrong", 3),
        ("wrong", 2),
        ("wrong", 1),
        ("locked", 0),
    ]
    # Locked: even the right code no longer works, and no try is counted beyond the bound.
    assert check(guarded.id, right).status == "locked"
    assert db.session.get(OneTimeCode, sent.code_id).attempts == otp.MAX_TRIES
    assert event_types(guarded.id) == ["code.sent"] + ["code.failed"] * 5 + ["code.locked"]
    failed = db.session.scalars(select(Event).where(Event.type == "code.failed").order_by(Event.id)).first()
    assert (failed.ip, failed.user_agent, failed.details["tries_left"]) == ("203.0.113.7", "pytest", 4)
    # A new code (after the pause) starts again.
    again = issue(guarded.id, now=NOW + otp.RESEND_AFTER)
    assert check(guarded.id, code_of(again, guarded.id), now=NOW + otp.RESEND_AFTER).status == "verified"


def test_a_code_expires_after_ten_minutes(guarded):
    sent = issue(guarded.id)
    code = code_of(sent, guarded.id)
    assert check(guarded.id, code, now=NOW + otp.CODE_TTL).status == "expired"
    assert db.session.get(OneTimeCode, sent.code_id).attempts == 0  # an expired code costs no try
    assert check(guarded.id, code, now=NOW + otp.CODE_TTL - timedelta(seconds=1)).status == "verified"


def test_a_code_works_once(guarded):
    sent = issue(guarded.id)
    code = code_of(sent, guarded.id)
    assert check(guarded.id, code).status == "verified"
    assert check(guarded.id, code).status == "used"
    assert event_types(guarded.id).count("code.verified") == 1


def test_a_code_for_another_request_does_not_verify(app, users, guarded):
    other = make_sent_request(
        now=NOW - timedelta(minutes=5), owner=users["staff"], email="olga@example.com", one_time_code=True
    )
    mine, theirs = issue(guarded.id), issue(other.id)
    assert check(guarded.id, code_of(theirs, other.id)).status == "wrong"
    # Nor does a session that verified the other request's code sign this one.
    assert check(other.id, code_of(theirs, other.id)).status == "verified"
    assert sign_with(guarded.id, theirs.code_id).status == "code_needed"
    assert check(guarded.id, code_of(mine, guarded.id)).status == "verified"


def test_a_new_code_replaces_the_old_one_and_requests_are_rate_limited(guarded):
    first = issue(guarded.id)
    assert issue(guarded.id, now=NOW + timedelta(seconds=30)).status == "too_soon"
    second = issue(guarded.id, now=NOW + otp.RESEND_AFTER)
    later = NOW + otp.RESEND_AFTER
    assert check(guarded.id, code_of(first, guarded.id), now=later).status == "wrong"
    assert check(guarded.id, code_of(second, guarded.id), now=later).status == "verified"
    for n in range(2, otp.MAX_CODES_PER_DAY):
        assert issue(guarded.id, now=NOW + otp.RESEND_AFTER * n).status == "sent"
    assert issue(guarded.id, now=NOW + otp.RESEND_AFTER * 20).status == "too_many"
    assert issue(guarded.id, now=NOW + timedelta(days=1, seconds=1)).status == "sent"


def test_codes_are_stored_hashed_and_typos_are_not_tries(guarded):
    sent = issue(guarded.id)
    row = db.session.get(OneTimeCode, sent.code_id)
    code = code_of(sent, guarded.id)
    stored = " ".join(str(getattr(row, c.key)) for c in OneTimeCode.__table__.columns)
    assert code not in stored and len(row.code_hash) == 64
    assert check(guarded.id, "12a456").status == "invalid"
    assert check(guarded.id, "").status == "invalid"
    assert db.session.get(OneTimeCode, sent.code_id).attempts == 0


def test_a_verified_code_vouches_for_its_session_for_a_while_only(guarded):
    sent = issue(guarded.id)
    check(guarded.id, code_of(sent, guarded.id))
    late = NOW + otp.VERIFIED_FOR
    assert (
        decline(db.session, request_id=guarded.id, now=late, reason="No", code_id=sent.code_id, **CLIENT).status
        == "code_needed"
    )
    assert sign_with(guarded.id, sent.code_id, now=late - timedelta(seconds=1)).status == "signed"


def test_a_batch_without_codes_signs_as_before(app, users):
    plain = make_sent_request(now=NOW - timedelta(minutes=5), owner=users["staff"])
    assert sign_with(plain.id, None).status == "signed"


# --- delivery --------------------------------------------------------------------------------------


def test_the_code_goes_by_mail_ahead_of_bulk_mail_and_only_the_body_holds_it(app, guarded, smtp):
    sent = issue(guarded.id, now=utcnow())
    otp.dispatch(sent)
    run_worker(app, "mail")
    [mail] = smtp.to("ivan@example.com")
    code = code_of(sent, guarded.id)
    assert code in mail.text() and code not in mail.subject
    assert "Employment contract" in mail.subject
    row = db.session.scalar(select(OutgoingMail).where(OutgoingMail.kind == "one_time_code"))
    assert row.status == "sent" and code not in row.subject


def test_a_superseded_code_is_not_mailed(app, guarded, smtp):
    first = issue(guarded.id, now=utcnow() - otp.RESEND_AFTER)
    second = issue(guarded.id, now=utcnow())
    otp.dispatch(first)
    otp.dispatch(second)
    run_worker(app, "mail")
    [mail] = smtp.to("ivan@example.com")
    assert code_of(second, guarded.id) in mail.text()
    statuses = dict(
        db.session.execute(
            select(OutgoingMail.message_id, OutgoingMail.status).where(OutgoingMail.kind == "one_time_code")
        ).all()
    )
    assert statuses == {
        f"<code-{first.code_id}@bulksign.local>": "cancelled",
        f"<code-{second.code_id}@bulksign.local>": "sent",
    }


class SmsGateway:
    """A loopback HTTP SMS provider that records what it is sent and answers ``status``."""

    def __init__(self):
        self.received: list[tuple[dict, dict]] = []
        self.status = 202
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                gateway.received.append((dict(self.headers), body))
                self.send_response(gateway.status)
                self.end_headers()
                self.wfile.write(b'{"id": "m-1"}' if gateway.status < 300 else b"quota exceeded")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/messages"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gateway():
    server = SmsGateway()
    yield server
    server.close()


def test_with_a_phone_column_the_code_goes_by_sms_through_the_http_provider(make_app, gateway, smtp):
    app = make_app(SMS_HTTP_URL=gateway.url, SMS_HTTP_TOKEN="sms-token")
    with app.app_context():
        r = make_sent_request(now=utcnow() - timedelta(minutes=5), phone="+49 170 1234567", one_time_code=True)
        sent = otp.send_code(db.session, request_id=r.id, secret=app.config["SECRET_KEY"], now=utcnow(), **CLIENT)
        assert (sent.channel, sent.masked_to, sent.mail_id) == ("sms", "••••••••••67", None)
        otp.dispatch(sent)
        run_worker(app, "mail")
        [(headers, body)] = gateway.received
        row = db.session.get(OneTimeCode, sent.code_id)
        code = code_owners.derive_code(
            secret=app.config["SECRET_KEY"], bound_to=code_owners.binding(row), nonce=row.nonce
        )
        assert headers["Authorization"] == "Bearer sms-token"
        assert body["to"] == "+49 170 1234567" and code in body["text"]
        assert smtp.received == []  # by SMS, not by mail
        event = db.session.scalar(select(Event).where(Event.type == "code.sent"))
        assert event.details == {"code_id": sent.code_id, "channel": "sms", "to": "••••••••••67"}


def test_the_http_provider_reports_a_refusal_in_words(gateway):
    gateway.status = 429
    provider = HttpSmsProvider(url=gateway.url, token="", timeout=5)
    with pytest.raises(SmsError, match="429: quota exceeded"):
        provider.send(to="+491701234567", text="hello")
    unreachable = HttpSmsProvider(url=f"http://127.0.0.1:{free_port()}/", token="", timeout=5)
    with pytest.raises(SmsError, match="could not be reached"):
        unreachable.send(to="+491701234567", text="hello")


def test_without_a_provider_the_sms_lands_in_the_development_mailbox(app, users):
    r = make_sent_request(
        now=utcnow() - timedelta(minutes=5), owner=users["staff"], phone="+7 900 111-22-33", one_time_code=True
    )
    sent = issue(r.id, now=utcnow())
    otp.dispatch(sent)
    run_worker(app, "mail")
    folder = mailbox_folder(app.config["VAR_DIR"])
    [caught] = list_caught(folder).mails
    assert caught.subject == "SMS to +7 900 111-22-33"
    assert code_of(sent, r.id) in read_caught(folder, caught.name).get_content()


# --- the audit certificate -------------------------------------------------------------------------


def test_every_step_is_on_the_audit_certificate(guarded):
    first = issue(guarded.id)
    check(guarded.id, "000000" if code_of(first, guarded.id) != "000000" else "111111")
    check(guarded.id, code_of(first, guarded.id))
    assert sign_with(guarded.id, first.code_id).status == "signed"
    request = db.session.get(SigningRequest, guarded.id)
    original = db.session.scalar(select(Document).where(Document.request_id == guarded.id))
    record = audit_record(db.session, request, original)
    text = " ".join(page.extract_text() for page in PdfReader(io.BytesIO(audit_certificate(record))).pages)
    text = " ".join(text.split())
    for words in (
        "One-time code sent by email to i•••@example.com",
        "Wrong one-time code (4 tries left)",
        "One-time code confirmed",
        "Identity check",
    ):
        assert words in text, words


# --- the pages and the batch option -----------------------------------------------------------------


def test_the_signing_page_asks_for_the_code_before_showing_the_document(app, client, users, smtp):
    r = make_sent_request(now=utcnow() - timedelta(minutes=5), owner=users["staff"], one_time_code=True)
    page = client.get(f"/sign/{r.token}")
    assert b"Send me a code" in page.data and b"card document" not in page.data and b"Contract body" not in page.data
    assert client.get(f"/sign/{r.token}/document").status_code == 403
    assert client.get(f"/sign/{r.token}/pages/1").status_code == 403
    token = csrf_from(page)
    assert client.post(f"/sign/{r.token}/code", data={"csrf_token": token}).status_code == 303
    assert client.post(f"/sign/{r.token}/code", data={"csrf_token": token}).status_code == 429  # too soon
    run_worker(app, "mail")
    code = re.search(r"\b(\d{6})\b", smtp.to("ivan@example.com")[0].text()).group(1)
    refused = client.post(f"/sign/{r.token}/code/verify", data={"csrf_token": token, "code": wrong(code)})
    assert refused.status_code == 422 and b"4 more tries" in refused.data
    assert (
        client.post(f"/sign/{r.token}/sign", data={"csrf_token": token, "name": "Иван", "consent": "yes"}).status_code
        == 303
    )
    assert db.session.get(SigningRequest, r.id).status == "opened"  # not signed: no code yet
    assert client.post(f"/sign/{r.token}/code/verify", data={"csrf_token": token, "code": code}).status_code == 303
    assert b"card document" in client.get(f"/sign/{r.token}").data
    assert client.get(f"/sign/{r.token}/pages/1").status_code == 200
    assert client.get(f"/sign/{r.token}/document").status_code == 200
    # Another browser with the same link (a forwarded mail) must confirm a code of its own.
    assert b"card document" not in app.test_client().get(f"/sign/{r.token}").data
    client.post(f"/sign/{r.token}/sign", data={"csrf_token": token, "name": "Иван", "consent": "yes"})
    db.session.expire_all()
    assert db.session.get(SigningRequest, r.id).status == "signed"


def test_after_signing_a_forwarded_link_needs_a_code_of_its_own_for_the_signed_copy(app, client, users, smtp, run_jobs):
    r = make_sent_request(now=utcnow() - timedelta(minutes=5), owner=users["staff"], one_time_code=True)
    # The signer's code is a minute old: the other browser may ask for its own at once.
    mine = issue(r.id, now=utcnow() - otp.RESEND_AFTER)
    token = csrf_from(client.get(f"/sign/{r.token}"))
    assert (
        client.post(f"/sign/{r.token}/code/verify", data={"csrf_token": token, "code": code_of(mine, r.id)}).status_code
        == 303
    )
    client.post(f"/sign/{r.token}/sign", data={"csrf_token": token, "name": "Иван", "consent": "yes"})
    run_jobs("pdf")
    signed_key = db.session.scalar(
        select(Document.storage_key).where(Document.request_id == r.id, Document.kind == "signed")
    )
    assert client.get(f"/sign/{r.token}/signed").status_code == 200  # the signer's own browser still may

    other = app.test_client()  # the forwarded mail, opened elsewhere: no session cookie
    g.pop("csrf_token", None)  # the test's app context is shared with the clients: forget the signer's token
    page = other.get(f"/sign/{r.token}")
    text = page.get_data(as_text=True)
    assert "Send me a code" in text and "the signed copy of this document" in text
    assert "Contract body" not in text and "You signed this document" not in text and "/signed" not in text
    for path in ("/signed?download=1", "/document", "/pages/1"):
        refused = other.get(f"/sign/{r.token}{path}")
        assert refused.status_code == 403 and b"Send me a code" in refused.data, path

    # The code step works after signing, with its limits.
    other_token = csrf_from(page)
    assert other.post(f"/sign/{r.token}/code", data={"csrf_token": other_token}).status_code == 303
    assert other.post(f"/sign/{r.token}/code", data={"csrf_token": other_token}).status_code == 429  # too soon
    run_jobs("mail")
    [mail] = [m for m in smtp.to("ivan@example.com") if m.subject.startswith("Your code")]
    code = re.search(r"\b(\d{6})\b", mail.text()).group(1)
    assert (
        other.post(f"/sign/{r.token}/code/verify", data={"csrf_token": other_token, "code": wrong(code)}).status_code
        == 422
    )
    assert other.post(f"/sign/{r.token}/code/verify", data={"csrf_token": other_token, "code": code}).status_code == 303
    assert "You signed this document" in other.get(f"/sign/{r.token}").get_data(as_text=True)
    copy = other.get(f"/sign/{r.token}/signed?download=1")
    assert copy.status_code == 200 and copy.data == get_storage().get(signed_key)


def test_the_batch_option_is_read_from_the_form_and_the_api_and_shown_on_the_batch_page(app, users, client, auth):
    auth.login()
    assert settings_from_form({"one_time_code": "1"}, default_name="x").one_time_code is True
    assert settings_from_form({}, default_name="x").one_time_code is False
    with pytest.raises(BatchError):
        settings_from_form({"one_time_code": "maybe"}, default_name="x")
    template = create_template(db.session, name="Contract", html="<p>{{ name }}</p>", user=users["staff"], now=NOW)
    key = create_api_key(db.session, user=users["staff"], name="test", now=NOW).secret
    db.session.commit()
    created = client.post(
        "/api/v1/batches",
        content_type="multipart/form-data",
        headers={"Authorization": f"Bearer {key}"},
        data={
            "template_id": template.template.id,
            "one_time_code": "true",
            "file": (io.BytesIO(b"email,name,phone\nanna@example.com,Anna,+4917012345\n"), "p.csv"),
        },
    )
    assert created.status_code == 201 and created.json["one_time_code"] is True
    assert db.session.get(Batch, created.json["id"]).one_time_code is True
    shown = client.get(f"/api/v1/batches/{created.json['id']}", headers={"Authorization": f"Bearer {key}"})
    assert shown.json["one_time_code"] is True
    assert b'id="one-time-code"' in client.get(f"/batches/{created.json['id']}").data

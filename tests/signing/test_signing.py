"""The recipient's page: open, sign, decline, dead links, and the security of every /sign response."""

from __future__ import annotations

import io
import re
import subprocess
from datetime import timedelta

import pytest
from PIL import Image
from sqlalchemy import func, select

from bulksign.batches.states import transition
from bulksign.core.extensions import db
from bulksign.core.logs import redact_path
from bulksign.documents.storage import get_storage
from bulksign.models import Event, OutgoingMail, SigningRequest, utcnow
from bulksign.models.status import Status
from bulksign.signing.links import issue_link
from bulksign.signing.recipient_actions import decline, open_request, sign
from bulksign.signing.signer_input import MAX_SIGNATURE_BYTES
from bulksign.work.pipeline import SEND, owners
from bulksign.work.queues import get_queue
from tests.support.clock import NOW
from tests.support.races import race
from tests.support.sealed import signed_document
from tests.support.signatures import data_url, png
from tests.support.signing_requests import make_sent_request
from tests.support.web import csrf_from


def fresh(request_id: int) -> SigningRequest:
    db.session.expire_all()
    return db.session.get(SigningRequest, request_id)


def events(request_id: int, type_: str) -> list[Event]:
    return list(db.session.scalars(select(Event).where(Event.request_id == request_id, Event.type == type_)))


@pytest.fixture
def sent(app, users):
    """A request sent five minutes ago (the views read the real clock), due in a week."""
    return make_sent_request(now=utcnow() - timedelta(minutes=5), owner=users["staff"])


def sign_form(client, token, **fields):
    page = client.get(f"/sign/{token}")
    data = {"csrf_token": csrf_from(page), "name": "Иван Петров", "consent": "yes", **fields}
    return client.post(f"/sign/{token}/sign", data=data)


# --- opening -------------------------------------------------------------------------------------


def test_first_open_records_opened_at_and_an_event_with_ip_and_user_agent(app, users):
    r = make_sent_request(now=NOW, owner=users["staff"])
    outcome = open_request(
        db.session, request_id=r.id, now=NOW + timedelta(hours=1), ip="203.0.113.9", user_agent="Phone/1.0"
    )
    assert outcome.status == "opened"
    row = fresh(r.id)
    assert row.status == "opened" and row.opened_at == NOW + timedelta(hours=1)
    (event,) = events(r.id, "status.opened")
    assert (event.ip, event.user_agent, event.actor) == ("203.0.113.9", "Phone/1.0", "recipient")


def test_reopening_adds_at_most_one_event_per_hour(app, users):
    r = make_sent_request(now=NOW, owner=users["staff"])
    for minutes in (0, 5, 30):
        open_request(db.session, request_id=r.id, now=NOW + timedelta(minutes=minutes), ip="1.1.1.1", user_agent="A")
    assert events(r.id, "page.opened") == []
    assert (
        open_request(db.session, request_id=r.id, now=NOW + timedelta(minutes=61), ip="2.2.2.2", user_agent="B").status
        == "reopened"
    )
    assert [e.ip for e in events(r.id, "page.opened")] == ["2.2.2.2"]
    assert fresh(r.id).opened_at == NOW


def test_the_page_shows_the_document_sender_and_deadline(client, sent):
    page = client.get(f"/sign/{sent.token}")
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    assert "Employment contract" in html and "staff@example.com" in html and "Иван Петров" in html
    deadline = fresh(sent.id).expires_at
    assert f"{deadline.day} {deadline:%B %Y, %H:%M} (UTC)" in html  # in the batch's time zone
    # The pages as images (no PDF frame: phones show none), the text beside them, and the PDF to download.
    assert f'src="/sign/{sent.token}/pages/1"' in html and 'alt="Page 1 of 1"' in html and "<iframe" not in html
    assert "Между ООО «Ромашка» и Иван Петров." in html and f"/sign/{sent.token}/document?download=1" in html
    assert 'value="Иван Петров"' in html and 'name="consent"' in html and "I agree to sign electronically" in html
    assert fresh(sent.id).status == "opened"
    document = client.get(f"/sign/{sent.token}/document")
    assert document.status_code == 200 and document.data == sent.original
    assert document.headers["Content-Disposition"].startswith("inline")
    assert client.get(f"/sign/{sent.token}/document?download=1").headers["Content-Disposition"].startswith("attachment")


def test_the_page_follows_the_batch_language(app, users, client):
    r = make_sent_request(now=utcnow(), owner=users["staff"], language="ru")
    html = client.get(f"/sign/{r.token}", headers={"Accept-Language": "en"}).get_data(as_text=True)
    assert '<html lang="ru">' in html and "Я согласен(на) подписать электронно" in html


# --- signing -------------------------------------------------------------------------------------


def test_signing_from_sent_opens_first_then_signs_and_queues_the_seal(app, client, sent):
    response = sign_form(client, sent.token, signature=data_url(png()))
    assert response.status_code == 303 and response.headers["Location"].endswith(f"/sign/{sent.token}")
    row = fresh(sent.id)
    assert row.status == "signed" and row.signer_name == "Иван Петров" and row.signer_ip == "127.0.0.1"
    assert row.signed_at is not None and row.signature_image.startswith(b"\x89PNG")
    assert len(events(sent.id, "status.opened")) == 1 and len(events(sent.id, "status.signed")) == 1
    assert f"seal-{sent.id}" in get_queue("pdf").job_ids
    page = client.get(f"/sign/{sent.token}").get_data(as_text=True)
    assert "You signed this document" in page and f"{row.signed_at.day} {row.signed_at:%B %Y, %H:%M} (UTC)" in page


def test_bidi_overrides_and_zero_width_characters_are_taken_out_of_the_signers_name_and_certificate(
    app, client, sent, run_jobs
):
    # U+202E would print "evil" reversed (and what follows with it); U+200B hides a letter's boundary.
    response = sign_form(client, sent.token, name="\u202eevil\u202c Anna\u200b")
    assert response.status_code == 303
    request_id = sent.id
    assert fresh(request_id).signer_name == "evil Anna"
    run_jobs("pdf")
    text = subprocess.run(
        ["pdftotext", "-enc", "UTF-8", "-", "-"],
        input=get_storage().get(signed_document(request_id).storage_key),
        capture_output=True,
        check=True,
    ).stdout.decode()
    assert "evil Anna" in text and not re.search("[\u202a-\u202e\u200b\u2066-\u2069]", text)


def test_signing_and_declining_while_redis_is_down_answer_as_usual_and_leave_the_jobs_to_the_safety_nets(
    app, users, client, monkeypatch
):
    # Seen in the soak: a signature POST during the Redis restart was committed, then answered 500.
    from redis.exceptions import ConnectionError as RedisConnectionError

    from bulksign.work import pipeline
    from bulksign.work.queues import JobHandle

    def refused(*args, **kwargs):
        raise RedisConnectionError("Error 111 connecting to 127.0.0.1. Connection refused.")

    monkeypatch.setattr(JobHandle, "enqueue_unique", refused)
    monkeypatch.setattr(pipeline, "enqueue_sends", refused)
    signer, decliner = (make_sent_request(now=utcnow(), owner=users["staff"]) for _ in range(2))
    assert sign_form(client, signer.token).status_code == 303
    page = client.get(f"/sign/{decliner.token}")
    declined = client.post(f"/sign/{decliner.token}/decline", data={"csrf_token": csrf_from(page), "reason": "No."})
    assert declined.status_code == 303
    assert (fresh(signer.id).status, fresh(decliner.id).status) == ("signed", "declined")
    # Committed for the safety nets: ``seal_missing`` finds the unsealed signature, the reconciler the queued notice.
    assert db.session.scalar(select(OutgoingMail.status).where(OutgoingMail.kind == "decline_notice")) == "queued"


def test_a_post_on_a_request_still_in_sent_signs_it(app, users):
    r = make_sent_request(now=NOW, owner=users["staff"])
    outcome = sign(
        db.session,
        request_id=r.id,
        now=NOW,
        signer_name="  Ivan   Petrov ",
        signature_png=None,
        consent=True,
        ip="198.51.100.1",
        user_agent="UA",
    )
    assert outcome.status == "signed"
    row = fresh(r.id)
    assert (row.status, row.signer_name, row.opened_at, row.signature_image) == ("signed", "Ivan Petrov", NOW, None)


def test_a_double_submit_signs_once(client, sent):
    page = client.get(f"/sign/{sent.token}")
    data = {"csrf_token": csrf_from(page), "name": "Иван Петров", "consent": "yes"}
    first = client.post(f"/sign/{sent.token}/sign", data=data)
    second = client.post(f"/sign/{sent.token}/sign", data={**data, "name": "Someone Else"})
    assert first.status_code == second.status_code == 303
    assert len(events(sent.id, "status.signed")) == 1 and fresh(sent.id).signer_name == "Иван Петров"
    assert len(get_queue("pdf")) == 1


def test_two_concurrent_signatures_make_one(app, users):
    r = make_sent_request(now=NOW, owner=users["staff"])
    results = race(
        app,
        lambda n: sign(
            db.session,
            request_id=r.id,
            now=NOW,
            signer_name=f"Signer {n}",
            signature_png=None,
            consent=True,
            ip="127.0.0.1",
            user_agent="t",
        ).status,
    )
    assert sorted(results.values()) == ["already_signed"] * 3 + ["signed"]
    assert len(events(r.id, "status.signed")) == 1 and len(events(r.id, "status.opened")) == 1


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"consent": ""}, "I agree to sign electronically"),
        ({"name": "   "}, "Type your full name"),
        ({"name": "x" * 301}, "too long"),
        ({"name": "\u202e\u200b \ufeff\u2066"}, "Type your full name"),  # nothing but invisible characters
        ({"signature": "data:image/png;base64,@@@"}, "could not be read"),
        ({"signature": data_url(b"GIF89a" + b"0" * 50)}, "not a PNG"),
        ({"signature": data_url(b"\x89PNG\r\n\x1a\n" + b"garbage" * 20)}, "could not be read"),
        ({"signature": data_url(b"\x89PNG\r\n\x1a\n" + b"0" * (MAX_SIGNATURE_BYTES + 1))}, "could not be read"),
        ({"signature": "data:text/html;base64,PGI+"}, "could not be read"),
    ],
)
def test_bad_sign_input_is_refused_with_a_message_and_nothing_is_signed(client, sent, fields, message):
    response = sign_form(client, sent.token, **fields)
    assert response.status_code == 422 and message in response.get_data(as_text=True)
    assert fresh(sent.id).status == "opened" and events(sent.id, "status.signed") == []


def test_a_drawn_signature_is_stored_as_a_clean_png(app, users):
    r = make_sent_request(now=NOW, owner=users["staff"])
    sign(
        db.session,
        request_id=r.id,
        now=NOW,
        signer_name="A B",
        signature_png=png(),
        consent=True,
        ip=None,
        user_agent=None,
    )
    with Image.open(io.BytesIO(fresh(r.id).signature_image)) as image:
        assert image.format == "PNG" and image.size == (300, 100)


def test_an_expired_request_cannot_be_signed(app, users, client):
    r = make_sent_request(now=utcnow() - timedelta(days=8), owner=users["staff"], reply_to="hr@example.com")
    page = client.get(f"/sign/{r.token}")
    html = page.get_data(as_text=True)
    assert page.status_code == 410 and "This link has expired" in html and "hr@example.com" in html
    assert 'name="consent"' not in html and "/document" not in html
    assert client.get(f"/sign/{r.token}/document").status_code == 410
    assert (
        sign(
            db.session,
            request_id=r.id,
            now=utcnow(),
            signer_name="A",
            signature_png=None,
            consent=True,
            ip=None,
            user_agent=None,
        ).status
        == "not_allowed"
    )
    assert fresh(r.id).status == "sent"


def test_the_expired_page_names_the_owner_when_there_is_no_reply_to(app, users, client):
    r = make_sent_request(now=utcnow() - timedelta(days=8), owner=users["staff"])
    assert "staff@example.com" in client.get(f"/sign/{r.token}").get_data(as_text=True)


# --- declining -----------------------------------------------------------------------------------


def test_declining_needs_a_reason_records_it_and_tells_the_owner(client, sent):
    page = client.get(f"/sign/{sent.token}")
    empty = client.post(f"/sign/{sent.token}/decline", data={"csrf_token": csrf_from(page), "reason": "  "})
    assert empty.status_code == 422 and "why you decline" in empty.get_data(as_text=True)
    assert fresh(sent.id).status == "opened"
    done = client.post(f"/sign/{sent.token}/decline", data={"csrf_token": csrf_from(page), "reason": "Wrong salary"})
    assert done.status_code == 303
    row = fresh(sent.id)
    assert (row.status, row.decline_reason) == ("declined", "Wrong salary") and row.declined_at
    (mail,) = db.session.scalars(select(OutgoingMail)).all()
    assert (mail.kind, mail.to_email, mail.request_id) == ("decline_notice", "staff@example.com", sent.id)
    assert owners(SEND, [mail.id])[mail.id] in get_queue("mail").job_ids
    html = client.get(f"/sign/{sent.token}").get_data(as_text=True)
    assert "You declined to sign this document" in html and 'name="consent"' not in html


def test_the_decline_notice_reaches_the_owner_with_the_reason(app, client, sent, smtp, run_jobs):
    decline(db.session, request_id=sent.id, now=utcnow(), reason="Salary is wrong", ip="1.2.3.4", user_agent="x")
    run_jobs("mail")
    (mail,) = smtp.of_kind("decline-notice")  # the owner also hears that the batch, its one request settled, is done
    assert mail.rcpt_tos == ["staff@example.com"]
    assert "Declined" in mail.subject and "Salary is wrong" in mail.text()
    assert sent.token not in mail.text()


def test_a_signed_request_cannot_be_declined_and_a_declined_one_cannot_be_signed(app, users):
    signed = make_sent_request(now=NOW, owner=users["staff"], email="a@example.com")
    declined = make_sent_request(now=NOW, owner=users["staff"], email="b@example.com")
    sign(
        db.session,
        request_id=signed.id,
        now=NOW,
        signer_name="A",
        signature_png=None,
        consent=True,
        ip=None,
        user_agent=None,
    )
    decline(db.session, request_id=declined.id, now=NOW, reason="no", ip=None, user_agent=None)
    assert (
        decline(db.session, request_id=signed.id, now=NOW, reason="late", ip=None, user_agent=None).status
        == "not_allowed"
    )
    assert (
        sign(
            db.session,
            request_id=declined.id,
            now=NOW,
            signer_name="A",
            signature_png=None,
            consent=True,
            ip=None,
            user_agent=None,
        ).status
        == "not_allowed"
    )
    assert (
        decline(db.session, request_id=declined.id, now=NOW, reason="again", ip=None, user_agent=None).status
        == "already_declined"
    )
    assert fresh(signed.id).status == "signed" and fresh(declined.id).decline_reason == "no"


# --- dead links ----------------------------------------------------------------------------------


def test_an_unknown_token_gets_the_same_not_valid_page_whatever_it_looks_like(client, sent):
    near_miss = sent.token[:-1] + ("B" if sent.token.endswith("A") else "A")
    pages = [client.get(f"/sign/{token}") for token in ("x", near_miss, "a" * 43, "é" * 10)]
    assert {p.status_code for p in pages} == {404}
    for p in pages:
        assert "This link is not valid" in p.get_data(as_text=True)
    assert client.get(f"/sign/{'a' * 43}/document").status_code == 404
    assert client.get(f"/sign/{'a' * 43}/signed").status_code == 404


def test_a_link_replaced_by_a_new_one_is_not_valid(app, client, sent):
    issue_link(db.session, request_id=sent.id, secret=app.config["SECRET_KEY"], now=utcnow())
    db.session.commit()
    assert client.get(f"/sign/{sent.token}").status_code == 404


def test_a_cancelled_request_says_so(app, client, sent):
    transition(db.session, sent.id, frm=Status.SENT, to=Status.CANCELLED, now=utcnow())
    db.session.commit()
    page = client.get(f"/sign/{sent.token}")
    assert page.status_code == 410 and "This request was withdrawn" in page.get_data(as_text=True)
    assert client.get(f"/sign/{sent.token}/document").status_code == 410
    form = client.get("/verify")  # any page of the session carries the CSRF token
    assert (
        client.post(
            f"/sign/{sent.token}/sign", data={"csrf_token": csrf_from(form), "name": "A", "consent": "yes"}
        ).status_code
        == 303
    )
    assert fresh(sent.id).status == "cancelled"


def test_the_signed_copy_is_offered_only_once_it_exists(client, sent):
    sign_form(client, sent.token)
    early = client.get(f"/sign/{sent.token}/signed")
    assert early.status_code == 404 and "being prepared" in early.get_data(as_text=True)
    assert "being prepared" in client.get(f"/sign/{sent.token}").get_data(as_text=True)


# --- security ------------------------------------------------------------------------------------


def _assert_recipient_headers(response, *, framable=False):
    h = response.headers
    assert h["Cache-Control"] == "no-store"
    assert h["Referrer-Policy"] == "no-referrer"
    assert h["X-Content-Type-Options"] == "nosniff"
    csp = h["Content-Security-Policy"]
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    if framable:
        assert "frame-ancestors 'self'" in csp and h["X-Frame-Options"] == "SAMEORIGIN"
    else:
        assert "frame-ancestors 'none'" in csp and h["X-Frame-Options"] == "DENY"
        assert "script-src 'self'" in csp and "frame-src" not in csp  # no frames: default-src 'none' forbids them


def test_every_recipient_response_carries_the_security_headers(client, sent):
    page = client.get(f"/sign/{sent.token}")
    _assert_recipient_headers(page)
    _assert_recipient_headers(client.get(f"/sign/{sent.token}/document"), framable=True)
    _assert_recipient_headers(client.get("/sign/unknown-token"))
    _assert_recipient_headers(client.get("/sign/a/b/c/d"))
    _assert_recipient_headers(client.get("/verify"))
    bad = client.post(f"/sign/{sent.token}/sign", data={"name": "A", "consent": "yes"})
    _assert_recipient_headers(bad)
    assert bad.status_code == 400 and "The form expired" in bad.get_data(as_text=True)
    assert fresh(sent.id).status == "opened"
    # No inline script anywhere on the page: the pad's glue is a static file.
    assert not re.search(r"<script(?![^>]*\bsrc=)", page.get_data(as_text=True))
    assert not re.search(r"<[^>]+\son[a-z]+\s*=", page.get_data(as_text=True))


def test_too_many_requests_from_one_ip_get_a_friendly_429(make_app):
    app = make_app(SIGNING_RATE_LIMIT="3 per minute")
    with app.app_context():
        client = app.test_client()
        codes = [client.get(f"/sign/not-a-token-{i}").status_code for i in range(3)]
        limited = client.get("/sign/another")
        assert codes == [404] * 3 and limited.status_code == 429
        assert "Too many requests" in limited.get_data(as_text=True)
        _assert_recipient_headers(limited)
        # One budget for all recipient pages, /verify included.
        assert client.get("/verify").status_code == 429


def test_behind_a_proxy_each_recipient_has_their_own_budget_and_address(make_app):
    app = make_app(SIGNING_RATE_LIMIT="2 per minute", PROXY_HOPS=1)
    with app.app_context():
        client = app.test_client()
        one = {"X-Forwarded-For": "198.51.100.1"}
        assert [client.get("/verify", headers=one).status_code for _ in range(3)] == [200, 200, 429]
        assert client.get("/verify", headers={"X-Forwarded-For": "spoofed, 198.51.100.2"}).status_code == 200
        r = make_sent_request(now=utcnow(), owner=None)
        client.get(f"/sign/{r.token}", headers={"X-Forwarded-For": "198.51.100.3"})
        (event,) = events(r.id, "status.opened")
        assert event.ip == "198.51.100.3"


def test_signing_paths_never_reach_a_log_line_with_their_token(sent):
    for suffix in ("", "/document", "/signed", "/sign", "/decline"):
        assert sent.token not in redact_path(f"/sign/{sent.token}{suffix}")


def test_staff_pages_never_show_a_recipient_link(app, client, auth, sent):
    auth.login()
    client.get(f"/sign/{sent.token}")  # opened: the page-open event is on the timeline
    for path in (
        "/",
        "/batches/",
        f"/batches/{sent.batch_id}",
        f"/batches/{sent.batch_id}/requests",
        f"/batches/{sent.batch_id}/requests/{sent.id}",
    ):
        response = client.get(path, follow_redirects=True)
        assert sent.token not in response.get_data(as_text=True), path


def test_pdf_queue_counts_one_seal_job_per_signature(app, users):
    ids = [make_sent_request(now=NOW, owner=users["staff"], email=f"p{i}@example.com").id for i in range(3)]
    for request_id in ids:
        sign(
            db.session,
            request_id=request_id,
            now=NOW,
            signer_name="P",
            signature_png=None,
            consent=True,
            ip=None,
            user_agent=None,
        )
    assert sorted(get_queue("pdf").job_ids) == sorted(f"seal-{i}" for i in ids)
    assert db.session.scalar(select(func.count()).select_from(Event).where(Event.type == "status.signed")) == 3


def test_a_link_opened_before_its_send_is_recorded_says_the_document_is_on_its_way(app, users, client, run_jobs):
    from bulksign.signing.links import current_token
    from bulksign.work.pipeline import enqueue_renders
    from tests.support.batches import make_batch, request_ids, requests_of

    batch = make_batch(user=users["staff"], now=NOW, recipients=1)
    enqueue_renders(request_ids(batch))
    run_jobs("pdf")
    (row,) = requests_of(batch)  # generated: the link exists, the invitation is queued (or its send not yet recorded)
    page = client.get(f"/sign/{current_token(row, secret=app.config['SECRET_KEY'])}")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and "Your document is on its way" in html
    assert 'http-equiv="refresh"' in html and 'name="consent"' not in html
    assert requests_of(batch)[0].status == "generated"  # opening it changed nothing

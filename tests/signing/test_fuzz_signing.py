"""Fuzzing what strangers and staff can send: the signing forms, /verify and the recipients upload never answer 500.

The recipients parser itself is fuzzed in tests/test_recipients.py (random bytes, CSV-like text, damaged
workbooks); here the same kind of input goes through the real routes, with CSRF, storage and the database.
"""

from __future__ import annotations

import base64
import io
import json
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from werkzeug.datastructures import MultiDict
from werkzeug.routing import IntegerConverter

from bulksign.core.extensions import db
from bulksign.models import utcnow
from tests.support.accounts import STAFF
from tests.support.signatures import data_url, png
from tests.support.signing_requests import make_sent_request
from tests.support.web import csrf_from

FUZZ = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
PREFIX = "data:image/png;base64,"

#: Anything a browser can send (lone surrogates cannot be encoded, so no client sends them).
characters = st.characters(blacklist_categories=("Cs",))
text = st.text(characters, max_size=300)
#: Much longer than any field should be: names, reasons and signatures of up to 100,000 characters.
oversized = st.builds(lambda c, n: c * n, characters, st.integers(1000, 100_000))
signatures = st.one_of(
    st.just(""),
    text,
    oversized,
    st.binary(max_size=3000).map(lambda b: PREFIX + base64.b64encode(b).decode()),  # not a PNG
    st.just(data_url(png())),  # a real drawing
    st.just(data_url(png(4000, 4000))),  # far too big
    st.binary(max_size=200).map(lambda b: PREFIX + base64.b64encode(b).decode()[:-1] + "@"),  # broken base64
    st.sampled_from(
        [
            "data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=",
            "javascript:alert(1)",
            PREFIX,
            PREFIX + "=" * 9,
            "data:image/png;base64,\x00",
            "data:image/png;base64," + "A" * 10**6,
        ]
    ),
)
consents = st.one_of(st.sampled_from(["yes", "no", "", "on", "1", "YES", "yes\x00", "yes "]), text)
fields = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(text, oversized),
        "reason": st.one_of(text, oversized),
        "signature": signatures,
        "consent": consents,
    },
)
extras = st.dictionaries(st.text(characters, min_size=1, max_size=20), text, max_size=4)
#: How the body is sent: a normal form, multipart, JSON (a wrong type for a form), every field twice, or files.
modes = st.sampled_from(["form", "multipart", "json", "repeated", "files"])


def _send(client, url: str, *, csrf: str | None, data: dict, mode: str):
    headers = {"X-CSRFToken": csrf} if csrf and mode == "json" else {}
    if csrf and mode != "json":
        data = {**data, "csrf_token": csrf}
    if mode == "json":
        return client.post(url, data=json.dumps(data), content_type="application/json", headers=headers)
    if mode == "repeated":
        return client.post(url, data=MultiDict([(k, v) for k, v in data.items() for _ in range(2)]))
    if mode == "files":
        files = {
            k: (io.BytesIO(v.encode("utf-8", "surrogatepass")), "x.png") if k != "csrf_token" else v
            for k, v in data.items()
        }
        return client.post(url, data=files, content_type="multipart/form-data")
    return client.post(url, data=data, content_type="multipart/form-data" if mode == "multipart" else None)


def _assert_handled(response, what: str) -> None:
    assert response.status_code < 500, (what, response.status_code)
    assert b"Traceback" not in response.data


@pytest.fixture
def recipient(make_app):
    """A real sent request on an app whose rate limit does not get in the fuzzer's way."""
    app = make_app(SIGNING_RATE_LIMIT="1000000 per minute")
    with app.app_context():
        token = make_sent_request(now=utcnow() - timedelta(minutes=5)).token
        client = app.test_client()
        yield client, token, csrf_from(client.get(f"/sign/{token}"))


@FUZZ
@given(data=fields, extra=extras, mode=modes, action=st.sampled_from(["sign", "decline"]), with_csrf=st.booleans())
def test_random_sign_and_decline_posts_never_answer_500(recipient, data, extra, mode, action, with_csrf):
    client, token, csrf = recipient
    response = _send(
        client, f"/sign/{token}/{action}", csrf=csrf if with_csrf else None, data={**extra, **data}, mode=mode
    )
    _assert_handled(response, (action, mode))
    if not with_csrf:  # refused: no token, or a form field over werkzeug's 500 KB in-memory limit first
        assert response.status_code in (400, 413)


@settings(FUZZ, max_examples=60)
@given(
    token=st.one_of(
        st.text(characters, min_size=1, max_size=200), st.builds(lambda c, n: c * n, characters, st.integers(300, 5000))
    ),
    suffix=st.sampled_from(["", "/document", "/signed", "/sign", "/decline"]),
)
def test_random_tokens_never_answer_500(recipient, token, suffix):
    client, _, csrf = recipient
    url = "/sign/" + token.replace("/", "%2F").replace("?", "%3F").replace("#", "%23") + suffix
    method = "POST" if suffix in ("/sign", "/decline") else "GET"
    _assert_handled(client.open(url, method=method, data={"csrf_token": csrf}), url[:60])


@FUZZ
@given(
    sha256=st.one_of(text, st.text(alphabet="0123456789abcdefABCDEF :", max_size=80), oversized),
    upload=st.one_of(st.none(), st.binary(max_size=4000), st.just(b"%PDF-1.7\n" + b"\x00" * 100)),
    filename=st.sampled_from(["a.pdf", "../../etc/passwd", "", "a\x00.pdf", "ж.pdf"]),
)
def test_random_verify_posts_never_answer_500(recipient, sha256, upload, filename):
    client, _, csrf = recipient
    data = {"csrf_token": csrf, "sha256": sha256}
    if upload is not None:
        data["file"] = (io.BytesIO(upload), filename)
    _assert_handled(client.post("/verify", data=data, content_type="multipart/form-data"), "verify")


@pytest.fixture
def uploader(make_app):
    from bulksign.doc_templates.versions import create_template
    from bulksign.people.users import create_user

    app = make_app()
    with app.app_context():
        user = create_user(db.session, email=STAFF[0], password=STAFF[1], role="staff", now=utcnow())
        saved = create_template(db.session, name="T", html="<p>{{ name }} {{ salary }}</p>", user=user, now=utcnow())
        db.session.commit()
        client = app.test_client()
        page = client.get("/auth/login")
        client.post("/auth/login", data={"email": STAFF[0], "password": STAFF[1], "csrf_token": csrf_from(page)})
        yield client, saved.template.id, csrf_from(client.get("/batches/new"))


@settings(FUZZ, max_examples=60)
@given(
    body=st.one_of(
        st.binary(max_size=3000),
        st.text(alphabet=st.sampled_from(list('ab@.,;\t"\n\r =+-xé Ж')), max_size=500).map(
            lambda t: ("email,name,salary\n" + t).encode()
        ),
    ),
    filename=st.sampled_from(
        ["people.csv", "people.xlsx", "../../people.csv", "people", "p.CSV", "a\x00.csv", "people.xls", ".csv"]
    ),
    template_id=st.sampled_from(["T", "", "-1", "999999", "1e9", "x" * 100]) | st.none(),
)
def test_random_recipient_uploads_never_answer_500(uploader, body, filename, template_id):
    client, real_template, csrf = uploader
    data = {
        "csrf_token": csrf,
        "template_id": str(real_template) if template_id == "T" else template_id,
        "file": (io.BytesIO(body), filename),
    }
    data = {k: v for k, v in data.items() if v is not None}
    for headers in ({}, {"HX-Request": "true"}):
        response = client.post(
            "/batches/new/validate",
            data=dict(data, file=(io.BytesIO(body), filename)),
            content_type="multipart/form-data",
            headers=headers,
        )
        _assert_handled(response, filename)


# --- staff forms, listings and the bounce webhook ---------------------------------------------------

#: Every field name some staff form or query reads, so random values reach the parsing code.
FIELD_NAMES = [
    "action",
    "request_ids",
    "select_all",
    "extend_days",
    "status",
    "q",
    "sort",
    "dir",
    "cursor",
    "page",
    "limit",
    "email",
    "days",
    "template_id",
    "upload_id",
    "form_token",
    "name",
    "html",
    "url",
    "events",
    "password",
    "role",
    "disabled",
    "active",
    "language",
    "next",
    "version",
    "reminder_days",
    "expires_in_days",
    "reply_to",
    "email_subject",
    "email_body",
    "all_unsigned",
]
values = st.one_of(
    text,
    st.integers(-(10**20), 10**20).map(str),
    st.sampled_from(
        ["", "0", "1", "-1", "all", "sent", "remind", "cancel", "resend", "retry", "cancel_batch", "x" * 5000]
    ),
)
form_values = st.dictionaries(st.sampled_from(FIELD_NAMES), st.one_of(values, st.lists(values, max_size=3)), max_size=6)


@pytest.fixture
def staff_client(make_app):
    """An admin logged in over a batch of every status (ids 1..), on an app with no context pushed by the test."""
    from bulksign.people.users import create_api_key, create_user
    from tests.support.accounts import ADMIN
    from tests.support.batchdata import batch_in_states
    from tests.support.clock import NOW

    app = make_app()
    with app.app_context():
        admin = create_user(db.session, email=ADMIN[0], password=ADMIN[1], role="admin", now=utcnow())
        key = create_api_key(db.session, user=admin, name="fuzz", now=utcnow()).secret
        db.session.commit()
        batch_in_states(
            db.session,
            statuses=["pending", "sent", "opened", "signed", "declined", "failed", "bounced", "expired"],
            now=NOW,
            user_id=admin.id,
        )
        routes = [
            (rule, method)
            for rule in app.url_map.iter_rules()
            for method in sorted(rule.methods & {"GET", "POST"})
            if not rule.endpoint.startswith(("static", "rq_dashboard", "signing.", "verify.", "metrics."))
            # readyz answers 503 by design while no worker or scheduler runs (tested in test_health_and_errors)
            and rule.endpoint not in ("auth.logout", "tracking.pixel", "health.readyz")
        ]
    client = app.test_client()
    page = client.get("/auth/login")
    client.post("/auth/login", data={"email": ADMIN[0], "password": ADMIN[1], "csrf_token": csrf_from(page)})
    yield client, csrf_from(client.get("/")), key, sorted(routes, key=lambda r: (r[0].rule, r[1]))


@settings(FUZZ, max_examples=150)
@given(data=st.data(), form=form_values, hx=st.booleans())
def test_random_staff_form_posts_and_query_strings_never_answer_500(staff_client, data, form, hx):
    client, csrf, key, routes = staff_client
    rule, method = data.draw(st.sampled_from(routes))
    # The logged-in admin and its API key are number 1: the fuzzer resets, disables and revokes others only.
    args = {
        arg: data.draw(st.sampled_from([2, 999] if arg in ("user_id", "key_id") else [1, 2, 8, 999]))
        if arg.endswith("_id") or isinstance(rule._converters.get(arg), IntegerConverter)
        else "x"
        for arg in rule.arguments
    }
    url = rule.build(args, append_unknown=False)[1]
    headers = {"HX-Request": "true"} if hx else {}
    if url.startswith("/api/"):
        headers["Authorization"] = f"Bearer {key}"
    if method == "GET":
        response = client.get(url, query_string=form, headers=headers)
    elif url.startswith("/api/"):
        response = client.post(url, json=form, headers=headers)
    else:
        response = client.post(url, data={**form, "csrf_token": csrf}, headers=headers)
    _assert_handled(response, f"{method} {rule.rule}")
    assert response.status_code != 401, "the fuzzer logged itself out"


@pytest.fixture
def bounce_client(make_app):
    return make_app(BOUNCE_WEBHOOK_SECRET="s3cret").test_client()


@settings(FUZZ, max_examples=100)
@given(
    payload=st.recursive(
        st.none() | st.booleans() | st.integers() | text,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
        max_leaves=12,
    )
    | st.fixed_dictionaries(
        {
            "Type": st.sampled_from(["Notification", "SubscriptionConfirmation", "Bounce"]),
            "Message": text | st.just('{"notificationType":"Bounce","bounce":{}}'),
        }
    ),
    raw=st.booleans(),
)
def test_random_bounce_webhook_bodies_never_answer_500(bounce_client, payload, raw):
    client = bounce_client
    body = json.dumps(payload) if not raw else str(payload)
    response = client.post(
        "/webhooks/bounces", data=body, content_type="text/plain", headers={"X-Bounce-Secret": "s3cret"}
    )
    _assert_handled(response, "bounce")

"""Security sweep: who may reach which route, CSRF, cookies, brute force, escaping, injection, traversal, leaks.

Everything runs on the real app (PostgreSQL, Redis, wkhtmltopdf, aiosmtpd, RQ workers). The route
walks read ``app.url_map``, so a new route is checked (or fails) without anyone editing this file.
"""

from __future__ import annotations

import io
import re
import subprocess

import pytest
from werkzeug.routing import Rule

from bulksign.core.extensions import csrf, db
from tests.support.hostile_files import HOSTILE_RECIPIENT_FILES
from tests.support.web import csrf_from

#: Routes open to anonymous visitors, each reviewed: add a route here only after deciding it may be public.
EXPECTED_PUBLIC = {
    "api_docs.openapi",
    "api_docs.docs",  # the API's description and its reference page: no data, no key needed
    "auth.login",  # the login form
    "auth.forgot_password",  # asks for an address; answers the same whether or not it has an account
    "auth.reset_password",  # the mailed link's secret is the credential
    "brand.stylesheet",
    "brand.logo",  # the organisation's colours and logo: settings, no data; recipient pages use them
    "health.healthz",  # load balancer probe: says ok or names the broken service, nothing else
    "health.readyz",  # readiness probe: ok, or which dependency is not ready (scheduler, workers, services)
    "main.favicon",  # a redirect to the static icon, which browsers ask for before any login
    "metrics.metrics",  # its own rule: a bearer METRICS_TOKEN, or loopback when none is set
    "signing.page",
    "signing.document",
    "signing.page_image",
    "signing.signed_copy",
    "signing.party_copy",  # what this link's party signed, while the others still sign: the token again
    "signing.sign_document",
    "signing.decline_document",  # the token in the URL is the credential
    "signing.send_code",
    "signing.verify_code",  # one-time codes: the token again, plus the code (5 tries, rate limited)
    "countersign.page",
    "countersign.run",
    "countersign.document",
    "countersign.page_image",
    "countersign.sign_all",
    "countersign.open_own",
    "countersign.decline",
    "countersign.send_code",
    "countersign.verify_code",
    "countersign.signed_copy",  # the countersigner's digest link: its token is the credential, as on /sign/
    "countersign.signed_zip",
    "countersign.live",  # what the open page polls: the same token, behind the same code step
    "tracking.pixel",  # HMAC of the request id; always a GIF
    "verify.verify",  # anyone may check a document
    "webhooks.bounces",  # shared secret (404 when none is configured)
    "webhooks.sms",  # shared secret (404 when none is configured)
    "short_links.short",  # only redirects the token to signing.page, which checks it
}
#: Blueprints that take no CSRF token, each reviewed: API (bearer key, no ambient cookie), inbound webhooks
#: (shared secret), rq-dashboard (its JavaScript posts without a token; admins only, same-origin checked).
EXPECTED_CSRF_EXEMPT = {
    "api",
    "api_approval",
    "api_batch_actions",
    "api_corrections",
    "api_dashboard",
    "api_docs",
    "api_evidence",
    "api_exports",
    "api_privacy",
    "api_reminders",
    "api_requests",
    "api_suppressions",
    "api_templates",
    "api_uploads",
    "webhooks",
    "rq_dashboard",
}
ADMIN_BLUEPRINTS = ("admin", "rq_dashboard", "privacy")
STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}
ARGUMENT_VALUES = {
    "instance_number": 0,
    "per_page": 10,
    "page": 1,
    "order": "asc",
    "registry_name": "failed",
    "queue_name": "default",
    "filename": "js/app.js",
    "token": "x" * 43,
    "name": "1.gif",
}


def _url(rule: Rule, **given) -> str:
    values = {arg: given.get(arg, ARGUMENT_VALUES.get(arg, 1)) for arg in rule.arguments}
    return rule.build(values, append_unknown=False)[1]


def _open(client, rule: Rule, method: str, **kwargs):
    """One request to the rule; a rule werkzeug canonicalises (308 to its twin with defaults) is followed once."""
    response = client.open(_url(rule), method=method, **kwargs)
    if response.status_code == 308:
        response = client.open(response.headers["Location"], method=method, **kwargs)
    return response


def _methods(rule: Rule) -> list[str]:
    return sorted(rule.methods - {"HEAD", "OPTIONS"})


def _is_public(app, endpoint: str) -> bool:
    return endpoint == "static" or getattr(app.view_functions[endpoint], "_bulksign_public", False)


def _rules(app, *, public: bool | None = None, blueprints: tuple[str, ...] | None = None):
    for rule in app.url_map.iter_rules():
        if public is not None and _is_public(app, rule.endpoint) != public:
            continue
        blueprint = rule.endpoint.rpartition(".")[0]
        if blueprints is not None and blueprint not in blueprints:
            continue
        yield rule


# --- who may reach what --------------------------------------------------------------------------


def test_the_public_routes_are_exactly_the_reviewed_list(app):
    public = {rule.endpoint for rule in _rules(app, public=True)} - {"static"}
    assert public == EXPECTED_PUBLIC


def test_every_other_route_refuses_anonymous_visitors_pages_to_login_api_with_401_json(app, client):
    token = csrf_from(client.get("/auth/login"))  # a valid token: the refusal must come from the login check
    checked = 0
    for rule in _rules(app, public=False):
        for method in _methods(rule):
            url = _url(rule)
            response = _open(client, rule, method, data={"csrf_token": token})
            where = (method, rule.rule, response.status_code)
            if url.startswith("/api/"):
                assert response.status_code == 401 and response.is_json, where
                assert response.get_json()["error"], where
            else:
                assert response.status_code == 302, where
                assert response.headers["Location"].startswith("/auth/login?next="), where
            checked += 1
    assert checked > 60


def test_htmx_fragments_refuse_anonymous_visitors_with_401_and_a_redirect_header(app, client):
    response = client.get("/batches/1/progress", headers={"HX-Request": "true"})
    assert response.status_code == 401 and response.headers["HX-Redirect"].startswith("/auth/login")


def test_public_routes_with_their_own_secret_refuse_without_it(make_app, users):
    app = make_app(BOUNCE_WEBHOOK_SECRET="bounce-secret", METRICS_TOKEN="metrics-token")
    client = app.test_client()
    assert client.post("/webhooks/bounces", json={"type": "bounce"}).status_code == 401
    assert client.post("/webhooks/bounces?token=wrong", json={}).status_code == 401
    assert client.get("/metrics").status_code == 403
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 403
    assert client.get("/metrics", headers={"Authorization": "Bearer metrics-token"}).status_code == 200
    # Not configured: the bounce endpoint does not exist at all.
    assert make_app().test_client().post("/webhooks/bounces", json={}).status_code == 404
    texts = make_app(SMS_WEBHOOK_SECRET="sms-secret").test_client()
    assert texts.post("/webhooks/sms", json={"id": "x", "status": "failed"}).status_code == 403
    assert texts.post("/webhooks/sms?token=wrong", json={}).status_code == 403
    assert make_app().test_client().post("/webhooks/sms", json={}).status_code == 404


def test_every_admin_route_refuses_staff_with_403(app, client, auth):
    auth.login()
    token = csrf_from(client.get("/"))
    checked = set()
    for rule in _rules(app, blueprints=ADMIN_BLUEPRINTS):
        for method in _methods(rule):
            response = _open(client, rule, method, data={"csrf_token": token})
            assert response.status_code == 403, (method, rule.rule, response.status_code)
            checked.add(rule.endpoint)
    assert {
        "admin.index",
        "admin.webhooks",
        "admin.create_webhook",
        "admin.mailbox",
        "admin.create_staff",
        "rq_dashboard.queues_overview",
        "rq_dashboard.static",
        "rq_dashboard.list_queues",
        "rq_dashboard.requeue_all",
        "rq_dashboard.empty_queue",
        "privacy.index",
        "privacy.erase",
        "privacy.place_hold",
    } <= checked
    # rq-dashboard's own static files and JSON, by their real paths.
    for path in ("/admin/rq/static/js/jquery-3.5.1.min.js", "/admin/rq/0/data/queues.json", "/admin/rq/favicon.ico"):
        assert client.get(path).status_code == 403, path


def test_metrics_refuse_a_logged_in_staff_user_without_the_token(make_app, users):
    app = make_app(METRICS_TOKEN="metrics-token")
    client = app.test_client()
    page = client.get("/auth/login")
    client.post(
        "/auth/login", data={"email": "staff@example.com", "password": "staff-password", "csrf_token": csrf_from(page)}
    )
    assert client.get("/").status_code == 200
    assert client.get("/metrics").status_code == 403


# --- CSRF ---------------------------------------------------------------------------------------


def test_the_csrf_exemptions_are_exactly_the_reviewed_list(app):
    exempt = {bp.name for bp in csrf._exempt_blueprints} | set(csrf._exempt_views)
    assert exempt == EXPECTED_CSRF_EXEMPT


def test_every_state_changing_form_route_refuses_a_request_without_a_token(app, client, auth):
    auth.login_admin()
    checked = 0
    for rule in app.url_map.iter_rules():
        blueprint = rule.endpoint.rpartition(".")[0]
        if blueprint in EXPECTED_CSRF_EXEMPT:
            continue
        for method in sorted(set(rule.methods) & STATE_CHANGING):
            response = _open(client, rule, method, data={"anything": "1"})
            assert response.status_code == 400, (method, rule.rule, response.status_code)
            assert b"form expired" in response.data, (method, rule.rule)
            forged = _open(client, rule, method, data={"csrf_token": "forged"})
            assert forged.status_code == 400, (method, rule.rule, forged.status_code)
            checked += 1
    assert checked >= 20


def test_rq_dashboard_actions_refuse_cross_site_requests(app, client, auth):
    """Its buttons post without a CSRF token, so a request from another site must be told apart by its Origin."""
    from bulksign.work.queues import get_queue

    get_queue("default").enqueue("bulksign.jobs.periodic.rollup_batches", job_id="probe-1")
    auth.login_admin()
    evil = {"Origin": "https://evil.example"}
    assert client.post("/admin/rq/queue/default/queued/empty", headers=evil).status_code == 403
    # A plain link (GET, which SameSite=Lax lets through) must not change anything either.
    assert client.get("/admin/rq/requeue/default").status_code == 405
    assert get_queue("default").count == 1
    same = {"Origin": "http://localhost"}
    assert client.post("/admin/rq/queue/default/queued/empty", headers=same).status_code == 200
    assert get_queue("default").count == 0


# --- cookies and brute force ---------------------------------------------------------------------


def _cookie(response, name: str) -> str:
    headers = [h for h in response.headers.getlist("Set-Cookie") if h.startswith(name + "=")]
    assert headers, f"no {name} cookie set"
    return headers[-1]


@pytest.mark.parametrize(
    "settings, secure",
    [
        ({"SESSION_COOKIE_SECURE": False}, False),
        ({"SESSION_COOKIE_SECURE": True}, True),
        # Behind TLS by default: an https APP_URL is enough.
        ({"APP_URL": "https://sign.example.com", "SESSION_COOKIE_SECURE": ""}, True),
    ],
)
def test_session_and_remember_cookies_are_httponly_lax_and_secure_behind_tls(make_app, users, settings, secure):
    app = make_app(**settings)
    client = app.test_client()
    base = "https://localhost" if secure else "http://localhost"
    page = client.get("/auth/login", base_url=base)
    # Over https Flask-WTF also wants a same-site Referer, as a browser sends.
    response = client.post(
        "/auth/login",
        base_url=base,
        headers={"Referer": f"{base}/auth/login"},
        data={
            "email": "staff@example.com",
            "password": "staff-password",
            "remember": "1",
            "csrf_token": csrf_from(page),
        },
    )
    assert response.status_code == 302
    for name in ("session", "remember_token"):
        cookie = _cookie(response, name)
        assert "HttpOnly" in cookie and "SameSite=Lax" in cookie, cookie
        assert bool(re.search(r";\s*Secure(;|$)", cookie)) == secure, cookie


def test_login_signing_and_verify_are_rate_limited_with_a_friendly_page(make_app, users):
    app = make_app(LOGIN_RATE_LIMIT="3 per minute", SIGNING_RATE_LIMIT="3 per minute")
    client = app.test_client()
    token = csrf_from(client.get("/auth/login"))
    logins = [
        client.post("/auth/login", data={"email": "staff@example.com", "password": "guess", "csrf_token": token})
        for _ in range(4)
    ]
    assert [r.status_code for r in logins] == [401, 401, 401, 429]
    assert b"Too many attempts" in logins[-1].data and b"Traceback" not in logins[-1].data
    guesses = [client.get(f"/sign/{'g' * 42}{i}") for i in range(4)]
    assert [r.status_code for r in guesses] == [404, 404, 404, 429]
    assert b"Too many requests from your network" in guesses[-1].data
    # /verify shares the recipients' budget: a guesser cannot switch to it.
    verify = client.get("/verify")
    assert verify.status_code == 429 and b"Too many" in verify.data and b"Traceback" not in verify.data
    assert client.post(f"/sign/{'g' * 43}/sign", data={"name": "x", "csrf_token": token}).status_code == 429


def test_page_images_have_their_own_budget_and_stop_a_guesser_too(make_app, users):
    app = make_app(SIGNING_RATE_LIMIT="2 per minute", SIGNING_PAGE_IMAGE_RATE_LIMIT="3 per minute")
    client = app.test_client()
    images = [client.get(f"/sign/{'g' * 43}/pages/{number}") for number in range(1, 5)]
    assert [r.status_code for r in images] == [404, 404, 404, 429]
    assert b"Too many requests from your network" in images[-1].data
    # A page view fetches every page's image: they do not spend the page's own budget.
    assert client.get(f"/sign/{'g' * 43}").status_code == 404


# --- XSS: what staff and recipients typed is text on every page, mail and PDF ---------------------

SCRIPT = "<script>alert(1)</script>"
ATTRIBUTE = '"><img src=x onerror=alert(1)>'
#: The dangerous fragments of both payloads, which must never reach HTML unescaped.
RAW = ("<script>alert(1)", "<img src=x onerror")
#: A row value that would pull a local file into the PDF if it were not escaped.
FILE_ROW = '<iframe src="file:///etc/passwd"></iframe><img src="file:///etc/passwd">'
XSS_HTML = (
    '<meta charset="utf-8"><body style="font-family:\'DejaVu Serif\'"><h1>Contract</h1>'
    "<p>For {{ name }}, salary {{ salary }}.</p></body>"
)


def _assert_escaped(body: str, where: str) -> None:
    for raw in RAW:
        assert raw not in body, f"{raw!r} unescaped on {where}"


@pytest.fixture
def hostile(app, users, smtp, run_jobs):
    """A batch whose template, batch, recipients, decline reason and error text all carry script payloads,
    taken through the real pipeline (PDF render, invitation mail) and a real decline."""
    from bulksign.batches import counts as batch_counts
    from bulksign.models import SigningRequest, utcnow
    from bulksign.signing.links import issue_link
    from bulksign.signing.recipient_actions import decline
    from bulksign.work.pipeline import enqueue_renders
    from tests.support.batches import make_batch, request_ids

    now = utcnow()
    batch_id = make_batch(
        now=now,
        user=users["staff"],
        html=XSS_HTML,
        name=f"Batch {SCRIPT} {ATTRIBUTE}",
        recipients=[
            ("xss1@example.com", f"Eve {SCRIPT}"),
            ("xss2@example.com", f"Mal {ATTRIBUTE}"),
            ("xss3@example.com", FILE_ROW),
        ],
    )
    ids = request_ids(batch_id)
    enqueue_renders(ids)
    run_jobs("pdf", "mail")
    token = issue_link(db.session, request_id=ids[1], secret=app.config["SECRET_KEY"], now=now)
    db.session.commit()
    assert (
        decline(
            db.session,
            request_id=ids[1],
            now=now,
            reason=f"No {SCRIPT} {ATTRIBUTE}",
            ip="127.0.0.1",
            user_agent=f"UA {SCRIPT}",
        ).status
        == "declined"
    )
    run_jobs("mail")
    failed = SigningRequest(
        batch_id=batch_id,
        row_number=9,
        email=f"x{ATTRIBUTE}@example.com",
        name=SCRIPT,
        data={"name": SCRIPT},
        status="failed",
        error_message=f"Error {SCRIPT} {ATTRIBUTE}",
        created_at=now,
        status_changed_at=now,
    )
    db.session.add(failed)
    batch_counts.rebuild(db.session, batch_ids=[batch_id])
    db.session.commit()
    return {"batch_id": batch_id, "ids": [*ids, failed.id], "token": token}


def _caught_into_mailbox(app, smtp) -> list[str]:
    """The mails the SMTP server received, dropped where the admin mailbox reads them."""
    from pathlib import Path

    folder = Path(app.config["VAR_DIR"]) / "mailbox"
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for i, received in enumerate(smtp.received):
        name = f"{1_800_000_000 + i}.000000-{i:08x}.eml"
        (folder / name).write_bytes(received.message.as_bytes())
        names.append(name)
    return names


def test_script_payloads_render_escaped_on_every_staff_page(app, client, auth, hostile, smtp):
    from bulksign.models import Batch

    batch_id = hostile["batch_id"]
    template_id = db.session.get(Batch, batch_id).template_version.template_id
    mails = _caught_into_mailbox(app, smtp)
    assert mails
    auth.login_admin()
    pages = [
        "/",
        "/batches/",
        f"/batches/?q={SCRIPT}",
        f"/batches/{batch_id}",
        f"/batches/{batch_id}/requests",
        f"/batches/{batch_id}/progress",
        f"/batches/{batch_id}/requests?q={ATTRIBUTE}",
        f"/batches/{batch_id}?status=failed",
        "/templates/",
        f"/templates/{template_id}",
        f"/templates/{template_id}/edit",
        f"/templates/{template_id}/preview",
        "/batches/new",
        "/admin/",
        "/admin/mailbox",
        *[f"/batches/{batch_id}/requests/{rid}" for rid in hostile["ids"]],
        *[f"/admin/mailbox/{name}" for name in mails],
    ]
    # A status, sort or cursor that is none the list knows is refused, and the refusal page escapes it too.
    refused = [
        f"/batches/{batch_id}/requests?status={SCRIPT}",
        f"/batches/{batch_id}/requests?sort={ATTRIBUTE}",
        f"/batches/{batch_id}/requests?cursor={SCRIPT}",
    ]
    escaped_seen = 0
    for path, status in [(p, 200) for p in pages] + [(p, 400) for p in refused]:
        response = client.get(path)
        assert response.status_code == status, (path, response.status_code)
        body = response.get_data(as_text=True)
        _assert_escaped(body, path)
        escaped_seen += "&lt;script&gt;alert(1)&lt;/script&gt;" in body or "&#34;&gt;&lt;img src=x" in body
    assert escaped_seen >= 10  # the payloads were on the pages, escaped (not merely absent)
    timeline = client.get(f"/batches/{batch_id}/requests/{hostile['ids'][1]}").get_data(as_text=True)
    assert "No &lt;script&gt;alert(1)&lt;/script&gt;" in timeline  # the decline reason


def test_script_payloads_are_escaped_in_the_html_part_of_every_mail(hostile, smtp):
    assert len(smtp.received) >= 3  # two invitations and the owner's decline notice
    for received in smtp.received:
        html = received.html()
        if html:
            _assert_escaped(html, f"mail {received.subject}")
    notices = smtp.of_kind("decline-notice")
    assert notices and f"No {SCRIPT}" in notices[0].text()  # the owner reads the reason as plain text
    invitations = [m for m in smtp.received if m.html()]
    assert any("Eve &lt;script&gt;alert(1)&lt;/script&gt;" in m.html() for m in invitations)


def _pdf_text(data: bytes) -> str:
    return subprocess.run(
        ["pdftotext", "-enc", "UTF-8", "-", "-"], input=data, capture_output=True, timeout=30, check=True
    ).stdout.decode()


#: PDF objects that run or open something: none may be in a document made from a row.
ACTIVE_PDF = (
    b"/JavaScript",
    b"/JS",
    b"/Launch",
    b"/OpenAction",
    b"/AA",
    b"/EmbeddedFile",
    b"/RichMedia",
    b"/SubmitForm",
)


def _assert_inert(pdf: bytes, where: str) -> None:
    for marker in ACTIVE_PDF:
        assert marker not in pdf, f"{marker!r} in {where}"


def test_script_payloads_are_literal_text_in_the_pdfs_with_no_active_content(app, hostile):
    from bulksign.documents.storage import get_storage
    from bulksign.models import Document

    documents = db.session.scalars(db.select(Document).where(Document.request_id.in_(hostile["ids"][:3]))).all()
    assert len(documents) == 3
    texts = []
    for document in documents:
        pdf = get_storage().get(document.storage_key)
        _assert_inert(pdf, document.storage_key)
        texts.append(_pdf_text(pdf))
    joined = " ".join(" ".join(text.split()) for text in texts)
    assert "Eve <script>alert(1)</script>" in joined
    assert 'Mal "><img src=x onerror=alert(1)>' in joined
    assert FILE_ROW in joined and "root:x:" not in joined


# --- template injection and what the PDF renderer may read ----------------------------------------

#: Jinja expressions that reach Python internals or app state in an unsandboxed template.
INJECTIONS = [
    "{{ config }}",
    "{{ ''.__class__.__mro__ }}",
    "{{ self }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ request }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ lipsum.__globals__ }}",
    "{{ joiner.__init__.__globals__ }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ url_for.__globals__ }}",
    "{{ g }}",
    "{{ session }}",
    "{{ ''|attr('__class__') }}",
    "{{ '%s' % config }}",
    "{{ range.__self__ }}",
    "{% for k in self.__dict__ %}{{ k }}{% endfor %}",
    "{{ config.items() }}",
    "{{ self._TemplateReference__context }}",
    "{{ ().__class__.__base__.__subclasses__() }}",
]
#: What would show in the output if an injection reached anything.
LEAKS = (
    "test-secret-key",
    "SECRET_KEY",
    "postgresql",
    "<class",
    " at 0x",
    "__globals__",
    "builtins",
    "<function",
    "<bound",
    "Request",
    "Undefined",
    "Config",
    "<module",
)


def _assert_no_leak(text: str, where: str) -> None:
    for leak in LEAKS:
        assert leak not in text, f"{leak!r} in {where}"


def test_template_expressions_cannot_reach_internals_in_documents_or_mails(app):
    from bulksign.doc_templates.errors import TemplateError
    from bulksign.doc_templates.jinja_sandbox import render_html, render_text

    for payload in INJECTIONS:
        for render in (render_html, render_text):
            try:
                out = render(f"<p>A {payload} B</p>", {"name": "Ann"})
            except TemplateError:
                continue
            _assert_no_leak(out, f"{render.__name__}({payload})")
        # A row value is data, never a template.
        assert render_html("<p>{{ name }}</p>", {"name": payload}).count("{") == payload.count("{")


def _save_template(client, html: str, **fields):
    page = client.get("/templates/new")
    return client.post("/templates/new", data={"csrf_token": csrf_from(page), "name": "Probe", "html": html, **fields})


def _preview_text(client, saved) -> str | None:
    """The text of the saved template's PDF preview, or None when the template or its render was refused."""
    if saved.status_code != 302:
        assert saved.status_code == 422, saved.status_code
        return None
    preview = client.get(saved.headers["Location"].rstrip("/") + "/preview.pdf")
    if preview.status_code == 422:
        return None
    assert preview.status_code == 200
    _assert_inert(preview.data, "preview")
    return _pdf_text(preview.data)


def test_template_injection_through_the_template_pages_shows_nothing_harmful(client, auth):
    auth.login()
    for payload in INJECTIONS[:5]:
        saved = _save_template(client, f"<p>A {payload} B</p>", email_subject=f"S {payload}", email_body=f"B {payload}")
        # A refusal shows the line as written (and the form keeps the text): the payload itself is no leak.
        _assert_no_leak(saved.get_data(as_text=True).replace(payload, ""), f"the form with {payload}")
        text = _preview_text(client, saved)
        if text is not None:
            _assert_no_leak(text, f"the preview of {payload}")


def test_a_template_that_fails_or_explodes_on_its_values_is_a_clear_422_never_a_500(client, auth):
    auth.login()
    for expression in (
        "{{ name.first.last }}",
        "{{ 1/0 }}",
        "{{ name + 1 }}",
        "{{ range(10**6) }}",
        "{{ '%d' % name }}",
        "{{ name.items() }}",
        # gigabytes of text or a number with a million digits, in the web worker
        "{{ name * 10**10 }}",
        "{{ [name] * 10**9 }}",
        "{{ (10**1000)**1000 }}",
        # one C call of 15–30 s, out of the time limit's reach; errors the render job did not catch
        "{{ 'a'|center(1000000000) }}",
        "{{ '%999999999s'|format(name) }}",
        "{{ ('x' * 100000)|replace('x', 'x' * 100000) }}",
        "{{ name|xmlattr }}",
        "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
    ):
        saved = _save_template(client, f"<p>{expression}</p>")
        preview = (
            client.get(saved.headers["Location"].rstrip("/") + "/preview.pdf") if saved.status_code == 302 else saved
        )
        assert preview.status_code == 422, (expression, preview.status_code)
        body = preview.get_data(as_text=True)
        assert "could not be filled in" in body or "not allowed" in body or saved.status_code == 422, expression


FILE_READS = [
    '<iframe src="file:///etc/passwd" width="600" height="900"></iframe>',
    '<img src="file:///etc/passwd">',
    '<object data="file:///etc/passwd" type="text/plain" width="600" height="900"></object>',
    '<embed src="file:///etc/passwd" type="text/plain">',
    '<link rel="stylesheet" href="file:///etc/passwd">',
    '<style>@import url("file:///etc/passwd");</style><p>x</p>',
    '<p style="background:url(file:///etc/passwd)">x</p>',
    '<iframe src="/etc/passwd" width="600" height="900"></iframe>',
    '<iframe src="../../../../../../etc/passwd" width="600" height="900"></iframe>',
    '<iframe src="FiLe:///etc/passwd"></iframe>',
    '<iframe src="fi\nle:///etc/passwd"></iframe>',
    '<base href="file:///etc/"><iframe src="passwd" width="600" height="900"></iframe>',
    '<meta http-equiv="refresh" content="0;url=file:///etc/passwd">',
    # Python's HTML parser reads "<!-->" as an open comment, WebKit as an empty one.
    '<!--><iframe src="file:///etc/passwd" width="600" height="900"></iframe>-->',
]


def test_a_template_cannot_read_a_local_file_into_the_pdf(client, auth):
    auth.login()
    for html in FILE_READS:
        text = _preview_text(client, _save_template(client, f"<p>Contract</p>{html}"))
        assert text is None or "root:x:" not in text, html


def test_a_template_cannot_read_internal_web_services_into_the_pdf(client, auth, live_server):
    """The PDF renderer runs next to internal services (/metrics from loopback, cloud metadata): no network."""
    auth.login()
    for html in (
        f'<!--><iframe src="{live_server}/healthz" width="600" height="300"></iframe>-->',
        f'<!--><iframe src="{live_server}/metrics" width="600" height="900"></iframe>-->',
    ):
        text = _preview_text(client, _save_template(client, f"<p>Contract</p>{html}"))
        assert text is None or ("database" not in text and "bulksign_" not in text), text


# --- path traversal ------------------------------------------------------------------------------

TRAVERSALS = [
    "../../../../../../etc/passwd",
    "..%2f..%2f..%2f..%2fetc%2fpasswd",
    "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "%252e%252e%252fetc%252fpasswd",
    "..\\..\\..\\etc\\passwd",
    "/etc/passwd",
    "%2fetc%2fpasswd",
    "....//....//etc/passwd",
    "..%00/etc/passwd",
]
#: What a leaked file would show: /etc/passwd, or our own source code or settings.
LEAKED = ("root:x:", "SECRET_KEY", "def create_app", "import ")


@pytest.mark.parametrize(
    "key",
    [
        "../x",
        "a/../../b",
        "/etc/passwd",
        "%2e%2e%2fetc%2fpasswd",
        "..%2fx",
        "a/%2e%2e/b",
        "a\\..\\b",
        "a/\x00/b",
        "C:\\Windows\\win.ini",
        "a/../" * 3 + "b",
    ],
)
def test_storage_keys_that_could_leave_the_storage_root_are_refused_by_every_backend(tmp_path, key):
    from bulksign.documents.storage import InvalidKey, LocalStorage, check_key

    with pytest.raises(InvalidKey):
        check_key(key)  # S3Storage checks every key with the same function
    with pytest.raises(InvalidKey):
        LocalStorage(tmp_path / "root").get(key)


def _assert_nothing_leaked(response, where: str) -> None:
    assert response.status_code in (400, 403, 404, 405, 410), (where, response.status_code)
    body = response.get_data(as_text=True)
    for leak in LEAKED:
        assert leak not in body, (where, leak)


def test_download_routes_refuse_traversal_in_their_path(app, client, auth):
    auth.login_admin()
    for attack in TRAVERSALS:
        for path in (
            f"/batches/uploads/{attack}/errors.csv",
            f"/admin/mailbox/{attack}",
            f"/admin/mailbox/{attack}.eml",
            f"/static/{attack}",
            "/static/..%2f..%2fbulksign%2fconfig.py",
            f"/admin/rq/static/{attack}",
            "/static/../bulksign/core/config.py",
            "/admin/rq/static/..%2f..%2fweb.py",
            f"/sign/{attack}",
            f"/sign/{attack}/document",
            f"/sign/{attack}/signed",
            f"/sign/{attack}/pages/1",
            f"/t/{attack}",
        ):
            response = client.get(path, follow_redirects=True)  # werkzeug merges "//" with a 308
            if path.startswith("/t/"):  # the pixel answers a GIF whatever it is given
                assert response.mimetype == "image/gif"
                continue
            _assert_nothing_leaked(response, path)


def test_documents_and_exports_with_a_forged_storage_key_serve_nothing(app, client, auth, users):
    from bulksign.models import Document, Export, utcnow
    from tests.support.clock import NOW
    from tests.support.signing_requests import make_sent_request

    sent = make_sent_request(now=utcnow(), owner=users["staff"])
    document = db.session.scalars(db.select(Document).where(Document.request_id == sent.id)).one()
    auth.login_admin()
    for key in ("../../../../../../etc/passwd", "/etc/passwd", "..%2f..%2fetc%2fpasswd"):
        document.storage_key = key
        export = Export(batch_id=sent.batch_id, status="ready", storage_key=key, created_at=NOW)
        db.session.add(export)
        db.session.commit()
        original = client.get(f"/sign/{sent.token}/document")
        assert original.status_code == 503 and "root:x:" not in original.get_data(as_text=True), key
        image = client.get(f"/sign/{sent.token}/pages/1")
        assert image.status_code == 503 and "root:x:" not in image.get_data(as_text=True), key
        _assert_nothing_leaked(client.get(f"/batches/{sent.batch_id}/exports/{export.id}/download"), key)


# --- CSV / formula injection ---------------------------------------------------------------------

FORMULAS = [
    "=1+1",
    "+1+1",
    "-1+1",
    "@SUM(A1)",
    "\t=1+1",
    "\r=1+1",
    '=HYPERLINK("http://evil.example","x")',
    "=cmd|' /C calc'!A0",
]


def _assert_no_formula_cell(rows: list[list[str]], *, skip_columns: int = 0) -> int:
    from bulksign.core.spreadsheets import FORMULA_START

    cells = 0
    for row in rows[1:]:
        for cell in row[skip_columns:]:
            assert not cell.startswith(FORMULA_START), row
            cells += 1
    return cells


def test_recipients_csv_export_escapes_every_formula_prefix(app, client, auth, users):
    import csv

    from bulksign.models import SigningRequest
    from tests.support.batchdata import batch_in_states
    from tests.support.clock import NOW

    batch = batch_in_states(db.session, statuses=["declined"] * len(FORMULAS), now=NOW, user_id=users["staff"].id)
    rows = db.session.scalars(
        db.select(SigningRequest).where(SigningRequest.batch_id == batch.id).order_by(SigningRequest.id)
    ).all()
    for row, formula in zip(rows, FORMULAS):
        row.name, row.decline_reason, row.error_message, row.phone = formula, formula, formula, formula
        row.email = f"{formula}@example.com"
    db.session.commit()
    auth.login()
    response = client.get(f"/batches/{batch.id}/export.csv")
    assert response.status_code == 200
    table = list(csv.reader(io.StringIO(response.get_data(as_text=True).lstrip("\ufeff"), newline="")))
    assert len(table) == len(FORMULAS) + 1
    _assert_no_formula_cell(table)
    names = [r[table[0].index("name")] for r in table[1:]]
    # Kept, as text; a formula after a leading tab or line break is guarded too (a spreadsheet may split there).
    assert names == ["'" + f.replace("\t=", "\t'=").replace("\r=", "\r'=") for f in FORMULAS]


def test_error_report_csv_escapes_every_formula_prefix(app, client, auth, users):
    import csv

    from bulksign.doc_templates.versions import create_template
    from bulksign.models import utcnow

    saved = create_template(
        db.session, name="T", html="<p>{{ name }} {{ position }}</p>", user=users["staff"], now=utcnow()
    )
    db.session.commit()
    header = "email,name,position,=cmd|' /C calc'!A0,@SUM(A1),@SUM(A1)\n"
    body = "".join(f'"{f}","{f}",,x,y,z\n' for f in FORMULAS)
    auth.login()
    page = client.get("/batches/new")
    checked = client.post(
        "/batches/new/validate",
        content_type="multipart/form-data",
        data={
            "csrf_token": csrf_from(page),
            "template_id": str(saved.template.id),
            "file": (io.BytesIO((header + body).encode()), "people.csv"),
        },
    )
    assert checked.status_code == 200
    link = re.search(r"/batches/uploads/([0-9a-f]{32})/errors\.csv", checked.get_data(as_text=True))
    assert link, "no error report link on the check page"
    report = client.get(link.group(0))
    assert report.status_code == 200 and report.mimetype == "text/csv"
    table = list(csv.reader(io.StringIO(report.get_data(as_text=True).lstrip("\ufeff"), newline="")))
    assert _assert_no_formula_cell(table) >= 2 * len(FORMULAS)


# --- signer links never reach staff ----------------------------------------------------------------

#: Listings that take the recipients filter.
FILTERED = {
    "batches.detail",
    "batches.table",
    "batches.export_csv",
    "api_dashboard.list_requests",
    "api_dashboard.export_csv",
}


def _staff_get_urls(app, *, batch_id: int, request_id: int, template_id: int, export_id: int) -> list[str]:
    """Every staff GET route that can be built for this batch and request (admin pages included)."""
    values = {
        "batch_id": batch_id,
        "request_id": request_id,
        "template_id": template_id,
        "export_id": export_id,
        "instance_number": 0,
    }
    urls = []
    for rule in _rules(app, public=False):
        if "GET" not in rule.methods or not set(rule.arguments) <= set(values):
            continue
        url = _url(rule, **values)
        urls.append(url)
        if rule.endpoint in FILTERED:  # the filters and search the pages offer
            urls += [f"{url}?status=sent", f"{url}?status=opened", f"{url}?q=link", f"{url}?sort=email&dir=desc"]
    return urls


def test_no_staff_page_export_or_api_response_contains_a_signing_link(app, client, auth, users, smtp, run_jobs):
    from bulksign.models import Batch, Export, SigningRequest, User, utcnow
    from bulksign.people.users import create_api_key
    from bulksign.signing.links import current_token
    from bulksign.signing.recipient_actions import open_request
    from bulksign.work.pipeline import enqueue_renders
    from tests.support.batches import make_batch, request_ids

    now = utcnow()
    admin_id = users["admin"].id  # the workers end the session these were loaded in
    batch_id = make_batch(
        now=now, user=users["staff"], recipients=[("ann@example.com", "Ann"), ("bob@example.com", "Bob")]
    )
    version = db.session.get(Batch, batch_id).template_version
    template_id = version.template_id
    # A staff-written subject that carries the link: the mail log on staff pages must still not show it.
    version.email_subject = "Sign {{ document_name }}: {{ signing_link }}"
    db.session.commit()
    ids = request_ids(batch_id)
    enqueue_renders(ids)
    run_jobs("pdf", "mail")
    request = db.session.get(SigningRequest, ids[0])
    token = current_token(request, secret=app.config["SECRET_KEY"])
    assert token and request.status == "sent" and token in smtp.to("ann@example.com")[0].subject
    open_request(db.session, request_id=ids[0], now=now, ip="127.0.0.1", user_agent="Browser")
    export = Export(batch_id=batch_id, status="ready", storage_key="exports/none.zip", created_at=now)
    db.session.add(export)
    key = create_api_key(db.session, user=db.session.get(User, admin_id), name="sweep", now=now)
    db.session.commit()
    secrets = (token, f"/sign/{token}", request.token_nonce)

    auth.login_admin()
    urls = _staff_get_urls(app, batch_id=batch_id, request_id=ids[0], template_id=template_id, export_id=export.id)
    bearer = {"Authorization": f"Bearer {key.secret}"}
    fetched = 0
    for url in urls:
        response = client.get(url, headers=bearer if url.startswith("/api/") else {}, follow_redirects=True)
        if response.status_code != 200:
            # 409: a read only a PDF template answers (the sweep's template is HTML), a document not signed yet;
            # 503: the API's download of the export, whose file the sweep never stored.
            assert response.status_code in (404, 409, 422, 503), (url, response.status_code)
            continue
        for secret in secrets:
            assert secret.encode() not in response.data, (url, secret[:12])
        fetched += 1
    assert fetched >= 20
    assert {
        f"/batches/{batch_id}",
        f"/batches/{batch_id}/requests",
        f"/batches/{batch_id}/export.csv",
        f"/batches/{batch_id}/requests/{ids[0]}",
        f"/api/v1/batches/{batch_id}/requests",
        f"/api/v1/batches/{batch_id}/export.csv",
        f"/api/v1/batches/{batch_id}",
    } <= set(urls)


def test_no_other_site_may_frame_a_staff_page(app, client, auth):
    """Clickjacking: a hidden frame of the batch page must not turn a click elsewhere into "cancel the batch"."""
    auth.login_admin()
    for path in (
        "/auth/login",
        "/",
        "/batches/",
        "/batches/new",
        "/templates/",
        "/admin/",
        "/admin/webhooks",
        "/batches/999",
        "/admin/rq/",
    ):
        response = client.get(path)
        assert response.headers.get("X-Frame-Options") in ("DENY", "SAMEORIGIN"), path
        assert response.headers.get("X-Content-Type-Options") == "nosniff", path
    assert client.get(f"/sign/{'x' * 43}").headers["X-Frame-Options"] == "DENY"  # recipients: stricter still


def test_an_api_key_never_becomes_a_web_session_that_outlives_it(app, make_app, users):
    from bulksign.models import utcnow
    from bulksign.people.users import create_api_key, revoke_api_key

    key = create_api_key(db.session, user=users["admin"], name="ci", now=utcnow())
    db.session.commit()
    # An app with no context pushed by the test: each request gets its own, as in production.
    client = make_app().test_client()
    response = client.get("/api/v1/me", headers={"Authorization": f"Bearer {key.secret}"})
    assert response.status_code == 200 and response.get_json()["email"] == "admin@example.com"
    assert not response.headers.getlist("Set-Cookie")
    revoke_api_key(db.session, key_id=key.key.id, now=utcnow())
    db.session.commit()
    assert client.get("/admin/").status_code == 302  # the cookie jar of a leaked key's client opens nothing
    assert client.get("/api/v1/me", headers={"Authorization": f"Bearer {key.secret}"}).status_code == 401


def test_a_password_reset_ends_the_sessions_made_with_the_old_password(make_app, users):
    from bulksign.models import User
    from bulksign.people.users import set_password

    staff_id = users["staff"].id
    client = make_app().test_client()  # its own app context per request, as in production
    page = client.get("/auth/login")
    client.post(
        "/auth/login",
        data={
            "email": "staff@example.com",
            "password": "staff-password",
            "remember": "1",
            "csrf_token": csrf_from(page),
        },
    )
    assert client.get("/batches/").status_code == 200
    set_password(db.session, user=db.session.get(User, staff_id), password="a-new-password-7")
    db.session.commit()
    assert client.get("/batches/").status_code == 302  # neither the session nor "remember me" lets it back in
    client.delete_cookie("session")
    assert client.get("/batches/").status_code == 302


def test_values_the_database_cannot_hold_are_a_400_never_a_500(app, client, auth, users):
    from bulksign.models import utcnow
    from bulksign.people.users import create_api_key

    key = create_api_key(db.session, user=users["admin"], name="ci", now=utcnow()).secret
    auth.login_admin()
    for path, status in (
        ("/batches/2147483648", 404),
        ("/templates/2147483648", 404),
        ("/batches/99999999999999999999", 404),
        ("/batches/1/requests/99999999999999999999", 404),
        ("/batches/?q=%00", 400),
        ("/templates/2147483648/preview.pdf", 404),
    ):
        response = client.get(path)
        assert response.status_code == status, (path, response.status_code)
    api = client.get("/api/v1/batches/2147483648", headers={"Authorization": f"Bearer {key}"})
    assert api.status_code == 404 and api.is_json
    page = client.get("/batches/new")
    checked = client.post(
        "/batches/new/validate",
        content_type="multipart/form-data",
        data={"csrf_token": csrf_from(page), "template_id": "2147483648", "file": (io.BytesIO(b"email\n"), "a.csv")},
    )
    assert checked.status_code == 400


def test_a_nul_byte_in_the_recipients_search_is_a_400_even_on_the_streamed_csv(app, client, auth, users):
    from tests.support.batchdata import batch_in_states
    from tests.support.clock import NOW

    batch = batch_in_states(db.session, statuses=["sent"], now=NOW, user_id=users["staff"].id)
    auth.login()
    for path in (f"/batches/{batch.id}/export.csv?q=a%00b", f"/batches/{batch.id}/requests?q=%00"):
        response = client.get(path)
        assert response.status_code == 400, (path, response.status_code)


# --- recipient files built to stall the site ------------------------------------------------------


def _recipients_template(users) -> int:
    from bulksign.doc_templates.versions import create_template
    from bulksign.models import utcnow

    saved = create_template(db.session, name="Probe", html="<p>{{ name }}</p>", user=users["staff"], now=utcnow())
    db.session.commit()
    return saved.template.id


@pytest.mark.parametrize("name", sorted(HOSTILE_RECIPIENT_FILES))
def test_hostile_recipient_files_are_refused_by_the_api_and_the_page_with_a_clear_message(
    app, client, auth, users, name
):
    from bulksign.models import utcnow
    from bulksign.people.users import create_api_key

    filename, build = HOSTILE_RECIPIENT_FILES[name]
    data = build()
    template_id = _recipients_template(users)
    key = create_api_key(db.session, user=users["staff"], name="probe", now=utcnow()).secret
    db.session.commit()
    auth.login()
    page = client.get("/batches/new")
    checked = client.post(
        "/batches/new/validate",
        content_type="multipart/form-data",
        headers={"HX-Request": "true"},
        data={"csrf_token": csrf_from(page), "template_id": template_id, "file": (io.BytesIO(data), filename)},
    )
    assert checked.status_code == 413, name
    # The API last: its bearer key stays the request's user in the test's app context.
    api = app.test_client().post(
        "/api/v1/batches/validate",
        headers={"Authorization": f"Bearer {key}"},
        content_type="multipart/form-data",
        data={"template_id": template_id, "file": (io.BytesIO(data), filename)},
    )
    assert api.status_code == 413 and api.is_json, (name, api.status_code, api.get_data(as_text=True)[:300])
    message = api.json["error"]["message"]
    assert "Split" in message or "Delete" in message, message
    assert message.split(":")[0].split("(")[0] in checked.get_data(as_text=True), name


def test_healthz_answers_while_the_worst_recipient_files_are_checked(live_server, users):
    """The probe's 1.7 KB sheet kept a web worker busy past gunicorn's timeout; /healthz waited 30.8 s."""
    import threading
    import time

    import requests

    from bulksign.models import utcnow
    from bulksign.people.users import create_api_key

    template_id = _recipients_template(users)
    key = create_api_key(db.session, user=users["staff"], name="probe", now=utcnow()).secret
    db.session.commit()
    files = {name: (filename, build()) for name, (filename, build) in HOSTILE_RECIPIENT_FILES.items()}
    answers: dict[str, requests.Response] = {}

    def check_all() -> None:
        with requests.Session() as session:
            for name, (filename, data) in files.items():
                answers[name] = session.post(
                    f"{live_server}/api/v1/batches/validate",
                    timeout=60,
                    headers={"Authorization": f"Bearer {key}"},
                    data={"template_id": template_id},
                    files={"file": (filename, data)},
                )

    uploader = threading.Thread(target=check_all, daemon=True)
    uploader.start()
    health: list[tuple[int, float]] = []
    deadline = time.monotonic() + 300
    while uploader.is_alive() and time.monotonic() < deadline:
        started = time.monotonic()
        health.append((requests.get(f"{live_server}/healthz", timeout=30).status_code, time.monotonic() - started))
        time.sleep(0.05)  # the pace of the health probe: a sample every 50 ms while the uploads run
    uploader.join(timeout=120)
    assert {name: r.status_code for name, r in answers.items()} == {name: 413 for name in files}
    assert health and all(status == 200 for status, _ in health)
    print(f"/healthz while checking: {len(health)} answers, slowest {max(s for _, s in health):.3f} s")


#: Time zones that are not zones: folders of the zone database, and a name longer than the column.
NOT_TIME_ZONES = ("America", "Etc", "Europe/", "x" * 300, "../../etc/passwd")


def test_a_time_zone_that_is_not_one_is_a_clear_error_on_the_api_and_the_batch_form(app, client, auth, users):
    from bulksign.doc_templates.versions import create_template
    from bulksign.models import utcnow
    from bulksign.people.users import create_api_key

    template_id = create_template(
        db.session, name="C", html="<p>{{ name }}</p>", user=users["staff"], now=utcnow()
    ).template.id
    key = create_api_key(db.session, user=users["staff"], name="ci", now=utcnow()).secret
    db.session.commit()
    auth.login()
    page = client.get(f"/batches/new?template_id={template_id}")
    preview = client.post(
        "/batches/new/validate",
        content_type="multipart/form-data",
        data={
            "csrf_token": csrf_from(page),
            "template_id": template_id,
            "file": (io.BytesIO(b"email,name\na@example.com,A\n"), "people.csv"),
        },
    ).get_data(as_text=True)
    upload_id = re.search(r'name="upload_id" value="([0-9a-f]+)"', preview).group(1)
    for zone in NOT_TIME_ZONES:
        response = client.post(
            "/batches/new", data={"csrf_token": csrf_from(page), "upload_id": upload_id, "timezone": zone}
        )
        assert response.status_code == 422 and "Unknown time zone" in response.get_data(as_text=True), zone
    # After the pages: the test's app context would carry the API user into them.
    for zone in NOT_TIME_ZONES:
        response = client.post(
            "/api/v1/batches",
            headers={"Authorization": f"Bearer {key}"},
            content_type="multipart/form-data",
            data={
                "template_id": template_id,
                "timezone": zone,
                "file": (io.BytesIO(b"email,name\na@example.com,A\n"), "people.csv"),
            },
        )
        assert response.status_code == 422 and "time zone" in response.json["error"]["message"], (
            zone,
            response.json,
        )


def test_json_nested_deeper_than_the_parser_goes_is_a_400_on_every_json_endpoint(app, client, users):
    from bulksign.models import utcnow
    from bulksign.people.users import create_api_key

    app.config["BOUNCE_WEBHOOK_SECRET"] = "bounce-secret"
    key = create_api_key(db.session, user=users["admin"], name="ci", now=utcnow()).secret
    db.session.commit()
    deep = "[" * 100_000
    sns = '{"Type": "Notification", "Message": "' + deep + '"}'
    api = {"Authorization": f"Bearer {key}"}
    sends = [
        (method, rule.rule, api)
        for rule in _rules(app, blueprints=tuple(EXPECTED_CSRF_EXEMPT - {"rq_dashboard", "webhooks"}))
        for method in sorted(rule.methods & {"POST", "PUT"})
    ]
    assert {method for method, _, _ in sends} == {"POST", "PUT"}, "no JSON endpoint found"
    for method, path, headers in sends + [("POST", "/webhooks/bounces", {"X-Bounce-Secret": "bounce-secret"})]:
        path = re.sub(r"<[^>]+>", "1", path)
        for body in (deep, sns):
            response = client.open(path, method=method, data=body, headers=headers, content_type="application/json")
            assert response.status_code < 500, (method, path, response.status_code)


def test_retry_failed_refuses_ids_that_are_not_whole_numbers(app, client, users):
    from bulksign.models import utcnow
    from bulksign.people.users import create_api_key
    from tests.support.batchdata import batch_in_states

    batch = batch_in_states(db.session, statuses=["failed"], now=utcnow(), user_id=users["staff"].id)
    key = create_api_key(db.session, user=users["staff"], name="ci", now=utcnow()).secret
    db.session.commit()
    for body in (
        {"request_ids": [True]},
        {"request_ids": [1.5]},
        {"request_ids": ["1"]},
        {"request_ids": [2**70]},
        [1, 2],
        "x",
    ):
        response = client.post(
            f"/api/v1/batches/{batch.id}/retry-failed", json=body, headers={"Authorization": f"Bearer {key}"}
        )
        assert response.status_code == 400 and "request_ids" in response.json["error"]["message"], (
            body,
            response.status_code,
        )


@pytest.mark.parametrize(
    "path",
    [
        "/admin/rq/7/view/queues",
        "/admin/rq/7/data/queues.json",
        "/admin/rq/0/view/job/no-such-job",
        "/admin/rq/0/data/job/no-such-job.json",
        "/admin/rq/0/view/jobs/no-such-queue/queued/8/asc/1",
        "/admin/rq/0/view/jobs/default/no-such-registry/8/asc/1",
        "/admin/rq/0/data/jobs/default/no-such-registry/8/asc/1.json",
        "/admin/rq/0/data/jobs/no-such-queue/failed/8/asc/1.json",
        "/admin/rq/0/data/jobs/default/failed/0/asc/1.json",
        "/admin/rq/0/data/jobs/default/failed/x/asc/y.json",
    ],
)
def test_rq_dashboard_addresses_naming_nothing_are_a_404(app, client, auth, path):
    from bulksign.work.queues import RECONCILE, get_queue

    get_queue("default").enqueue(RECONCILE.path)  # the default queue exists
    auth.login_admin()
    assert client.get(path).status_code == 404


def test_behind_tls_browsers_are_told_to_stay_on_https_and_links_are_https(make_app, users):
    app = make_app(APP_URL="https://sign.example.com", SESSION_COOKIE_SECURE="")
    response = app.test_client().get("/auth/login", base_url="https://sign.example.com")
    assert response.headers["Strict-Transport-Security"] == "max-age=31536000"
    with app.test_request_context():
        from flask import url_for

        assert url_for("auth.login", _external=True).startswith("https://")
    plain = make_app(APP_URL="http://127.0.0.1:5000").test_client().get("/auth/login")
    assert "Strict-Transport-Security" not in plain.headers


def test_every_page_has_a_content_security_policy_and_staff_pages_are_never_cached(app, client, auth):
    from bulksign.models import utcnow
    from tests.support.signing_requests import make_sent_request

    token = make_sent_request(now=utcnow()).token
    db.session.commit()
    for path in ("/auth/login", f"/sign/{token}", "/verify", "/no-such-page"):
        csp = client.get(path).headers.get("Content-Security-Policy", "")
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp.partition("script-src")[2].split(";")[0], path
    auth.login_admin()
    for path in ("/", "/batches/", "/templates/", "/admin/", "/admin/rq/"):
        response = client.get(path)
        assert response.status_code == 200 and response.headers["Cache-Control"] == "no-store", path
        assert "default-src 'self'" in response.headers["Content-Security-Policy"], path
    assert client.get("/static/app.css").headers.get("Cache-Control") != "no-store"


def test_logging_out_ends_the_remember_me_cookie_too(app, users):
    client = app.test_client()
    page = client.get("/auth/login")
    client.post(
        "/auth/login",
        data={
            "email": "staff@example.com",
            "password": "staff-password",
            "remember": "1",
            "csrf_token": csrf_from(page),
        },
    )
    remember = client.get_cookie("remember_token").value
    with app.app_context():
        thief = app.test_client()
        thief.set_cookie("remember_token", remember)
        assert thief.get("/batches/").status_code == 200  # the cookie alone logs in, until the logout
    client.post("/auth/logout", data={"csrf_token": csrf_from(client.get("/batches/"))})
    # A copy of the cookie kept from before the logout (another device, a thief) logs nobody in. (Its own app
    # context: the test's would hand the request the user the previous one loaded.)
    thief = app.test_client()
    thief.set_cookie("remember_token", remember)
    with app.app_context():
        assert thief.get("/batches/").status_code == 302

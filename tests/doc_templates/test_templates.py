"""Document templates: versions, variables, the save-time safety check, the pages and the PDF preview."""

from __future__ import annotations

import io

import pytest
from sqlalchemy import select

from bulksign.cli.demo import DEMO_HTML
from bulksign.core.extensions import db
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.html_safety import check_html_safety
from bulksign.doc_templates.jinja_sandbox import render_html
from bulksign.doc_templates.variables import extract_variables
from bulksign.doc_templates.versions import create_template, get_version, list_templates, save_version
from bulksign.documents.pdf import render_pdf
from bulksign.models import DocumentTemplate
from tests.support.clock import NOW
from tests.support.web import csrf_from

MAIL = {
    "email_subject": "Sign {{ document_name }}",
    "email_body": "Hi {{ name }} {{ signing_link }}",
    "reminder_subject": "Reminder",
    "reminder_body": "{{ signing_link }}",
}


def test_each_save_is_a_new_immutable_version(app, users):
    first = create_template(db.session, name="NDA", html="<p>{{ name }}</p>", user=users["staff"], now=NOW)
    second = save_version(
        db.session, template=first.template, html="<p>{{ name }} {{ city }}</p>", user=users["staff"], now=NOW, **MAIL
    )
    db.session.commit()
    assert (first.version.version, second.version.version, first.template.latest_version) == (1, 2, 2)
    assert get_version(db.session, template_id=first.template.id, version=1).html == "<p>{{ name }}</p>"
    assert get_version(db.session, template_id=first.template.id).variables == ["city", "name"]
    assert [t.name for t in list_templates(db.session, user=users["staff"])] == ["NDA"]


def test_a_syntax_error_is_refused_with_its_line(app, users):
    with pytest.raises(TemplateError) as caught:
        create_template(db.session, name="Broken", html="<p>ok</p>\n<p>{{ name </p>", user=users["staff"], now=NOW)
    assert caught.value.line == 2


def test_the_demo_template_passes_the_safety_check():
    check_html_safety(DEMO_HTML.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "html, line, words",
    [
        ('<p>x</p>\n<img src="http://127.0.0.1:6379/">', 2, "may not fetch"),
        ('<img src="https://example.com/logo.png">', 1, "may not fetch"),
        ('<img src="//example.com/logo.png">', 1, "may not fetch"),
        ('<img src="file:///etc/passwd">', 1, "may not fetch"),
        ('<iframe src="ftp://example.com/x"></iframe>', 1, "may not fetch"),
        ('<link rel="stylesheet" href="http://example.com/a.css">', 1, "may not fetch"),
        ('<video poster="http://example.com/p.png"></video>', 1, "may not fetch"),
        ('<object data="http://example.com/x"></object>', 1, "may not fetch"),
        ('<img srcset="data:image/png;base64,AA 1x, http://example.com/x.png 2x">', 1, "may not fetch"),
        ('<style>\nbody { color: red }\n@import "http://example.com/a.css";\n</style>', 3, "may not fetch"),
        ("<style>p { background: url( 'file:///etc/passwd' ) }</style>", 1, "may not fetch"),
        ('<p style="background:u\\72 l(http://127.0.0.1/)">x</p>', 1, "may not fetch"),
        ('<img src="{{ photo }}">', 1, "variable"),
        ('<a href="#top">top</a><img src="data:image/png;base64,{{ photo }}">', 1, "variable"),
        ("<style>p { color: {{ colour }} }</style>", 1, "variable"),
        ('<p style="color: {{ colour }}">x</p>', 1, "variable"),
        ("<img alt={{ name }}>", 1, "quotes"),
        ('<{{ tag }} src="http://x/">', 1, "tag name"),
        ('<script>document.write("x")</script>', 1, "JavaScript"),
        ('{{ "<img src=http://127.0.0.1/>" | safe }}', 1, "safe"),
        ("{% autoescape false %}{{ name }}{% endautoescape %}", 1, "autoescape"),
        ('<meta http-equiv="refresh" content="0;url=http://127.0.0.1/">', 1, "refresh"),
    ],
)
def test_a_template_that_would_fetch_or_run_something_is_refused_at_save_with_the_line(app, users, html, line, words):
    with pytest.raises(TemplateError) as caught:
        create_template(db.session, name="Risky", html=html, user=users["staff"], now=NOW)
    assert caught.value.line == line and words in str(caught.value)
    db.session.rollback()
    assert db.session.scalar(select(DocumentTemplate)) is None


def test_template_refusals_speak_the_staff_members_language_and_keep_their_english_id(app, users):
    from flask_babel import force_locale

    with pytest.raises(TemplateError) as script:
        create_template(db.session, name="Risky", html="<script>x()</script>", user=users["staff"], now=NOW)
    with pytest.raises(TemplateError) as subject:
        create_template(
            db.session,
            name="Mail",
            html="<p>x</p>",
            user=users["staff"],
            now=NOW,
            email_subject="Sign {{ document_name ",
        )
    db.session.rollback()
    with force_locale("ru"):
        assert str(script.value.message).startswith("JavaScript в шаблоне документа не допускается")
        assert str(subject.value.message).startswith("тема письма: ")
        # The form opens its mail section by the English label, whatever the page's language.
        assert subject.value.message.startswith("email subject: ")


def test_embedded_images_links_and_variables_in_text_are_fine(app, users):
    html = (
        '<style>p { color: #333; content: "\\2014" }</style><a href="https://example.com/terms">terms</a>'
        '<img src="data:image/png;base64,iVBORw0KGgo=" alt="{{ name }}"><p title="{{ city }}">{{ name }}</p>'
    )
    saved = create_template(db.session, name="Fine", html=html, user=users["staff"], now=NOW)
    assert saved.version.variables == ["city", "name"]


def test_recipient_data_cannot_inject_markup_into_the_document():
    out = render_html('<p title="{{ name }}">{{ name }}</p>', {"name": '"><iframe src="file:///etc/passwd">'})
    assert "<iframe" not in out and "&#34;&gt;&lt;iframe" in out


def test_variables_are_extracted_from_loops_and_conditions():
    assert extract_variables("{% if vip %}{{ name }}{% endif %}{% for x in items %}{{ x }}{% endfor %}") == [
        "items",
        "name",
        "vip",
    ]


def test_staff_create_a_template_in_the_browser_and_see_its_variables(client, auth):
    auth.login()
    page = client.get("/templates/new")
    assert page.status_code == 200 and "Please sign" in page.get_data(as_text=True)
    response = client.post(
        "/templates/new",
        data={
            "csrf_token": csrf_from(page),
            "name": "Offer letter",
            "html": "<p>Dear {{ name }}, {{ salary }}</p>",
            "email_subject": "",
            "email_body": "",
            "reminder_subject": "",
            "reminder_body": "",
        },
    )
    assert response.status_code == 302
    detail = client.get(response.headers["Location"]).get_data(as_text=True)
    assert "Offer letter" in detail and "email, name, salary" in detail and "Version 1" in detail
    version = get_version(db.session, template_id=db.session.scalar(select(DocumentTemplate.id)))
    assert version.email_subject.startswith("Please sign")


def test_an_html_file_upload_makes_a_new_version(client, auth):
    auth.login()
    page = client.get("/templates/new")
    client.post("/templates/new", data={"csrf_token": csrf_from(page), "name": "T", "html": "<p>{{ a }}</p>"})
    template_id = db.session.scalar(select(DocumentTemplate.id))
    edit = client.get(f"/templates/{template_id}/edit")
    assert "{{ a }}" in edit.get_data(as_text=True)
    response = client.post(
        f"/templates/{template_id}/edit",
        data={
            "csrf_token": csrf_from(edit),
            "html": "",
            "file": (io.BytesIO("\ufeff<p>{{ b }} — ü</p>".encode()), "contract.html"),
        },
        content_type="multipart/form-data",
    )
    assert response.status_code == 302
    assert get_version(db.session, template_id=template_id).variables == ["b"]
    versions = client.get(f"/templates/{template_id}").get_data(as_text=True)
    assert "Version 2" in versions and "Version 1" in versions


def test_a_refused_template_shows_the_line_and_keeps_the_text(client, auth):
    auth.login()
    page = client.get("/templates/new")
    response = client.post(
        "/templates/new",
        data={"csrf_token": csrf_from(page), "name": "Bad", "html": '<p>a</p>\n<img src="http://127.0.0.1:1/">'},
    )
    body = response.get_data(as_text=True)
    assert response.status_code == 422 and "Line 2:" in body and "127.0.0.1:1" in body


UNKNOWN_FILTERS = [
    ("<p>a</p>\n<p>{{ salary|dollars }}</p>", "dollars"),
    ("<p>a</p>\n<p>{% if d %}{{ d|strftime('%Y') }}{% endif %}</p>", "strftime"),
]


@pytest.mark.parametrize(("html", "name"), UNKNOWN_FILTERS)
def test_an_unknown_filter_is_refused_on_the_web_form_with_its_line_and_the_filters_that_exist(
    client, auth, html, name
):
    """Once a 500: listing the variables compiled the template, and Jinja fails on an unknown filter there."""
    auth.login()
    page = client.get("/templates/new")
    response = client.post("/templates/new", data={"csrf_token": csrf_from(page), "name": "Pay", "html": html})
    body = response.get_data(as_text=True)
    assert response.status_code == 422 and "Line 2:" in body and f"no filter named “{name}”" in body
    assert "How to fix it:" in body and "upper, urlencode" in body and 'name="html"' in body


@pytest.mark.parametrize(("html", "name"), UNKNOWN_FILTERS)
def test_an_unknown_filter_is_refused_by_the_api_as_template_invalid(client, users, html, name):
    from bulksign.people.users import create_api_key

    key = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    refused = client.post(
        "/api/v1/templates", json={"name": "Pay", "html": html}, headers={"Authorization": f"Bearer {key}"}
    )
    error = refused.json["error"]
    assert refused.status_code == 422 and error["code"] == "template_invalid" and error["details"]["line"] == 2
    assert f"no filter named “{name}”" in error["message"]


@pytest.mark.parametrize(
    ("subject", "words", "existing"),
    [
        ("Pay {{ salary|dollars }}", "no filter named “dollars”", "upper"),
        ("{% if a is b %}x{% endif %}", "is b", "defined"),
    ],
)
def test_an_unknown_filter_or_test_in_a_mail_subject_is_refused_with_the_names_that_exist(
    app, users, subject, words, existing
):
    with pytest.raises(TemplateError, match=words) as caught:
        create_template(
            db.session, name="M", html="<p>x</p>", user=users["staff"], now=NOW, **{**MAIL, "email_subject": subject}
        )
    assert caught.value.message.startswith("email subject") and caught.value.line == 1
    listed = caught.value.hint.english.rsplit(": ", 1)[1].rstrip(".").split(", ")
    assert existing in listed and "safe" not in listed and "==" not in listed


def test_preview_is_a_real_pdf_rendered_with_sample_values(client, auth, users):
    saved = create_template(
        db.session, name="P", html='<meta charset="utf-8"><p>{{ name }} — {{ city }}</p>', user=users["staff"], now=NOW
    )
    db.session.commit()
    auth.login()
    partial = client.get(f"/templates/{saved.template.id}/preview", headers={"HX-Request": "true"})
    assert b"<iframe" in partial.data and b"preview.pdf" in partial.data
    pdf = client.get(f"/templates/{saved.template.id}/preview.pdf")
    assert pdf.status_code == 200 and pdf.data.startswith(b"%PDF") and pdf.mimetype == "application/pdf"
    assert pdf.headers["Content-Disposition"].startswith("inline")


def test_the_preview_and_a_worker_render_the_same_way():
    assert render_pdf(render_html("<p>{{ name }}</p>", {"name": "Jane"})).startswith(b"%PDF")


def test_templates_api_creates_and_lists(client, users):
    from bulksign.people.users import create_api_key

    key = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    headers = {"Authorization": f"Bearer {key}"}
    created = client.post(
        "/api/v1/templates", json={"name": "API", "html": "<p>{{ name }} {{ role }}</p>"}, headers=headers
    )
    assert created.status_code == 201
    assert created.json == {**created.json, "name": "API", "version": 1, "variables": ["name", "role"]}
    bad = client.post("/api/v1/templates", json={"name": "Bad", "html": "<p>\n{% if %}</p>"}, headers=headers)
    assert bad.status_code == 422 and bad.json["error"]["details"]["line"] == 2 and bad.json["error"]["message"]
    unsafe = client.post(
        "/api/v1/templates", json={"name": "U", "html": '<img src="http://127.0.0.1/">'}, headers=headers
    )
    assert unsafe.status_code == 422 and "may not fetch" in unsafe.json["error"]["message"]
    assert client.post("/api/v1/templates", data="nope", headers=headers).status_code == 400
    listed = client.get("/api/v1/templates", headers=headers)
    assert [t["name"] for t in listed.json["items"]] == ["API"]
    assert client.get("/api/v1/templates").status_code == 401


LOOPS_IN_LOOPS = "{% set xs = range(100000)|list %}{% for a in xs %}{% for b in xs %}{% endfor %}{% endfor %}"
# Each turn writes ~1 KB, so the 10,000,000-character limit is met after ~10,000 turns: far from the 5 s limit
# even on a loaded machine (with 14 bytes a turn it took 700,000 turns and, under load, the clock won).
FLOOD = (
    "{% for a in range(100000) %}{% for b in range(1000) %}{{ name }} is here. "
    + "Filler text. " * 80
    + "{% endfor %}{% endfor %}"
)


@pytest.mark.parametrize(
    ("source", "words"), [(LOOPS_IN_LOOPS, "took longer than 5 s"), (FLOOD, "more than 10,000,000 characters")]
)
def test_a_template_that_would_keep_a_worker_busy_for_hours_is_refused_in_seconds(app, users, source, words):
    import time

    started = time.monotonic()
    with pytest.raises(TemplateError, match=words):
        render_html(source, {"name": "Jane"})
    with pytest.raises(TemplateError, match=words):
        create_template(db.session, name="Loops", html=f"<p>{source}</p>", user=users["staff"], now=NOW)
    assert time.monotonic() - started < 30
    # The thread that rendered is fine afterwards: no interruption is left pending for later code (a leftover
    # timer would fire while the clock passes).
    time.sleep(0.1)
    assert render_html("<p>{{ name }}</p>", {"name": "Jane"}) == "<p>Jane</p>"


def test_a_fill_in_past_its_time_stops_alone_while_another_thread_keeps_filling_in(app):
    """One watchdog thread watches every fill-in of the process: it stops the one out of time, not its neighbours."""
    import threading
    import time

    from bulksign.doc_templates.jinja_sandbox import render_text

    filled, stop = [], threading.Event()

    def fill_in_short_ones():
        while not stop.is_set():
            filled.append(render_text("Dear {{ name }}", {"name": "Jane"}))

    neighbour = threading.Thread(target=fill_in_short_ones)
    neighbour.start()
    try:
        started = time.monotonic()
        with pytest.raises(TemplateError, match="took longer than 5 s"):
            render_html(LOOPS_IN_LOOPS, {"name": "Jane"})
        assert time.monotonic() - started < 30
    finally:
        stop.set()
        neighbour.join()
    assert filled and set(filled) == {"Dear Jane"}


def test_filling_in_starts_no_thread_per_document(app, monkeypatch):
    """A thread started and joined for each fill-in's time limit cost more CPU than filling in a contract."""
    import threading

    from bulksign.doc_templates.jinja_sandbox import render_text

    render_text("warm {{ name }}", {"name": "Jane"})  # the process's watchdog, started once
    started = []
    original = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start", lambda thread: started.append(thread.name) or original(thread))
    for n in range(20):
        assert render_text("Dear {{ name }}", {"name": f"Jane {n}"}) == f"Dear Jane {n}"
        render_html("<p>{{ name }}</p>", {"name": "Jane"})
    assert started == []


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("{{ name|xmlattr }}", "could not be filled in: AttributeError"),
        ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "a macro calls itself without end"),
    ],
)
def test_saving_a_template_that_fails_for_every_row_is_a_clear_422(client, auth, users, source, words):
    from tests.support.web import csrf_from

    auth.login()
    page = client.get("/templates/new")
    saved = client.post(
        "/templates/new", data={"csrf_token": csrf_from(page), "name": "Broken", "html": f"<p>{source}</p>"}
    )
    assert saved.status_code == 422 and words in saved.get_data(as_text=True)


#: What the outside probe saved: each pinned a web worker for 15–30 s in one string operation.
ONE_HUGE_STEP = [
    "{{ 'a'|center(1000000000) }}",
    "{{ '%999999999s'|format(name) }}",
    "{{ '%999999999s' % name }}",
    "{{ ('x' * 100000)|replace('x', 'x' * 100000) }}",
    "{{ name.center(10**9) }}",
    "{{ '{:>999999999}'.format(name) }}",
    "{{ 'ab'.join(['x' * 100000] * 1000) }}",
    "{{ range(100000)|join('x' * 100000) }}",
    "{{ [1]|batch(10**9, 'x')|list|length }}",
    "{{ name|indent(10**9) }}",
    "{{ '%.999999999f'|format(1.5) }}",
    "{{ '\t'.expandtabs(10**9) }}",
    "{% macro d(s, n) %}{% if n %}{{ d(s ~ s, n - 1) }}{% endif %}{% endmacro %}{{ d(name, 40) }}",
    "{{ ([[1] * 100000] * 100000)|sum(start=[])|length }}",
]


@pytest.mark.parametrize("source", ONE_HUGE_STEP)
def test_a_width_or_count_that_would_make_gigabytes_in_one_step_is_refused_before_it_runs(app, users, source):
    with pytest.raises(TemplateError, match="not allowed: a (format )?width|not allowed: a text longer|batch size"):
        render_html(f"<p>{source}</p>", {"name": "Jane"})
    with pytest.raises(TemplateError):
        create_template(db.session, name="Huge", html=f"<p>{source}</p>", user=users["staff"], now=NOW)


def test_ordinary_widths_joins_and_replacements_still_work():
    out = render_html(
        "{{ name|center(10) }}|{{ '%5s'|format(name) }}|{{ '%d' % 3 }}|{{ name|replace('a', 'o') }}|"
        "{{ [name, name]|join(', ') }}|{{ '{:>6}'.format(name) }}|{{ name ~ '!' }}|{{ name + '?' }}|"
        "{{ [1, 2]|sum }}|{{ [[1], [2]]|sum(start=[]) }}",
        {"name": "Jane"},
    )
    assert out == "   Jane   | Jane|3|Jone|Jane, Jane|  Jane|Jane!|Jane?|3|[1, 2]"


def test_a_template_of_45_mb_is_refused_before_any_parsing(client, users):
    from bulksign.people.users import create_api_key

    key = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    huge = client.post(
        "/api/v1/templates",
        json={"name": "Huge", "html": "<p>x</p>" * 6_000_000},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert huge.status_code == 400 and "at most 2000000 characters" in huge.json["error"]["message"]


def test_a_preview_gives_up_before_the_web_worker_is_killed(make_app, users):
    from bulksign.core.config import ConfigError, load_config
    from bulksign.models import User
    from tests.support.web import AuthActions

    with pytest.raises(ConfigError, match="PREVIEW_TIMEOUT_SECONDS"):
        load_config({"PREVIEW_TIMEOUT_SECONDS": 25, "WEB_TIMEOUT_SECONDS": 30})
    staff_id = users["staff"].id
    app = make_app(PREVIEW_TIMEOUT_SECONDS=1)
    with app.app_context():
        # The staff user's own template: with teams, a template of nobody is out of their reach (404).
        saved = create_template(
            db.session,
            name="Nested",
            html="<div>" * 100_000 + "{{ name }}" + "</div>" * 100_000,
            user=db.session.get(User, staff_id),
            now=NOW,
        )
        db.session.commit()
        client = app.test_client()
        AuthActions(client).login()
        preview = client.get(f"/templates/{saved.template.id}/preview.pdf")
    assert preview.status_code == 422 and "longer than 1 s to render" in preview.get_data(as_text=True)

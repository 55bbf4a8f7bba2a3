"""Which columns a file must fill: a variable the document or the mail prints on every row
needs a value on every row; one under a condition, only tested or with a default is optional; a template that
cannot be filled in for any row is refused at save, and a failed preview says why inside its frame."""

from __future__ import annotations

import io
import re

import pytest
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.doc_templates.columns import DOCUMENT, MAIL, OPTIONAL, needed_columns
from bulksign.doc_templates.jinja_sandbox import render_html
from bulksign.doc_templates.variables import parse, printed_variables
from bulksign.doc_templates.versions import create_template
from bulksign.models import DocumentTemplate, TemplateVersion
from bulksign.people.users import create_api_key
from bulksign.recipients.validation import validate_recipients
from tests.support import docx_files, pdf_files
from tests.support.clock import NOW
from tests.support.web import csrf_from

CONTRACT = (
    "<p>Contract made with {{ name }} for the position {{ position }}.</p>\n"
    "{% if department %}<p>Department: {{ department }}</p>{% endif %}\n"
    "<p>Bonus: {{ bonus|default('none') }}</p>"
)
#: Mail texts that print no row variable but the mail's own, so only the document decides.
PLAIN_MAIL = {
    "email_subject": "Please sign {{ document_name }}",
    "email_body": "{{ sender }} asks you to sign: {{ signing_link }}",
    "reminder_subject": "Reminder: {{ document_name }}",
    "reminder_body": "Still waiting: {{ signing_link }}",
}


@pytest.mark.parametrize(
    ("source", "printed"),
    [
        ("{% if department %}<p>{{ department }}</p>{% endif %}{{ name }}", {"name"}),
        ("{% if x %}{{ x }}{% endif %}", set()),
        ("{{ x }}{% if x %}!{% endif %}", {"x"}),
        ("{{ x or '' }} {{ y|default('-') }} {{ z|d('a')|upper }} {{ w|upper|trim }}", {"w"}),
        ("{% set g = name ~ '!' %}{{ g }}", {"name"}),
        ("{% set g = name or 'friend' %}{{ g }}", set()),
        ("{% set g = name %}{% if a %}{% set g = 'x' %}{% endif %}{{ g }}", set()),
        ("{% for i in items %}{{ i }} {{ other }}{% endfor %}", set()),
        ("{{ a if t else a|upper }} {{ b if t else 'x' }} {{ c if t }}", {"a"}),
        ("{{ salary|int * 12 }} {{ n.strip() }} {{ q is defined }} {{ r == 'a' }}", {"salary", "n"}),
        ("{% macro m(v) %}{{ v }}{{ mm }}{% endmacro %}{{ m(k) }}", set()),
        ("{% with v = name %}{{ v }}{% endwith %}", {"name"}),
        ("{% filter upper %}{{ f }}{% endfilter %}{% set s %}{{ b }}{% endset %}{{ s }}", {"f", "b"}),
        ("{% set name = name|title %}{{ name }}", {"name"}),
    ],
)
def test_a_variable_is_required_only_where_the_document_surely_prints_it(source, printed):
    assert printed_variables(parse(source)) == printed


def test_a_default_replaces_an_empty_cell_too():
    assert render_html("{{ d|default('none') }}/{{ e|d('n/a') }}/{{ f|default('x') }}", {"d": "", "f": "v"}) == (
        "none/n/a/v"
    )


def _fresh_request_state():
    """The test shares the client's app context: Flask-Babel caches the login page's locale on g."""
    from flask import g

    g.pop("_login_user", None)
    g.pop("_flask_babel", None)


def _template(users, html=CONTRACT, **mail):
    saved = create_template(db.session, name="Contract", html=html, user=users["staff"], now=NOW, **mail)
    db.session.commit()
    return saved.version


def test_the_columns_of_a_template_say_where_each_is_printed(app, users):
    version = _template(users)
    assert needed_columns(version) == {
        "bonus": OPTIONAL,
        "department": OPTIONAL,
        "name": DOCUMENT,
        "position": DOCUMENT,
    }
    # A mail that greets "Hello {{ name }}": a document without the name still needs it (the default greets by
    # name only a row with one: test_default_greeting).
    mailed = _template(users, html="<p>{{ position }}</p>", **{**PLAIN_MAIL, "email_body": "Hello {{ name }},"})
    assert needed_columns(mailed) == {"name": MAIL, "position": DOCUMENT}
    greeted = _template(
        users,
        html="<p>{{ position }}</p>",
        **{**PLAIN_MAIL, "email_body": "Hello {{ name or 'colleague' }} {{ team }}"},
    )
    # The greeting falls back for an empty name; the team it prints needs a value on every row.
    assert needed_columns(greeted) == {"name": OPTIONAL, "position": DOCUMENT, "team": MAIL}


def test_a_word_template_under_a_condition_is_optional(app, users):
    source = docx_files.simple("Dear {{ name }}{% if note %}, note: {{ note }}{% endif %}")
    saved = create_template(
        db.session, name="Letter", html="", kind="docx", file=source, user=users["staff"], now=NOW, **PLAIN_MAIL
    )
    db.session.commit()
    assert needed_columns(saved.version) == {"name": DOCUMENT, "note": OPTIONAL}


def _check(version, body: bytes):
    return validate_recipients(body, filename="people.csv", variables=needed_columns(version))


def test_an_optional_column_may_be_missing_or_empty_and_a_printed_one_may_not(app, users):
    version = _template(users, **PLAIN_MAIL)
    report = _check(
        version, b"email,name,position\na@example.com,Ann,Clerk\nb@example.com,,Driver\nc@example.com,Cy,\n"
    )
    assert (report.valid_rows, report.invalid_rows) == (1, 2)
    assert [(e.row, e.column, str(e.message)) for e in report.errors] == [
        (3, "name", "The value is empty; the template needs {{ name }}."),
        (4, "position", "The value is empty; the template needs {{ position }}."),
    ]
    assert (
        'There is no column "department": the template uses {{ department }} only where it may be empty, so it '
        "stays empty." in [str(w) for w in report.warnings]
    )
    filled = _check(
        version, b"email,name,position,department\na@example.com,Ann,Clerk,\nb@example.com,Bo,Driver,Sales\n"
    )
    assert (filled.valid_rows, filled.errors) == (2, ())
    assert [
        r.data
        for r in validate_recipients(
            b"email,name,position\na@example.com,Ann,Clerk\n",
            filename="people.csv",
            variables=needed_columns(version),
            keep_rows=True,
        ).recipients
    ] == [{"bonus": "", "department": "", "name": "Ann", "position": "Clerk"}]


def test_a_mail_greeting_by_name_needs_a_name_on_every_row(app, users):
    version = _template(users, html="<p>{{ position }}</p>", **{**PLAIN_MAIL, "reminder_body": "Hello {{ name }},"})
    missing = _check(version, b"email,position\na@example.com,Clerk\n")
    assert [(e.row, e.column, str(e.message)) for e in missing.errors] == [
        (1, "name", 'The column "name" is missing: the invitation or reminder mail prints {{ name }}.')
    ]
    empty = _check(version, b"email,name,position\na@example.com,,Clerk\n")
    assert [(e.row, e.column, str(e.message)) for e in empty.errors] == [
        (2, "name", "The value is empty; the invitation or reminder mail prints {{ name }}.")
    ]


def _check_on_the_page(client, template_id: int, body: bytes) -> str:
    page = client.get(f"/batches/new?template_id={template_id}")
    checked = client.post(
        "/batches/new/validate",
        headers={"HX-Request": "true"},
        content_type="multipart/form-data",
        data={"csrf_token": csrf_from(page), "template_id": template_id, "file": (io.BytesIO(body), "people.csv")},
    )
    assert checked.status_code == 200
    return checked.get_data(as_text=True)


@pytest.mark.parametrize(
    ("locale", "empty", "missing"),
    [
        ("en", "The value is empty; the template needs {{ name }}.", 'There is no column "department"'),
        ("ru", "Значение пустое", "Столбца «department» нет"),
    ],
)
def test_staff_see_the_empty_name_with_its_row_and_column_and_no_error_for_the_condition(
    client, auth, users, locale, empty, missing
):
    users["staff"].locale = locale
    version = _template(users, **PLAIN_MAIL)
    auth.login()
    _fresh_request_state()
    html = _check_on_the_page(
        client, version.template_id, b"email,name,position\na@example.com,Ann,Clerk\nb@example.com,,Driver\n"
    )
    assert re.search(r'id="valid-rows">1<', html)
    rows = re.findall(r"<tr><td>(\d+)</td><td>([^<]*)</td><td>([^<]*)</td></tr>", html)
    assert len(rows) == 1 and rows[0][:2] == ("3", "name") and rows[0][2].startswith(empty)
    assert missing in html.replace("&#34;", '"')


@pytest.mark.parametrize(
    ("locale", "words"),
    [
        ("en", ("Columns every row must fill", "Optional columns", "in the mail", "Please sign: {{ document_name }}")),
        (
            "ru",
            ("Столбцы, обязательные в каждой строке", "Необязательные столбцы", "в письме", "Пожалуйста, подпишите"),
        ),
    ],
)
def test_the_template_page_says_which_columns_are_required_and_which_optional(client, auth, users, locale, words):
    users["staff"].locale = locale
    version = _template(
        users, html="<p>{{ position }}</p>{% if department %}{{ department }}{% endif %}", email_body="Hi {{ name }},"
    )
    auth.login()
    _fresh_request_state()
    page = client.get(f"/templates/{version.template_id}").get_data(as_text=True)
    assert all(w in page for w in words)
    assert re.search(r'id="variables">email, name \([^)]+\), position</dd>', page)
    assert re.search(r'id="optional-variables">department<', page)


def test_the_api_template_says_which_columns_are_required_and_which_optional(client, users):
    key = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    created = client.post(
        "/api/v1/templates",
        json={"name": "API", "html": CONTRACT, **PLAIN_MAIL},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert created.status_code == 201, created.json
    assert (created.json["required"], created.json["optional"]) == (["name", "position"], ["bonus", "department"])


# --- item 12: refused at save when no row can fill it in; a failed preview says why in its frame ----------------


@pytest.mark.parametrize(
    ("locale", "source", "line", "words"),
    [
        ("en", "<p>a</p>\n<p>{{ 1/0 }}</p>", 2, ("filled in: it divides by zero.", "check what it divides by")),
        ("en", "<p>{{ salary / 12 }}</p>", 1, ("calculates with text as if it were a number", "{{ salary|int * 12 }}")),
        ("ru", "<p>{{ salary / 12 }}</p>", 1, ("вычисляет с текстом как с числом", "{{ salary|int * 12 }}")),
        ("en", "<p>a</p>\n\n{% include 'header.html' %}", 3, ("{% include %} cannot be used", "{% macro %}")),
        ("ru", "<p>a</p>\n\n{% include 'header.html' %}", 3, ("{% include %} использовать нельзя", "{% macro %}")),
    ],
)
def test_a_template_no_row_can_fill_in_is_refused_on_the_web_form_with_its_line_and_a_hint(
    client, auth, users, locale, source, line, words
):
    users["staff"].locale = locale
    db.session.commit()
    auth.login()
    _fresh_request_state()
    page = client.get("/templates/new")
    saved = client.post("/templates/new", data={"csrf_token": csrf_from(page), "name": "Broken", "html": source})
    html = saved.get_data(as_text=True).replace("&#39;", "'").replace("&lt;", "<").replace("&gt;", ">")
    assert saved.status_code == 422
    box = html[html.index('id="template-error"') :]
    assert re.search(rf"(Line|Строка) {line}:", box) and all(w in box for w in words), box[:1500]
    assert db.session.scalar(select(DocumentTemplate)) is None


def test_the_api_refuses_it_too_with_line_and_hint_and_takes_a_calculation_only_numbers_make(client, users):
    key = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    headers = {"Authorization": f"Bearer {key}"}
    refused = client.post(
        "/api/v1/templates", json={"name": "I", "html": "<p>a</p>\n{% include 'x' %}"}, headers=headers
    )
    assert refused.status_code == 422
    error = refused.json["error"]
    assert "{% include %} cannot be used" in error["message"] and error["details"]["line"] == 2
    assert "{% macro %}" in error["details"]["hint"]
    mail = client.post(
        "/api/v1/templates", json={"name": "M", "html": "<p>x</p>", "email_body": "Hi\n{{ 1/0 }}"}, headers=headers
    )
    assert mail.status_code == 422 and mail.json["error"]["message"].startswith("email body: ")
    assert mail.json["error"]["details"]["line"] == 2
    # [count]|int is 0 with the preview's sample values, but a number in a real row: the save is not refused.
    divided = client.post(
        "/api/v1/templates", json={"name": "D", "html": "<p>{{ total|int / count|int }}</p>"}, headers=headers
    )
    assert divided.status_code == 201, divided.json


def test_a_failed_preview_shows_the_reason_in_a_page_of_its_own(client, auth, users):
    # A version saved before the check existed: its preview used to show the app's error page in the frame.
    version = _template(users, html="<p>ok</p>")
    db.session.add(
        TemplateVersion(
            template_id=version.template_id,
            version=2,
            kind="html",
            html="<p>a</p>\n<p>{{ 1/0 }}</p>",
            variables=[],
            **PLAIN_MAIL,
            created_at=NOW,
        )
    )
    db.session.commit()
    auth.login()
    preview = client.get(f"/templates/{version.template_id}/preview.pdf?version=2")
    html = preview.get_data(as_text=True)
    assert preview.status_code == 422 and preview.mimetype == "text/html"
    assert "The preview could not be made." in html and "Line 2:" in html and "it divides by zero" in html
    assert "divides by zero" in html and "<nav" not in html and "422" not in html
    assert client.get(f"/templates/{version.template_id}/preview.pdf?version=1").mimetype == "application/pdf"


# --- item 25: a PDF template's signature ------------------------------------------------------------------------


def test_a_pdf_templates_page_lists_signature_and_shows_where_its_box_is(client, auth, users):
    signed = create_template(
        db.session,
        name="Signed form",
        html="",
        kind="pdf",
        file=pdf_files.contract_form(signature=True),
        user=users["staff"],
        now=NOW,
    )
    plain = create_template(
        db.session, name="Form", html="", kind="pdf", file=pdf_files.contract_form(), user=users["staff"], now=NOW
    )
    db.session.commit()
    auth.login()
    page = client.get(f"/templates/{signed.template.id}").get_data(as_text=True)
    assert "signature" in re.search(r'id="all-variables">([^<]*)<', page).group(1).split(", ")
    place = page[page.index('id="signature-place"') :]
    assert "Page 2: the box named “signature”" in place
    assert re.search(r'<img src="/templates/\d+/pages/2\.png\?version=1"', place)
    assert re.search(r'class="pdf-box is-signature" style="left: [\d.]+%; top: [\d.]+%; width: [\d.]+%;', place)
    other = client.get(f"/templates/{plain.template.id}").get_data(as_text=True)
    assert "signature" not in re.search(r'id="all-variables">([^<]*)<', other).group(1)
    assert "No field or box is named “signature”" in other


@pytest.mark.parametrize(
    ("text", "message", "hint"),
    [
        ("Dear {{ name }} {% include 'other.docx' %}", "{% include %} cannot be used", "{% macro %}"),
        ("Pay {{ 1/0 }}", "it divides by zero", "check what it divides by"),
    ],
)
def test_a_word_template_no_row_can_fill_in_is_refused_with_a_hint(app, users, text, message, hint):
    from bulksign.doc_templates.errors import TemplateError

    with pytest.raises(TemplateError) as refused:
        create_template(
            db.session, name="W", html="", kind="docx", file=docx_files.simple(text), user=users["staff"], now=NOW
        )
    assert message in str(refused.value.message) and hint in str(refused.value.hint)


@pytest.mark.parametrize(
    ("locale", "words"),
    [
        ("en", ("Word: a .docx with {{ column }}", "PDF: a fillable form", "in a PDF, name a form field")),
        ("ru", ("Word: файл .docx", "PDF: заполняемая форма", "в PDF назовите поле формы")),
    ],
)
def test_the_template_form_helps_with_html_word_and_pdf(client, auth, users, locale, words):
    users["staff"].locale = locale
    db.session.commit()
    auth.login()
    _fresh_request_state()
    form = client.get("/templates/new").get_data(as_text=True)
    assert all(w in form for w in words), form
    assert "{% if %}" in form and "|default(" in form.replace("&#39;", "'")


def test_a_column_only_the_mail_prints_is_kept_with_the_row_for_the_mail(app, users):
    version = _template(users, html="<p>{{ position }}</p>", **{**PLAIN_MAIL, "email_body": "Team {{ team }}"})
    report = validate_recipients(
        b"email,position,team\na@example.com,Clerk,Sales\nb@example.com,Clerk,\n",
        filename="people.csv",
        variables=needed_columns(version),
        keep_rows=True,
    )
    assert [r.data for r in report.recipients] == [{"position": "Clerk", "team": "Sales"}]
    assert [(e.row, e.column, str(e.message)) for e in report.errors] == [
        (3, "team", "The value is empty; the invitation or reminder mail prints {{ team }}.")
    ]

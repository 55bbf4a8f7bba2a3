"""Matching a file's columns to the template's on the check page and through the API: offered, confirmed,
remembered for the template's team, used on create; refused when it does not fit; another team's template 404."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.models import ColumnMapping, DocumentTemplate, SigningRequest
from bulksign.people.teams import create_team
from tests.support.clock import NOW
from tests.support.web import csrf_from
from tests.views.api.test_api_uploads import api, check_file, upload  # noqa: F401 - the API caller is a fixture

HR_EXPORT = (
    "ФИО;Почта;Должность;Телефон\r\n"
    "Иванов Иван;ivan@example.ru;Логист;+7 916 123-45-67\r\n"
    "Петрова Анна;anna@example.ru;Бухгалтер;+7 916 765-43-21\r\n"
).encode("cp1251")
MATCHED = {"column.email": "Почта", "column.name": ["ФИО", "", ""], "column.position": "Должность"}


@pytest.fixture
def template_id(app, users):
    saved = create_template(
        db.session, name="Договор", html="<p>{{ name }}: {{ position }}</p>", user=users["staff"], now=NOW
    )
    db.session.commit()
    return saved.template.id


def _upload_id(html: str) -> str:
    return re.search(r'name="upload_id" value="([0-9a-f]+)"', html).group(1)


def _match(client, page, upload_id: str, fields: dict):
    return client.post(
        "/batches/new/match",
        headers={"HX-Request": "true"},
        data={"csrf_token": csrf_from(page), "upload_id": upload_id, **fields},
    )


def test_the_check_page_offers_the_files_columns_with_samples_and_remembers_what_staff_confirm(
    client, auth, template_id
):
    auth.login()
    page, preview = check_file(client, template_id, body=HR_EXPORT, name="hr.csv")
    html = preview.get_data(as_text=True)
    assert preview.status_code == 200 and 'id="column-mapping"' in html
    # Each template column has the file's likely column chosen, each option with the column's first values.
    assert re.search(
        r'name="column\.position"[^>]*>.*?<option value="Должность" selected>Должность — Логист, '
        r"Бухгалтер</option>",
        html,
        re.S,
    )
    assert '<option value="ФИО" selected>ФИО — Иванов Иван, Петрова Анна</option>' in html
    assert re.search(r'id="valid-rows">0<', html)

    matched = _match(client, page, _upload_id(html), MATCHED)
    assert matched.status_code == 200 and re.search(r'id="valid-rows">2<', matched.get_data(as_text=True))
    stored = db.session.scalar(select(ColumnMapping))
    assert stored.columns == {"email": ["Почта"], "name": ["ФИО"], "position": ["Должность"]}
    assert stored.team_id == db.session.get(DocumentTemplate, template_id).team_id is not None

    # The next file of the template is matched as last time, and says so.
    _, again = check_file(client, template_id, body=HR_EXPORT, name="hr-december.csv")
    html = again.get_data(as_text=True)
    assert re.search(r'id="valid-rows">2<', html) and 'id="mapping-remembered"' in html

    created = client.post(
        "/batches/new",
        data={
            "csrf_token": csrf_from(page),
            "upload_id": _upload_id(html),
            "form_token": "f" * 32,
            "name": "Декабрь",
            "deadline_days": "7",
            "timezone": "UTC",
        },
    )
    assert created.status_code == 303
    people = db.session.execute(select(SigningRequest.email, SigningRequest.name).order_by(SigningRequest.email))
    assert list(people) == [("anna@example.ru", "Петрова Анна"), ("ivan@example.ru", "Иванов Иван")]


def test_a_match_that_does_not_fit_keeps_the_form_and_says_why(client, auth, template_id):
    auth.login()
    page, preview = check_file(client, template_id, body=HR_EXPORT, name="hr.csv")
    upload_id = _upload_id(preview.get_data(as_text=True))
    both = _match(client, page, upload_id, {**MATCHED, "column.position": "ФИО"})
    html = both.get_data(as_text=True)
    assert both.status_code == 200 and 'id="column-mapping"' in html
    assert "The file&#39;s column &#34;ФИО&#34; is matched to both &#34;name&#34; and &#34;position&#34;" in html
    missing = _match(client, page, upload_id, {**MATCHED, "column.email": "Nope"})
    assert "The file has no column &#34;Nope&#34; (matched to &#34;email&#34;)" in missing.get_data(as_text=True)
    assert db.session.scalar(select(ColumnMapping)) is None
    assert _match(client, page, "0" * 32, MATCHED).status_code == 410


def test_the_api_names_each_unmatched_column_with_a_suggestion_and_takes_columns(api, template_id):  # noqa: F811
    refused = api("/api/v1/batches", data={"template_id": template_id, "file": upload(HR_EXPORT, "hr.csv")})
    error = refused.json["error"]
    assert refused.status_code == 422 and error["message"] == (
        'The file has no column for "email" (the file\'s Почта?), "name" (the file\'s ФИО?), "position" (the '
        'file\'s Должность?). Name the file\'s columns in `columns`, e.g. {"email": "Почта", "name": "ФИО", '
        '"position": "Должность"}.'
    )
    assert error["details"]["unmatched_columns"] == [
        {"column": "email", "suggestion": ["Почта"]},
        {"column": "name", "suggestion": ["ФИО"]},
        {"column": "position", "suggestion": ["Должность"]},
    ]
    columns = json.dumps({"email": "Почта", "name": "ФИО", "position": "Должность"})
    checked = api(
        "/api/v1/batches/validate", data={"template_id": template_id, "file": upload(HR_EXPORT), "columns": columns}
    )
    assert checked.status_code == 200 and checked.json["valid_rows"] == 2 and checked.json["unmatched_columns"] == []
    created = api("/api/v1/batches", data={"template_id": template_id, "file": upload(HR_EXPORT), "columns": columns})
    assert created.status_code == 201 and created.json["total_count"] == 2
    bad = api(
        "/api/v1/batches/validate",
        data={"template_id": template_id, "file": upload(HR_EXPORT), "columns": '{"name": "Фамилия"}'},
    )
    assert bad.status_code == 422 and bad.json["error"]["message"].startswith('The file has no column "Фамилия"')
    assert (
        api(
            "/api/v1/batches/validate",
            data={"template_id": template_id, "file": upload(HR_EXPORT), "columns": "not json"},
        ).status_code
        == 422
    )


def test_another_teams_template_is_not_found_with_or_without_a_mapping(api, users, client, auth, template_id):  # noqa: F811
    other = create_team(db.session, name="Other", now=NOW)
    theirs = create_template(
        db.session, name="Theirs", html="<p>{{ name }}</p>", user=users["admin"], now=NOW, team_id=other.id
    )
    db.session.commit()
    auth.login()
    columns = json.dumps({"name": "ФИО", "email": "Почта"})
    answer = api(
        "/api/v1/batches/validate",
        data={"template_id": theirs.template.id, "file": upload(HR_EXPORT), "columns": columns},
    )
    assert answer.status_code == 404
    page = client.get("/batches/new")
    preview = client.post(
        "/batches/new/validate",
        headers={"HX-Request": "true"},
        content_type="multipart/form-data",
        data={"csrf_token": csrf_from(page), "template_id": theirs.template.id, "file": upload(HR_EXPORT, "hr.csv")},
    )
    assert preview.status_code == 404 and db.session.scalar(select(ColumnMapping)) is None


def test_a_forged_match_is_refused_in_words_and_remembers_nothing(client, auth, template_id):
    auth.login()
    page, preview = check_file(client, template_id, body=HR_EXPORT, name="hr.csv")
    upload_id = _upload_id(preview.get_data(as_text=True))
    for fields, words in (
        ({"column." + "x" * 5000: "ФИО"}, "A column name is longer than 200 characters."),
        ({f"column.c{i}": "ФИО" for i in range(300)}, "The columns match more than 200 template columns."),
        ({"column.name": ["Фамилия"] * 9}, "joins more than 5 of the file&#39;s columns."),
        ({"column.name": "=HYPERLINK(1)"}, "The file has no column &#34;=HYPERLINK(1)&#34;"),
    ):
        answer = _match(client, page, upload_id, fields)
        assert answer.status_code == 200 and words in answer.get_data(as_text=True)
    assert db.session.scalar(select(ColumnMapping)) is None

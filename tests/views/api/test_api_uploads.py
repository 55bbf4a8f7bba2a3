"""Checking a recipients file and creating a batch, through the JSON API and through the staff pages."""

from __future__ import annotations

import io
import re

import pytest
from sqlalchemy import func, select

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.models import Batch, SigningRequest
from bulksign.people.users import create_api_key
from bulksign.work.pipeline import RENDER
from tests.support.clock import NOW
from tests.support.web import csrf_from
from tests.support.workers import queued

GOOD = b"email,name,position\nanna@example.com,Anna,Accountant\njohn@example.com,John,Engineer\n"
ONE_BAD = GOOD + b"broken@gmial.com,Broken,Clerk\n"


@pytest.fixture
def template_id(app, users):
    saved = create_template(
        db.session, name="Contract", html="<p>{{ name }}: {{ position }}</p>", user=users["staff"], now=NOW
    )
    db.session.commit()
    return saved.template.id


@pytest.fixture
def api(client, users):
    secret = create_api_key(db.session, user=users["staff"], name="test", now=NOW).secret
    db.session.commit()

    def call(path, *, data=None, headers=None):
        return client.post(
            path,
            data=data,
            headers={"Authorization": f"Bearer {secret}", **(headers or {})},
            content_type="multipart/form-data",
        )

    return call


def upload(body: bytes, name: str = "people.csv"):
    return (io.BytesIO(body), name)


def batch_count() -> int:
    return db.session.scalar(select(func.count()).select_from(Batch))


def test_api_validate_reports_totals_and_errors(api, template_id):
    response = api("/api/v1/batches/validate", data={"template_id": template_id, "file": upload(ONE_BAD)})
    assert response.status_code == 200
    body = response.json
    assert (body["total_rows"], body["valid_rows"], body["invalid_rows"]) == (3, 2, 1)
    assert body["errors"] == [
        {
            "row": 4,
            "column": "email",
            "suggestion": "gmail.com",
            "message": "The domain looks misspelt: did you mean broken@gmail.com?",
        }
    ]
    assert body["warnings"] == []


@pytest.mark.parametrize(
    "data, status, words",
    [
        ({"file": upload(GOOD)}, 400, "template_id: Field required"),
        ({"template_id": "999", "file": upload(GOOD)}, 404, "no template"),
        ({"template_id": "{tid}"}, 400, "file: Field required"),
        ({"template_id": "{tid}", "file": upload(b"", "x.csv")}, 422, "empty"),
        ({"template_id": "{tid}", "file": upload(GOOD, "x.exe")}, 415, ".csv or .xlsx"),
        ({"template_id": "{tid}", "file": upload(b"Please sign\n", "notes.txt")}, 415, "not a CSV or XLSX file"),
    ],
)
def test_api_bad_input_gets_a_json_error(api, template_id, data, status, words):
    data = {k: (v.replace("{tid}", str(template_id)) if isinstance(v, str) else v) for k, v in data.items()}
    response = api("/api/v1/batches/validate", data=data)
    assert response.status_code == status and response.is_json and words in response.json["error"]["message"]


def test_api_refuses_rows_with_errors_unless_told_to_skip_them(api, template_id):
    refused = api("/api/v1/batches", data={"template_id": template_id, "file": upload(ONE_BAD), "name": "Nov"})
    report = refused.json["error"]["details"]
    assert refused.status_code == 422 and report["invalid_rows"] == 1 and report["errors"][0]["row"] == 4
    assert batch_count() == 0
    created = api(
        "/api/v1/batches",
        data={
            "template_id": template_id,
            "file": upload(ONE_BAD),
            "name": "Nov",
            "skip_invalid": "true",
            "reminder_days": "1,3",
            "max_reminders": "2",
            "deadline_days": "5",
        },
    )
    assert created.status_code == 201
    assert created.json == {
        "id": created.json["id"],
        "status": "sending",
        "total_count": 2,
        "skipped_rows": 1,
        "notify_email": None,
        "one_time_code": False,
        "channel": "mail",
        "text_cap": None,
    }
    batch = db.session.get(Batch, created.json["id"])
    assert (batch.name, batch.reminder_days, batch.max_reminders, batch.deadline_days) == ("Nov", [1, 3], 2, 5)
    # The row left out stays with the batch.
    assert batch.skipped_count == 1
    ids = db.session.scalars(select(SigningRequest.id).where(SigningRequest.batch_id == batch.id)).all()
    assert len(ids) == 2 and queued(RENDER, ids) == set(ids)


def test_api_same_idempotency_key_creates_one_batch(api, template_id):
    headers = {"Idempotency-Key": "order-7"}
    first = api("/api/v1/batches", data={"template_id": template_id, "file": upload(GOOD)}, headers=headers)
    again = api("/api/v1/batches", data={"template_id": template_id, "file": upload(GOOD)}, headers=headers)
    # The second call is answered from the stored first answer, and says so.
    assert (first.status_code, again.status_code) == (201, 201) and first.json == again.json
    assert again.headers["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first.headers
    assert batch_count() == 1 and db.session.scalar(select(func.count()).select_from(SigningRequest)) == 2


def test_api_bad_settings_and_missing_columns_are_422(api, template_id):
    bad = api("/api/v1/batches", data={"template_id": template_id, "file": upload(GOOD), "max_reminders": "9"})
    assert bad.status_code == 400 and bad.json["error"]["details"]["fields"][0]["field"] == "max_reminders"
    late = api("/api/v1/batches", data={"template_id": template_id, "file": upload(GOOD), "reminder_days": "9"})
    assert late.status_code == 422 and late.json["error"]["details"] == {"field": "reminder_days"}
    lacking = api(
        "/api/v1/batches",
        data={"template_id": template_id, "file": upload(b"email\na@example.com\n"), "skip_invalid": "1"},
    )
    # The document prints the name and the position.
    assert lacking.status_code == 422 and lacking.json["error"]["details"]["missing_columns"] == ["name", "position"]


@pytest.mark.parametrize(
    "fields, told",
    [
        ({}, None),
        ({"notify_to": "owner", "notify_email": "ignored@example.com"}, None),
        ({"notify_to": "Boss@Example.com"}, "Boss@example.com"),
        ({"notify_to": "other", "notify_email": "hr@example.com"}, "hr@example.com"),
        ({"notify_email": "hr@example.com"}, "hr@example.com"),
    ],
)
def test_api_names_who_gets_the_notices_the_owner_by_default(api, template_id, fields, told):
    created = api("/api/v1/batches", data={"template_id": template_id, "file": upload(GOOD), **fields})
    assert created.status_code == 201 and created.json["notify_email"] == told
    assert db.session.get(Batch, created.json["id"]).notify_email == told


@pytest.mark.parametrize("fields", [{"notify_to": "other"}, {"notify_to": "nope"}, {"notify_email": "x@gmial.com"}])
def test_api_refuses_a_notice_address_it_cannot_use(api, template_id, fields):
    refused = api("/api/v1/batches", data={"template_id": template_id, "file": upload(GOOD), **fields})
    assert refused.status_code == 422 and refused.json["error"]["details"]["field"] == "notify_email"
    assert "Notices to" in refused.json["error"]["message"] and batch_count() == 0


def test_api_refuses_a_batch_name_with_line_breaks_that_would_write_headers_into_its_notices(api, template_id):
    """The name went into the completion notice's subject as given, each line a header field of its own."""
    refused = api(
        "/api/v1/batches",
        data={
            "template_id": template_id,
            "file": upload(GOOD),
            "notify_email": "hr@example.com",
            "name": "Q3\r\nReply-To: attacker@example.com\r\nX-Injected: yes",
        },
    )
    assert refused.status_code == 422 and refused.json["error"] == {
        "code": "settings_invalid",
        "details": {"field": "name"},
        "message": "The batch name may not contain line breaks or other control characters.",
    }
    assert batch_count() == 0


def test_a_file_over_the_limit_is_refused_with_the_limit_named(make_app, users):
    app = make_app(MAX_UPLOAD_MB=1)
    with app.app_context():
        from bulksign.models import User

        secret = create_api_key(db.session, user=db.session.scalar(select(User).limit(1)), name="t", now=NOW).secret
        db.session.commit()
    response = app.test_client().post(
        "/api/v1/batches/validate",
        headers={"Authorization": f"Bearer {secret}"},
        data={"template_id": "1", "file": upload(b"x" * (1024 * 1024 + 10))},
        content_type="multipart/form-data",
    )
    assert response.status_code == 413 and response.is_json and "1 MB" in response.json["error"]["message"]


# --- the staff pages --------------------------------------------------------------------------


def check_file(client, template_id, body=ONE_BAD, name="people.csv", htmx=True):
    page = client.get(f"/batches/new?template_id={template_id}")
    headers = {"HX-Request": "true"} if htmx else {}
    return page, client.post(
        "/batches/new/validate",
        headers=headers,
        content_type="multipart/form-data",
        data={"csrf_token": csrf_from(page), "template_id": template_id, "file": upload(body, name)},
    )


def test_checking_a_file_returns_the_preview_partial_with_the_error_table(client, auth, template_id):
    auth.login()
    page, preview = check_file(client, template_id)
    html = preview.get_data(as_text=True)
    assert preview.status_code == 200 and "<html" not in html
    assert re.search(r'id="valid-rows">2<', html) and re.search(r'id="invalid-rows"[^>]*>1<', html)
    assert "<td>4</td><td>email</td>" in html and "did you mean broken@gmail.com?" in html
    assert "Create batch with 2 valid rows" in html


def test_a_refused_file_shows_the_reason_in_the_partial(client, auth, template_id):
    auth.login()
    _, preview = check_file(client, template_id, body=b"\x00\x01binary", name="people.csv")
    assert preview.status_code == 400 and "binary data" in preview.get_data(as_text=True)
    _, notes = check_file(client, template_id, body=b"Please sign this\n", name="notes.txt")
    assert notes.status_code == 415 and "This is not a CSV or XLSX file" in notes.get_data(as_text=True)
    _, full = check_file(client, template_id, body=b"a", name="people.pdf", htmx=False)
    assert full.status_code == 415 and "<html" in full.get_data(as_text=True)


def test_creating_from_the_page_uses_the_stored_file_and_a_double_click_makes_one_batch(client, auth, template_id):
    auth.login()
    page, preview = check_file(client, template_id)
    upload_id = re.search(r'name="upload_id" value="([0-9a-f]+)"', preview.get_data(as_text=True)).group(1)
    token = re.search(r'name="form_token" value="([0-9a-f]+)"', page.get_data(as_text=True)).group(1)
    form = {
        "csrf_token": csrf_from(page),
        "upload_id": upload_id,
        "form_token": token,
        "name": "November",
        "deadline_days": "7",
        "reminder_days": "2,4",
        "max_reminders": "3",
        "language": "ru",
        "quiet_hours_start": "",
        "quiet_hours_end": "",
        "timezone": "UTC",
        "reply_to": "",
        # A forged row the browser might send is ignored: rows come from the stored file.
        "rows": "evil@example.com",
    }
    first = client.post("/batches/new", data=form)
    second = client.post("/batches/new", data=form)
    assert first.status_code == 303 and first.headers["Location"] == second.headers["Location"]
    batch = db.session.scalar(select(Batch))
    assert first.headers["Location"].endswith(f"/batches/{batch.id}")
    assert (batch_count(), batch.total_count, batch.language, batch.status) == (1, 2, "ru", "processing")
    emails = set(db.session.scalars(select(SigningRequest.email)))
    assert emails == {"anna@example.com", "john@example.com"}


def test_bad_settings_keep_the_page_and_name_the_field(client, auth, template_id):
    auth.login()
    page, preview = check_file(client, template_id)
    upload_id = re.search(r'name="upload_id" value="([0-9a-f]+)"', preview.get_data(as_text=True)).group(1)
    response = client.post(
        "/batches/new",
        data={"csrf_token": csrf_from(page), "upload_id": upload_id, "form_token": "t1", "max_reminders": "12"},
    )
    assert response.status_code == 422 and "Maximum reminders must be between 0 and 5" in response.get_data(
        as_text=True
    )
    assert batch_count() == 0


def test_the_new_batch_page_refuses_a_name_with_a_line_break_and_shows_why(client, auth, template_id):
    auth.login()
    page, preview = check_file(client, template_id)
    upload_id = re.search(r'name="upload_id" value="([0-9a-f]+)"', preview.get_data(as_text=True)).group(1)
    response = client.post(
        "/batches/new",
        data={
            "csrf_token": csrf_from(page),
            "upload_id": upload_id,
            "form_token": "t1",
            "name": "Q3\r\nX-Injected: yes",
        },
    )
    text = response.get_data(as_text=True)
    assert response.status_code == 422 and "The batch name may not contain line breaks" in text
    assert batch_count() == 0


def test_an_unknown_upload_id_asks_to_upload_again(client, auth, template_id):
    auth.login()
    page = client.get("/batches/new")
    response = client.post("/batches/new", data={"csrf_token": csrf_from(page), "upload_id": "f" * 32})
    assert response.status_code == 410 and "Upload it again" in response.get_data(as_text=True)


def test_the_full_error_report_downloads_as_csv(client, auth, template_id):
    auth.login()
    body = GOOD + b"".join(b"bad%d@,X,Y\n" % i for i in range(120))
    _, preview = check_file(client, template_id, body=body)
    html = preview.get_data(as_text=True)
    assert "Showing the first 100 of 120 errors." in html
    link = re.search(r'href="(/batches/uploads/[0-9a-f]+/errors\.csv)"', html).group(1)
    report = client.get(link)
    assert report.status_code == 200 and report.mimetype == "text/csv"
    lines = report.get_data(as_text=True).lstrip("\ufeff").splitlines()
    assert lines[0].startswith('"row","column","message",') and len(lines) == 121
    assert lines[1].startswith('"4","email",')


def test_another_user_cannot_use_my_upload(client, auth, template_id):
    auth.login()
    _, preview = check_file(client, template_id)
    link = re.search(r'href="(/batches/uploads/[0-9a-f]+/errors\.csv)"', preview.get_data(as_text=True)).group(1)
    auth.logout()
    auth.login_admin()
    assert client.get(link).status_code == 410


def test_a_batch_created_over_the_api_renders_each_row_into_its_own_pdf(api, template_id, run_jobs):
    from pypdf import PdfReader

    from bulksign.documents.storage import get_storage
    from bulksign.models import Document

    created = api("/api/v1/batches", data={"template_id": template_id, "file": upload(GOOD)})
    run_jobs("pdf")
    documents = db.session.scalars(select(Document).order_by(Document.request_id)).all()
    assert len(documents) == 2
    text = PdfReader(io.BytesIO(get_storage().get(documents[0].storage_key))).pages[0].extract_text()
    assert " ".join(text.split()) == "Anna: Accountant" and created.status_code == 201


def test_a_nul_byte_late_in_the_file_is_a_row_error_at_creation_never_a_500(api, users):
    from tests.support.hostile_files import late_nul_csv

    template_id = create_template(
        db.session, name="Names", html="<p>{{ name }}</p>", user=users["staff"], now=NOW
    ).template.id
    db.session.commit()

    refused = api("/api/v1/batches", data={"template_id": template_id, "file": upload(late_nul_csv())})
    report = refused.json["error"]["details"]
    assert refused.status_code == 422 and report["invalid_rows"] == 1
    assert "NUL character (line 3,002)" in report["errors"][0]["message"]
    created = api(
        "/api/v1/batches", data={"template_id": template_id, "skip_invalid": "true", "file": upload(late_nul_csv())}
    )
    assert created.status_code == 201 and created.json["total_count"] == 3000

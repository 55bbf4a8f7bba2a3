"""The batch's channel over the API and the new-batch page: phone-only rows accepted when texts may stand in for
an address, numbers in E.164 on the requests, bad numbers reported by row and column, the texts the batch may send."""

from __future__ import annotations

import io

from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.models import Batch, SigningRequest
from bulksign.people.users import create_api_key
from tests.support.clock import NOW
from tests.support.web import csrf_from

FILE = "email,name,phone\n,Иван,8 (999) 123-45-67\nanna@example.com,Анна,+7 999 765 43 21\n"


def _api(app, users):
    template = create_template(db.session, name="Договор", html="<p>{{ name }}</p>", user=users["staff"], now=NOW)
    key = create_api_key(db.session, user=users["staff"], name="test", now=NOW).secret
    db.session.commit()
    return template.template.id, {"Authorization": f"Bearer {key}"}


def test_the_api_takes_phone_only_rows_with_a_texting_channel(app, users, client):
    template_id, headers = _api(app, users)
    created = client.post(
        "/api/v1/batches",
        content_type="multipart/form-data",
        headers=headers,
        data={
            "template_id": template_id,
            "channel": "text_both",
            "language": "ru",
            "max_reminders": "1",
            "reminder_days": "2",
            "file": (io.BytesIO(FILE.encode()), "p.csv"),
        },
    )
    assert created.status_code == 201, created.json
    assert (created.json["channel"], created.json["text_cap"]) == ("text_both", 4)
    batch = db.session.get(Batch, created.json["id"])
    rows = db.session.execute(
        select(SigningRequest.email, SigningRequest.phone)
        .where(SigningRequest.batch_id == batch.id)
        .order_by(SigningRequest.id)
    ).all()
    assert rows == [("", "+79991234567"), ("anna@example.com", "+79997654321")]


def test_the_api_refuses_phone_only_rows_of_a_batch_that_only_mails_and_names_bad_numbers(app, users, client):
    template_id, headers = _api(app, users)
    refused = client.post(
        "/api/v1/batches/validate",
        content_type="multipart/form-data",
        headers=headers,
        data={"template_id": template_id, "file": (io.BytesIO(FILE.encode()), "p.csv")},
    )
    assert [(e["row"], e["column"], e["message"]) for e in refused.json["errors"]] == [
        (2, "email", "The email address is empty.")
    ]
    checked = client.post(
        "/api/v1/batches/validate",
        content_type="multipart/form-data",
        headers=headers,
        data={
            "template_id": template_id,
            "channel": "text_without_address",
            "language": "ru",
            "file": (io.BytesIO(b"email,name,phone\n,A,+7 999 123 45 6\n,B,seven\n,C,+79991234567\n"), "p.csv"),
        },
    )
    assert checked.status_code == 200, checked.json
    assert [(e["row"], e["column"]) for e in checked.json["errors"]] == [(2, "phone"), (3, "phone")]
    assert (checked.json["valid_rows"], checked.json["text_only_rows"]) == (1, 1)
    wrong = client.post(
        "/api/v1/batches/validate",
        content_type="multipart/form-data",
        headers=headers,
        data={"template_id": template_id, "channel": "pigeon", "file": (io.BytesIO(FILE.encode()), "p.csv")},
    )
    assert wrong.status_code == 400
    assert [f["field"] for f in wrong.json["error"]["details"]["fields"]] == ["channel"]


def test_the_new_batch_page_checks_phone_only_rows_and_says_how_many_texts_the_batch_may_send(app, users, client, auth):
    auth.login()
    template = create_template(db.session, name="Contract", html="<p>{{ name }}</p>", user=users["staff"], now=NOW)
    db.session.commit()
    page = client.get("/batches/new")
    assert "Email, or a text message when a row has a phone and no address" in page.get_data(as_text=True)
    checked = client.post(
        "/batches/new/validate",
        data={
            "csrf_token": csrf_from(page),
            "template_id": template.template.id,
            "channel": "text_without_address",
            "file": (io.BytesIO(b"email,name,phone\n,Ivan,+79991234567\nanna@example.com,Anna,\n"), "p.csv"),
        },
        content_type="multipart/form-data",
    )
    text = checked.get_data(as_text=True)
    assert checked.status_code == 200
    assert (
        "This batch may send up to 3 text messages: an invitation and each reminder per row with a phone, unless "
        "you set a smaller number in the settings below." in text
    )
    assert "1 row has no address and is reached by text alone." in text
    # The channel goes with the file to the batch's creation.
    assert '<input type="hidden" name="channel" value="text_without_address">' in text

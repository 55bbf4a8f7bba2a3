"""Batches reached by text, for tests: a batch made over the API from a file, and signing from a texted link."""

from __future__ import annotations

import io
import re

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.people.users import create_api_key
from tests.support.clock import NOW
from tests.support.signatures import data_url, png
from tests.support.web import csrf_from

LINK = re.compile(r"(https?://\S+/s/([A-Za-z0-9_-]+))")


def create_batch(client, users, file: str, *, html: str = "<p>Договор: {{ name }}</p>", **fields) -> int:
    users["staff"].display_name = "Staff User"
    template = create_template(db.session, name="Трудовой договор", html=html, user=users["staff"], now=NOW)
    key = create_api_key(db.session, user=users["staff"], name="test", now=NOW).secret
    db.session.commit()
    created = client.post(
        "/api/v1/batches",
        content_type="multipart/form-data",
        headers={"Authorization": f"Bearer {key}"},
        data={"template_id": template.template.id, "file": (io.BytesIO(file.encode()), "p.csv"), **fields},
    )
    assert created.status_code == 201, created.json
    return created.json["id"]


def sign_from(client, link: str, name: str) -> None:
    """Follow the texted link to the signing page and sign there, as the recipient's phone would."""
    path = link.split("://", 1)[1].split("/", 1)[1]
    opened = client.get(f"/{path}")
    assert opened.status_code == 302
    page = client.get(opened.headers["Location"])
    assert page.status_code == 200
    token = opened.headers["Location"].rsplit("/", 1)[1]
    data = {"csrf_token": csrf_from(page), "name": name, "consent": "yes", "signature": data_url(png())}
    assert (
        client.post(f"/sign/{token}/sign", data=data).status_code == 303
    )  # signed: back to the page (200 would be the form with an error)

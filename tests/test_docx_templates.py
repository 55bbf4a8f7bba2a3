"""Word templates: upload, variables, refusals, the warm LibreOffice, and what each recipient's PDF holds."""
from __future__ import annotations

import io
import subprocess

import pytest

from bulksign import docx_templates, libreoffice
from bulksign.doc_templates import TemplateError, create_template, get_version
from bulksign.extensions import db
from bulksign.pipeline import enqueue_renders
from bulksign.storage import get_storage
from bulksign.models import Document
from sqlalchemy import select
from tests.conftest import NOW
from tests.support import docx_files
from tests.support.batches import make_batch, request_ids, requests_of


def pdftotext(pdf: bytes) -> str:
    return subprocess.run(["pdftotext", "-layout", "-", "-"], input=pdf, capture_output=True, check=True).stdout.decode()


def test_variables_of_a_word_file_include_split_placeholders_header_and_loops():
    assert docx_templates.variables(docx_files.contract()) == ["city", "email", "name", "number", "role", "salary"]


def test_the_api_takes_a_word_file_and_answers_its_kind_and_variables(client, users):
    from bulksign.users import create_api_key

    key = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    headers = {"Authorization": f"Bearer {key}"}
    created = client.post("/api/v1/templates", headers=headers, content_type="multipart/form-data",
                          data={"name": "Contract", "file": (io.BytesIO(docx_files.contract()), "contract.docx")})
    assert created.status_code == 201, created.json
    assert created.json == {**created.json, "name": "Contract", "version": 1, "kind": "docx",
                            "variables": ["city", "email", "name", "number", "role", "salary"]}
    version = get_version(db.session, template_id=created.json["id"])
    assert version.source_key.endswith(".docx") and get_storage().get(version.source_key) == docx_files.contract()
    html = client.post("/api/v1/templates", headers=headers, content_type="multipart/form-data",
                       data={"name": "H", "file": (io.BytesIO(b"<p>{{ a }}</p>"), "t.html")})
    assert html.status_code == 201 and html.json["kind"] == "html" and html.json["variables"] == ["a"]
    macro = client.post("/api/v1/templates", headers=headers, content_type="multipart/form-data",
                        data={"name": "M", "file": (io.BytesIO(docx_files.contract()), "evil.docm")})
    assert macro.status_code == 422 and "macro" in macro.json["error"]


def test_each_recipient_gets_their_own_values_in_their_own_pdf(app, users, smtp, run_jobs):
    from tests.support.workers import run_burst_worker

    batch = make_batch(user=users["staff"], now=NOW, recipients=[("a@example.com", "Анна Иванова"),
                                                                  ("b@example.com", "Борис Петров")],
                       html="", kind="docx", file=docx_files.contract())
    enqueue_renders(request_ids(batch))
    run_burst_worker("pdf")
    texts = {}
    for request in requests_of(batch):
        assert request.status == "generated", request.error_message
        doc = db.session.scalar(select(Document).where(Document.request_id == request.id))
        texts[request.name] = pdftotext(get_storage().get(doc.storage_key))
    for name, text in texts.items():
        other = next(n for n in texts if n != name)
        assert name in text and other not in text
        assert "Трудовой договор" in text and "Должность" in text and "Страница 2" in text

"""PDF templates through the app: upload (page and API), boxes placed on a plain PDF, page images, the render job."""

from __future__ import annotations

import io
import json
import re
import subprocess
from io import BytesIO

import pytest
from pypdf import PdfReader
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template, get_version
from bulksign.documents.storage import get_storage
from bulksign.models import Document, DocumentTemplate
from bulksign.work.pipeline import enqueue_renders
from tests.support.batches import make_batch, request_ids, requests_of
from tests.support.clock import NOW
from tests.support.pdf_files import HTTPS_LINK, active_content, contract_form, hostile_form, nested_pdf, plain_pdf
from tests.support.web import csrf_from

FORM = contract_form(fields=("name", "email", "salary"), signature=True)


def pdftotext(pdf: bytes) -> str:
    return subprocess.run(
        ["pdftotext", "-enc", "UTF-8", "-", "-"], input=pdf, capture_output=True, check=True
    ).stdout.decode()


def words_with_boxes(pdf: bytes) -> list[tuple[int, str, float, float, float, float]]:
    """Each word ``pdftotext -bbox`` finds: (page from 1, text, x min, y min, x max, y max), y from the page's top."""
    html = subprocess.run(
        ["pdftotext", "-bbox", "-enc", "UTF-8", "-", "-"], input=pdf, capture_output=True, check=True
    ).stdout.decode()
    words = []
    for number, page in enumerate(html.split("<page ")[1:], start=1):
        for x0, y0, x1, y1, text in re.findall(
            r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" '
            r'yMax="([\d.]+)">([^<]*)</word>',
            page,
        ):
            words.append((number, text, float(x0), float(y0), float(x1), float(y1)))
    return words


def test_uploading_a_fillable_pdf_makes_a_pdf_template_whose_fields_are_the_variables(client, auth):
    auth.login()
    page = client.get("/templates/new")
    assert 'value="pdf"' in page.get_data(as_text=True)  # the kind is offered
    response = client.post(
        "/templates/new",
        content_type="multipart/form-data",
        data={"csrf_token": csrf_from(page), "name": "Form", "html": "", "file": (io.BytesIO(FORM), "contract.pdf")},
    )
    assert response.status_code == 302, response.get_data(as_text=True)
    version = get_version(db.session, template_id=db.session.scalar(select(DocumentTemplate.id)))
    assert (version.kind, version.variables, version.pdf_boxes) == ("pdf", ["email", "name", "salary"], None)
    assert get_storage().get(version.source_key) == FORM
    detail = client.get(f"/templates/{version.template_id}").get_data(as_text=True)
    assert "PDF" in detail and "Place fields" in detail
    refused = client.post(
        "/templates/new",
        content_type="multipart/form-data",
        data={
            "csrf_token": csrf_from(page),
            "name": "Broken",
            "html": "",
            "file": (io.BytesIO(FORM[:2000]), "broken.pdf"),
        },
    )
    assert refused.status_code == 422 and "could not be read" in refused.get_data(as_text=True)


def test_the_api_takes_a_pdf_and_answers_its_kind_and_variables(client, users):
    from bulksign.people.users import create_api_key

    key = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    created = client.post(
        "/api/v1/templates",
        headers={"Authorization": f"Bearer {key}"},
        content_type="multipart/form-data",
        data={"name": "Form", "file": (io.BytesIO(FORM), "form.pdf")},
    )
    assert created.status_code == 201, created.json
    assert (created.json["kind"], created.json["variables"]) == ("pdf", ["email", "name", "salary"])


def test_boxes_placed_on_a_plain_pdf_make_a_new_version_with_their_columns(client, auth, users):
    auth.login()
    saved = create_template(
        db.session, name="Plain", html="", kind="pdf", file=plain_pdf(pages=2), user=users["staff"], now=NOW
    )
    db.session.commit()
    template_id = saved.template.id
    page = client.get(f"/templates/{template_id}/place")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and "Page 2 of 2" in html and "pdf_place.js" in html
    image = client.get(f"/templates/{template_id}/pages/2.png?w=800")
    assert image.status_code == 200 and image.data.startswith(b"\x89PNG")
    assert client.get(f"/templates/{template_id}/pages/3.png").status_code == 404
    boxes = [
        {"name": "full_name", "page": 0, "x": 72, "y": 60, "w": 220, "h": 20, "font_size": 12},
        {"name": "signature", "page": 1, "x": 300, "y": 40, "w": 200, "h": 60, "font_size": 0},
    ]
    response = client.post(
        f"/templates/{template_id}/place", data={"csrf_token": csrf_from(page), "boxes": json.dumps(boxes)}
    )
    assert response.status_code == 302
    version = get_version(db.session, template_id=template_id)
    assert (version.version, version.variables, len(version.pdf_boxes)) == (2, ["full_name"], 2)
    assert version.source_key == saved.version.source_key  # the same file, kept once
    wrong = client.post(
        f"/templates/{template_id}/place",
        data={"csrf_token": csrf_from(page), "boxes": json.dumps([{**boxes[0], "page": 5}])},
    )
    assert wrong.status_code == 422 and "on page 6; the PDF has 2" in wrong.get_data(as_text=True)
    # Changing only the mail texts keeps the file and the boxes.
    edit = client.get(f"/templates/{template_id}/edit")
    client.post(
        f"/templates/{template_id}/edit",
        data={
            "csrf_token": csrf_from(edit),
            "kind": "pdf",
            "html": "",
            "email_subject": "Sign {{ document_name }} now",
        },
    )
    latest = get_version(db.session, template_id=template_id)
    assert (latest.version, latest.pdf_boxes, latest.variables) == (3, version.pdf_boxes, ["full_name"])


def test_a_page_width_not_offered_is_refused_with_the_alternatives_in_the_readers_language(app):
    from flask_babel import force_locale

    from bulksign.documents import pdf_pages

    with pytest.raises(pdf_pages.PageImageError) as refused:
        pdf_pages.page_png(get_storage(), pdf_key="templates/1/a.pdf", page=0, width=1000)
    assert refused.value.message == "Pages are drawn 800 or 1600 pixels wide."
    with force_locale("ru"):
        assert str(refused.value.message) == "Ширина отрисовки страниц в пикселях: 800 или 1600."


def test_pages_and_placement_are_out_of_reach_of_other_teams(client, auth, users):
    from bulksign.people.users import create_api_key, create_user

    outsider = create_user(db.session, email="out@example.com", password="outsider-password", role="staff", now=NOW)
    saved = create_template(
        db.session, name="Private", html="", kind="pdf", file=plain_pdf(), user=outsider, now=NOW, team_id=None
    )
    db.session.commit()
    auth.login()
    assert client.get(f"/templates/{saved.template.id}/pages/1.png").status_code == 404
    assert client.get(f"/templates/{saved.template.id}/place").status_code == 404
    key = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    api = client.put(
        f"/api/v1/templates/{saved.template.id}/boxes", json={"boxes": []}, headers={"Authorization": f"Bearer {key}"}
    )
    assert api.status_code == 404 and api.json["error"]["code"] == "not_found"


def _plain_template_and_key(users) -> tuple[int, dict]:
    from bulksign.people.users import create_api_key

    saved = create_template(
        db.session, name="Plain", html="", kind="pdf", file=plain_pdf(), user=users["staff"], now=NOW
    )
    key = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    return saved.template.id, {"Authorization": f"Bearer {key}"}


def test_boxes_at_nan_or_infinite_places_are_refused_by_name_on_the_page_and_over_the_api(client, auth, users):
    auth.login()
    template_id, headers = _plain_template_and_key(users)
    page = client.get(f"/templates/{template_id}/place")
    box = {"name": "full_name", "page": 0, "x": 72, "y": 60, "w": 220, "h": 20, "font_size": 12}
    api_box = {"variable": "full_name", "page": 1, "x": 72, "y": 60, "width": 220, "height": 20, "font_size": 12}
    for field, api_field, value in (
        ("x", "x", float("nan")),
        ("h", "height", float("nan")),
        ("w", "width", float("inf")),
        ("y", "y", float("-inf")),
        ("font_size", "font_size", float("nan")),
    ):
        # json.dumps writes NaN and Infinity, which Python's parser (and so Flask's) reads back.
        refused = client.post(
            f"/templates/{template_id}/place",
            data={"csrf_token": csrf_from(page), "boxes": json.dumps([{**box, field: value}])},
        )
        assert refused.status_code == 422, (field, value)
        assert "Box 1 (full_name): its place, size and font size must be ordinary numbers" in refused.get_data(
            as_text=True
        ), (field, value)
        api = client.put(
            f"/api/v1/templates/{template_id}/boxes", headers=headers, json={"boxes": [{**api_box, api_field: value}]}
        )
        assert api.status_code == 400 and "finite number" in api.json["error"]["message"], (field, api.json)
    assert get_version(db.session, template_id=template_id).version == 1


def test_boxes_nested_50000_deep_are_refused_with_a_message_not_a_server_error(client, auth, users):
    auth.login()
    template_id, headers = _plain_template_and_key(users)
    page = client.get(f"/templates/{template_id}/place")
    deep = "[" * 50_000 + "]" * 50_000
    refused = client.post(f"/templates/{template_id}/place", data={"csrf_token": csrf_from(page), "boxes": deep})
    assert refused.status_code == 422 and "The boxes could not be read" in refused.get_data(as_text=True)
    api = client.put(
        f"/api/v1/templates/{template_id}/boxes",
        headers=headers,
        data='{"boxes": ' + deep + "}",
        content_type="application/json",
    )
    assert api.status_code == 400 and "Send a JSON object" in api.json["error"]["message"]
    assert get_version(db.session, template_id=template_id).version == 1


def test_boxes_placed_over_the_api_print_each_recipients_values_there(client, users, run_jobs):
    from bulksign.people.users import create_api_key

    headers = {"Authorization": f"Bearer {create_api_key(db.session, user=users['staff'], name='t', now=NOW).secret}"}
    db.session.commit()
    created = client.post(
        "/api/v1/templates",
        headers=headers,
        content_type="multipart/form-data",
        data={"name": "Plain", "file": (io.BytesIO(plain_pdf(pages=2)), "plain.pdf")},
    )
    template_id = created.json["id"]
    boxes = [
        {"variable": "position", "page": 1, "x": 72, "y": 60, "width": 220, "height": 20, "font_size": 12},
        {"variable": "signature", "page": 2, "x": 300.5, "y": 40, "width": 200, "height": 60},
    ]
    placed = client.put(f"/api/v1/templates/{template_id}/boxes", json={"boxes": boxes}, headers=headers)
    assert placed.status_code == 200, placed.json
    assert {k: placed.json[k] for k in ("id", "version", "name", "kind", "variables")} == {
        "id": template_id,
        "version": 2,
        "name": "Plain",
        "kind": "pdf",
        "variables": ["position"],
    }
    # Read back as PUT takes them (a box without a font size fits its text: 0), with the pages they lie on.
    read = client.get(f"/api/v1/templates/{template_id}/boxes", headers=headers)
    assert read.status_code == 200, read.json
    assert read.json["boxes"] == [boxes[0], {**boxes[1], "font_size": 0}] and read.json["version"] == 2
    assert read.json["pages"] == [
        {"page": n, "left": 0, "bottom": 0, "width": 595.28, "height": 841.89, "rotation": 0} for n in (1, 2)
    ]
    assert read.json["fields"] == []
    again = client.put(f"/api/v1/templates/{template_id}/boxes", json={"boxes": read.json["boxes"]}, headers=headers)
    assert (
        again.status_code == 200
        and client.get(f"/api/v1/templates/{template_id}/boxes", headers=headers).json["boxes"] == read.json["boxes"]
    )
    client.put(f"/api/v1/templates/{template_id}/boxes", json={"boxes": boxes}, headers=headers)
    # The domain's checks and words, in the API's one error shape; nothing saved.
    wrong = client.put(
        f"/api/v1/templates/{template_id}/boxes", headers=headers, json={"boxes": [{**boxes[0], "page": 5}]}
    )
    assert wrong.status_code == 422 and wrong.json["error"]["code"] == "boxes_invalid"
    assert "is on page 5; the PDF has 2" in wrong.json["error"]["message"]
    twice = client.put(
        f"/api/v1/templates/{template_id}/boxes", headers=headers, json={"boxes": [boxes[1], {**boxes[1], "page": 1}]}
    )
    assert twice.status_code == 422 and "not several" in twice.json["error"]["message"]
    html = client.post("/api/v1/templates", headers=headers, json={"name": "Letter", "html": "<p>{{ name }}</p>"})
    not_pdf = client.put(f"/api/v1/templates/{html.json['id']}/boxes", json={"boxes": []}, headers=headers)
    assert not_pdf.status_code == 409 and not_pdf.json["error"]["code"] == "not_a_pdf_template"
    assert client.get(f"/api/v1/templates/{html.json['id']}/boxes", headers=headers).status_code == 409
    assert get_version(db.session, template_id=template_id).version == 4

    csv = "email,name,position\nanna@example.com,Anna,Главный бухгалтер\nboris@example.com,Boris,Старший инженер\n"
    batch = client.post(
        "/api/v1/batches",
        headers=headers,
        content_type="multipart/form-data",
        data={"template_id": template_id, "file": (io.BytesIO(csv.encode()), "people.csv")},
    )
    assert batch.status_code == 201, batch.json
    run_jobs("pdf")
    documents = db.session.scalars(select(Document).order_by(Document.request_id)).all()
    for document, (first, last) in zip(documents, [("Главный", "бухгалтер"), ("Старший", "инженер")], strict=True):
        assert document.signature_box == {"page": 1, "x": 300.5, "y": 40.0, "w": 200.0, "h": 60.0}
        words = words_with_boxes(get_storage().get(document.storage_key))
        value = [w for w in words if w[1] in (first, last)]
        assert [w[:2] for w in value] == [(1, first), (1, last)]
        # Inside the box: x 72–292 pt, y 60–80 pt from the bottom of an 842 pt page (762–782 from its top).
        for _, _, x0, y0, x1, y1 in value:
            assert 72 <= x0 < x1 <= 292 and 762 <= y0 < y1 <= 782, (x0, y0, x1, y1)
        others = {"Главный", "Старший"} - {first}
        assert not [w for w in words if w[1] in others]


def test_each_recipient_gets_their_own_flattened_pdf_from_the_render_job(app, users, smtp, run_jobs):
    from tests.support.workers import run_burst_worker

    batch = make_batch(
        user=users["staff"],
        now=NOW,
        recipients=[("a@example.com", "Анна Иванова"), ("b@example.com", "Борис Петров")],
        html="",
        kind="pdf",
        file=FORM,
    )
    enqueue_renders(request_ids(batch))
    run_burst_worker("pdf")
    texts = {}
    for request in requests_of(batch):
        assert request.status == "generated", request.error_message
        document = db.session.scalar(select(Document).where(Document.request_id == request.id))
        data = get_storage().get(document.storage_key)
        assert not PdfReader(BytesIO(data)).get_fields()
        # The form's field named "signature" is where sealing stamps the signature (signature_box).
        assert document.signature_box == {"page": 1, "x": 300.0, "y": 40.0, "w": 200.0, "h": 60.0}
        texts[request.name] = pdftotext(data)
    assert "Анна Иванова" in texts["Анна Иванова"] and "a@example.com" in texts["Анна Иванова"]
    assert "Борис Петров" not in texts["Анна Иванова"] and "b@example.com" not in texts["Анна Иванова"]
    assert "Борис Петров" in texts["Борис Петров"] and "Анна Иванова" not in texts["Борис Петров"]


def test_active_content_is_taken_out_of_an_uploaded_pdf_and_reaches_no_recipient_nor_the_sealed_copy(
    app, client, auth, users
):
    from bulksign.documents.audit_record import AuditRecord
    from bulksign.documents.seal_keys import seal_key
    from bulksign.documents.sealing import apply_seal
    from bulksign.documents.signature_box import SignatureBox
    from bulksign.documents.signed_pdf import build_signed_pdf
    from tests.support.workers import run_burst_worker

    auth.login()
    page = client.get("/templates/new")
    response = client.post(
        "/templates/new",
        content_type="multipart/form-data",
        follow_redirects=True,
        data={
            "csrf_token": csrf_from(page),
            "name": "Hostile",
            "html": "",
            "file": (io.BytesIO(hostile_form()), "c.pdf"),
        },
    )
    assert response.status_code == 200, response.get_data(as_text=True)
    notice = " ".join(response.get_data(as_text=True).split())
    assert (
        "Taken out of the PDF, so that no recipient gets it: JavaScript, launch actions (programs to start), "
        "links that are not https, links to other files, form submission and data import, embedded files, file "
        "attachments, media and 3D content, XFA form data."
    ) in notice
    version = get_version(db.session, template_id=db.session.scalar(select(DocumentTemplate.id)))
    assert version.variables == ["email", "name", "salary"]
    assert active_content(get_storage().get(version.source_key)) == set()  # what every render starts from

    batch = make_batch(
        user=users["staff"],
        now=NOW,
        recipients=[("anna@example.com", "Анна Иванова")],
        html="",
        kind="pdf",
        file=hostile_form(),
    )
    enqueue_renders(request_ids(batch))
    run_burst_worker("pdf")
    [request] = requests_of(batch)
    assert request.status == "generated", request.error_message
    document = db.session.scalar(select(Document).where(Document.request_id == request.id))
    original = get_storage().get(document.storage_key)
    record = AuditRecord(
        document_name="Contract",
        batch_id=batch,
        request_id=request.id,
        recipient_name=request.name,
        recipient_email=request.email,
        signer_name=request.name,
        signer_ip="203.0.113.5",
        signed_at=NOW,
        original_sha256=document.sha256,
        lines=(),
    )
    sealed = apply_seal(
        build_signed_pdf(original, record, image_png=None, box=SignatureBox.from_json(document.signature_box)),
        seal_key(app.config),
    )
    for pdf in (original, sealed):
        assert active_content(pdf) == set()
        assert "Анна Иванова" in pdftotext(pdf) and "anna@example.com" in pdftotext(pdf)
        links = [a.get_object() for a in PdfReader(BytesIO(pdf)).pages[0]["/Annots"]]
        assert [a["/A"]["/URI"] for a in links if "/A" in a and "/URI" in a["/A"]] == [HTTPS_LINK]


def test_a_pdf_nested_50000_deep_is_refused_with_a_message_not_a_server_error(client, users):
    from bulksign.people.users import create_api_key

    key = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    refused = client.post(
        "/api/v1/templates",
        headers={"Authorization": f"Bearer {key}"},
        content_type="multipart/form-data",
        data={"name": "Deep", "file": (io.BytesIO(nested_pdf(50_000)), "deep.pdf")},
    )
    assert refused.status_code == 422, refused.json
    assert "nested more than 100 levels deep" in refused.json["error"]["message"]

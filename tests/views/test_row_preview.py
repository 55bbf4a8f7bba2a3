"""Any row of a checked file seen as its recipient's document before sending: found by name, row number or
address, or at random; pages as images and the PDF; a row with errors names its cells; only its uploader sees it.
And the approver of a batch looks at any of its rows, not only the first."""

from __future__ import annotations

import io
import re

import pytest
from pypdf import PdfReader
from sqlalchemy import func, select

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template
from bulksign.models import Document, SigningRequest
from tests.batches.test_approval import MANAGER, _create, _key, _login, team  # noqa: F401 - team is a fixture
from tests.support.clock import NOW
from tests.support.web import csrf_from

PEOPLE = (
    "email,name,position,start_date\r\n"
    + "".join(f"p{i}@example.com,Person {i},Clerk {i},0{i}.02.2027\r\n" for i in range(1, 9))
    + "broken@,Broken Row,Clerk,01.02.2027\r\n"
    + "late@example.com,Late Row,Clerk,someday\r\n"
).encode()


@pytest.fixture
def checked(client, auth, users):
    """The file checked on the page by the staff member: its upload id."""
    template = create_template(
        db.session,
        name="Contract",
        html="<p>{{ name }}: {{ position }} from {{ start_date|date('long') }}</p><p>{{ signature }}</p>",
        user=users["staff"],
        now=NOW,
    )
    db.session.commit()
    auth.login()
    page = client.get("/batches/new")
    preview = client.post(
        "/batches/new/validate",
        headers={"HX-Request": "true"},
        content_type="multipart/form-data",
        data={
            "csrf_token": csrf_from(page),
            "template_id": template.template.id,
            "file": (io.BytesIO(PEOPLE), "people.csv"),
        },
    )
    html = preview.get_data(as_text=True)
    assert 'id="row-preview"' in html and re.search(r'id="valid-rows">8<', html)
    return re.search(r'name="upload_id" value="([0-9a-f]+)"', html).group(1)


def _rows(client, upload_id: str, **args) -> list[str]:
    html = client.get(f"/batches/uploads/{upload_id}/rows", query_string=args).get_data(as_text=True)
    return [" ".join(t.split()) for t in re.findall(r'class="row-link[^"]*">(.*?)</a>', html, re.S)]


def test_a_row_is_found_by_name_number_or_address_and_a_shuffle_shows_five(client, checked):
    assert _rows(client, checked, q="person 3") == ["Row 4: Person 3 · p3@example.com"]
    assert _rows(client, checked, q="7") == ["Row 7: Person 6 · p6@example.com"]
    assert _rows(client, checked, q="P8@EXAMPLE") == ["Row 9: Person 8 · p8@example.com"]
    assert _rows(client, checked, q="someday") == ["Row 11: Late Row · late@example.com"]
    shuffled = _rows(client, checked, shuffle="1")
    assert len(shuffled) == 5 and all(row.startswith("Row ") and "Person" in row for row in shuffled)
    none = client.get(f"/batches/uploads/{checked}/rows", query_string={"q": "%_" * 300}).get_data(as_text=True)
    assert 'id="no-rows"' in none


def test_a_row_opens_as_its_document_with_its_pages_as_images_and_the_pdf(client, checked):
    html = client.get(f"/batches/uploads/{checked}/rows/4").get_data(as_text=True)
    assert "Rendered now as its recipient p3@example.com will get it" in html
    pages = re.findall(r'<img src="([^"]+)"', html)
    assert pages == [f"/batches/uploads/{checked}/rows/4/pages/1.png?language=en"]
    image = client.get(pages[0])
    assert image.status_code == 200 and image.data.startswith(b"\x89PNG")
    pdf = client.get(f"/batches/uploads/{checked}/rows/4.pdf")
    text = " ".join(PdfReader(io.BytesIO(pdf.data)).pages[0].extract_text().split())
    assert text.startswith("Person 3: Clerk 3 from February 3, 2027")
    assert db.session.scalar(select(func.count()).select_from(Document)) == 0  # looked at, never stored
    assert client.get(f"/batches/uploads/{checked}/rows/4/pages/2.png").status_code == 404


def test_a_row_with_errors_names_the_cells_to_fix(client, checked):
    html = client.get(f"/batches/uploads/{checked}/rows/11").get_data(as_text=True)
    assert "This row is left out until these cells are fixed:" in html
    assert re.search(r"<td>start_date \(“someday”\)</td><td>&#34;someday&#34; is not a date", html)
    assert client.get(f"/batches/uploads/{checked}/rows/11.pdf").status_code == 404


def test_rows_of_another_users_file_and_rows_it_does_not_have_are_not_found(client, auth, checked):
    assert client.get(f"/batches/uploads/{checked}/rows/1").status_code == 404  # the header
    assert client.get(f"/batches/uploads/{checked}/rows/99.pdf").status_code == 404
    assert client.get("/batches/uploads/nothing/rows").status_code == 404
    auth.logout()
    auth.login_admin()
    assert client.get(f"/batches/uploads/{checked}/rows/4").status_code == 404
    assert client.get(f"/batches/uploads/{checked}/rows", query_string={"q": "person"}).status_code == 404


def test_the_approver_finds_any_row_of_the_batch_and_opens_its_document(client, team):  # noqa: F811
    batch_id = _create(client, _key(team["staff"]))["id"]
    _login(client, *MANAGER)
    html = client.get(f"/batches/{batch_id}/samples", query_string={"q": "john"}).get_data(as_text=True)
    john = db.session.scalar(select(SigningRequest.id).where(SigningRequest.email == "john@example.com"))
    assert f'href="/batches/{batch_id}/samples/{john}.pdf"' in html and "Row 3: John" in html
    assert "Row 2: Anna" in client.get(f"/batches/{batch_id}/samples", query_string={"q": "2"}).get_data(as_text=True)
    shuffled = client.get(f"/batches/{batch_id}/samples", query_string={"shuffle": "1"}).get_data(as_text=True)
    assert "Row 2: Anna" in shuffled and "Row 3: John" in shuffled
    sample = client.get(f"/batches/{batch_id}/samples/{john}.pdf")
    assert " ".join(PdfReader(io.BytesIO(sample.data)).pages[0].extract_text().split()) == "John: Engineer"
    assert client.get(f"/batches/{batch_id + 1}/samples", query_string={"q": "john"}).status_code == 404

"""A Word template can make LibreOffice load nothing that is not its own: not another team's stored documents, not an
address. Two walls: the parts LibreOffice is given are checked (``docx_safety``), and LibreOffice (and wkhtmltopdf)
run in a sandbox with no network and none of our files (``sandbox``), tested here with the first wall out of the way.
"""

from __future__ import annotations

import http.server
import io
import subprocess
import threading
import tracemalloc

import pytest
from pypdf import PdfReader
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.doc_templates import docx_templates
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.versions import get_version
from bulksign.documents import libreoffice, pdf, sandbox
from bulksign.documents.storage import get_storage
from bulksign.models import DocumentTemplate
from bulksign.recipients.files import open_table
from bulksign.recipients.rows import UploadError
from bulksign.work.pipeline import enqueue_renders
from tests.support import docx_files, hostile_docx
from tests.support.batches import make_batch, request_ids, requests_of
from tests.support.clock import NOW
from tests.support.web import csrf_from


class Listener:
    """A real HTTP server on loopback that records every request it gets: a converter must send it none."""

    def __init__(self):
        self.requests: list[str] = []
        seen = self.requests

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append(f"{self.path} {self.headers.get('User-Agent')}")
                self.send_response(404)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.server.shutdown()


@pytest.fixture
def other_teams_document(tmp_path):
    """A picture standing in for another team's stored document, at a path as predictable as a storage key."""
    path = tmp_path / "storage" / "batches" / "1" / "requests" / "1" / "original.png"
    path.parent.mkdir(parents=True)
    path.write_bytes(docx_files.png(300, 200, (10, 200, 10)))
    return path


def _hostile(target: str) -> list:
    return [
        pytest.param(
            lambda t=target, s=s: hostile_docx.linked_image(t, spelling=s),
            "links to an outside file",
            id=f"relationship {s}",
        )
        for s in hostile_docx.RELATIONSHIP_SPELLINGS
    ] + [
        pytest.param(
            lambda t=target, s=s: hostile_docx.including_field(t, spelling=s), "loads another file", id=f"field {s}"
        )
        for s in hostile_docx.FIELD_SPELLINGS
    ]


@pytest.mark.parametrize(
    ("make", "words"),
    [
        *_hostile("http://127.0.0.1:9/secret.png"),
        *_hostile("file:///var/lib/bulksign/storage/batches/1/requests/1/original.pdf"),
        pytest.param(hostile_docx.embedded_package, "embeds another document", id="embedded package"),
        pytest.param(lambda: hostile_docx.doctype_in("word/footnotes.xml"), "DOCTYPE", id="DOCTYPE in footnotes"),
        pytest.param(lambda: hostile_docx.doctype_in("word/fontTable.xml"), "DOCTYPE", id="DOCTYPE in the font table"),
        pytest.param(lambda: hostile_docx.doctype_in("word/settings.xml"), "DOCTYPE", id="DOCTYPE in settings"),
    ],
)
def test_every_spelling_of_a_load_from_outside_is_refused_with_a_clear_message(make, words):
    with pytest.raises(TemplateError, match=words):
        docx_templates.variables(make())


def test_a_plain_hyperlink_stays_allowed():
    base = docx_files.simple("See {{ name }}")
    document = hostile_docx.part(base, "word/document.xml").replace(
        "</w:p>", '<w:hyperlink r:id="rId99"><w:r><w:t>our site</w:t></w:r></w:hyperlink></w:p>', 1
    )
    rels = hostile_docx.part(base, "word/_rels/document.xml.rels").replace(
        "</Relationships>",
        '<Relationship Id="rId99" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
        'relationships/hyperlink" Target="https://example.com/" TargetMode="External"/></Relationships>',
    )
    linked = hostile_docx.with_parts(
        {"word/document.xml": document.encode(), "word/_rels/document.xml.rels": rels.encode()}, base
    )
    assert docx_templates.variables(linked) == ["name"]


def test_the_web_form_and_the_api_refuse_hostile_word_files_and_no_converter_reaches_out(
    client, auth, users, listener, other_teams_document
):
    from bulksign.people.users import create_api_key

    hostile = [
        hostile_docx.linked_image(f"{listener.url}/img.png", spelling="single quotes"),
        hostile_docx.linked_image(f"file://{other_teams_document}", spelling="another prefix"),
        hostile_docx.including_field(f"{listener.url}/inc.docx", spelling="CDATA"),
        hostile_docx.embedded_package(),
    ]
    key = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    auth.login()
    for data in hostile:
        page = client.get("/templates/new")
        form = client.post(
            "/templates/new",
            content_type="multipart/form-data",
            data={
                "csrf_token": csrf_from(page),
                "name": "Contract",
                "kind": "docx",
                "file": (io.BytesIO(data), "c.docx"),
            },
        )
        assert form.status_code == 422 and "The Word file" in form.get_data(as_text=True)
        api = client.post(
            "/api/v1/templates",
            headers={"Authorization": f"Bearer {key}"},
            content_type="multipart/form-data",
            data={"name": "Contract", "file": (io.BytesIO(data), "c.docx")},
        )
        assert api.status_code == 422 and api.json["error"]["message"].startswith(("The Word file", "A {{"))
    assert db.session.scalar(select(DocumentTemplate.id)) is None
    assert listener.requests == []


def test_a_stored_word_file_that_links_out_fails_its_render_with_the_reason_and_reaches_nothing(
    app, users, run_jobs, listener
):
    """What the worker converts is checked, not only what was uploaded: a stored file that a check of its day let
    through (here written straight into storage) fails each recipient with the reason, and fetches nothing."""
    batch = make_batch(
        user=users["staff"],
        now=NOW,
        recipients=2,
        html="",
        kind="docx",
        file=docx_files.simple("Contract for {{ name }}"),
    )
    version = get_version(db.session, template_id=db.session.scalar(select(DocumentTemplate.id)))
    get_storage().put(
        version.source_key, hostile_docx.linked_image(f"{listener.url}/img.png", spelling="character reference")
    )
    enqueue_renders(request_ids(batch))
    run_jobs("pdf")
    for request in requests_of(batch):
        assert request.status == "failed" and "links to an outside file" in request.error_message
    assert listener.requests == []


def test_libreoffice_reaches_no_address_and_no_stored_document_even_past_the_check(listener, other_teams_document):
    """The second wall alone: the hostile files are handed to LibreOffice as they are, no check in between. (Without
    the sandbox the listener sees LibreOffice's user agent and the picture lands in the PDF.)"""
    converter = libreoffice.Converter()
    try:
        for hostile in (
            hostile_docx.linked_image(f"{listener.url}/img.png"),
            hostile_docx.linked_image(f"file://{other_teams_document}"),
            hostile_docx.including_field(f"{listener.url}/inc.docx", spelling="character reference"),
        ):
            converted = converter.convert(hostile, timeout=120)
            assert "Contract for" in _text(converted)
            assert _pictures(converted) == []
    finally:
        converter.stop()
    assert listener.requests == []


def test_wkhtmltopdf_reaches_no_address_and_no_stored_document_even_without_its_own_guards(
    monkeypatch, tmp_path, listener, other_teams_document
):
    """wkhtmltopdf's own guards (no local files, a proxy that refuses) taken off: the sandbox alone still holds."""
    guarded = {"disable-local-file-access", "proxy"}
    monkeypatch.setattr(
        pdf, "WKHTMLTOPDF_OPTIONS", {k: v for k, v in pdf.WKHTMLTOPDF_OPTIONS.items() if k not in guarded}
    )
    with pytest.raises(pdf.RenderError, match="loads an external or local resource"):
        pdf.render_pdf(
            f'<p>Contract</p><img src="{listener.url}/img.png"><iframe src="{listener.url}/frame">', timeout=60
        )
    assert listener.requests == []
    # Told to read local files and to write the PDF whatever failed, it finds no stored document to put in it.
    folder = tmp_path / "render"
    folder.mkdir()
    (folder / "in.html").write_text(f'<p>Contract</p><img src="file://{other_teams_document}">')
    subprocess.run(
        sandbox.command(
            [
                pdf.WKHTMLTOPDF,
                "--quiet",
                "--enable-local-file-access",
                "--load-error-handling",
                "ignore",
                "--load-media-error-handling",
                "ignore",
                "in.html",
                "out.pdf",
            ],
            folder=str(folder),
        ),
        capture_output=True,
        timeout=60,
    )
    rendered = (folder / "out.pdf").read_bytes()
    assert "Contract" in _text(rendered) and _pictures(rendered) == []


def test_a_sandboxed_program_sees_none_of_our_files_no_network_and_no_secrets_in_its_environment(
    tmp_path, monkeypatch, listener, other_teams_document
):
    monkeypatch.setenv("DATABASE_URL", "postgresql://secret@db/bulksign")
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "own.txt").write_text("mine")
    probe = (
        "import os, socket, sys\n"
        "print(open('own.txt').read())\n"
        f"print(os.path.exists({str(other_teams_document)!r}), os.path.exists('/etc/shadow'))\n"
        "print(os.environ.get('DATABASE_URL'))\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {listener.server.server_address[1]}), timeout=2)\n"
        "    print('reached')\nexcept OSError:\n    print('unreachable')\n"
    )
    run = subprocess.run(
        sandbox.command(["/usr/bin/python3", "-c", probe], folder=str(folder)),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.stdout.split() == ["mine", "False", "False", "None", "unreachable"], run.stderr
    assert listener.requests == []


def test_a_word_file_whose_zip_header_lies_is_refused_without_inflating_it():
    """2 MB that declare 2.6 KB and inflate to 2 GiB: once 2.3 GB of a web worker's memory."""
    bomb = hostile_docx.lying_zip_header()
    assert len(bomb) < 3 * 1024 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(TemplateError, match="broken or password-protected"):
            docx_templates.variables(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * 1024 * 1024


def test_a_workbook_whose_zip_header_lies_is_refused_without_inflating_it():
    from tests.support.hostile_files import lying_xlsx

    bomb = lying_xlsx()
    tracemalloc.start()
    try:
        with pytest.raises(UploadError, match="could not be read"):
            list(open_table(bomb, filename="people.xlsx").rows)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * 1024 * 1024


def _text(document: bytes) -> str:
    return subprocess.run(["pdftotext", "-", "-"], input=document, capture_output=True, check=True).stdout.decode()


def _pictures(document: bytes) -> list[tuple[int, int]]:
    """The sizes of the pictures in a PDF, but for a converter's own broken-image icon (16 × 16)."""
    sizes = []
    for page in PdfReader(io.BytesIO(document)).pages:
        for ref in ((page.get("/Resources") or {}).get("/XObject") or {}).values():
            picture = ref.get_object()
            if picture.get("/Subtype") == "/Image" and max(picture["/Width"], picture["/Height"]) > 16:
                sizes.append((picture["/Width"], picture["/Height"]))
    return sizes

"""Word templates: upload, variables, refusals, the warm LibreOffice, and what each recipient's PDF holds."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
import zipfile

import pytest
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.doc_templates import docx_package, docx_templates
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.versions import get_version
from bulksign.documents import libreoffice
from bulksign.documents.pdf import RenderError
from bulksign.documents.signature_box import find_signature_box
from bulksign.documents.storage import get_storage
from bulksign.models import Document, DocumentTemplate
from bulksign.work.pipeline import enqueue_renders
from tests.support import docx_files
from tests.support.batches import make_batch, request_ids, requests_of
from tests.support.clock import NOW
from tests.support.hostile_docx import with_parts
from tests.support.processes import alive, wait_for
from tests.support.web import csrf_from


def pdftotext(pdf: bytes) -> str:
    return subprocess.run(
        ["pdftotext", "-layout", "-", "-"], input=pdf, capture_output=True, check=True
    ).stdout.decode()


def test_variables_of_a_word_file_include_split_placeholders_header_and_loops():
    assert docx_templates.variables(docx_files.contract()) == ["city", "email", "name", "number", "role", "salary"]


def test_the_api_takes_a_word_file_and_answers_its_kind_and_variables(client, users):
    from bulksign.people.users import create_api_key

    key = create_api_key(db.session, user=users["staff"], name="t", now=NOW).secret
    db.session.commit()
    headers = {"Authorization": f"Bearer {key}"}
    contract = docx_files.contract()
    created = client.post(
        "/api/v1/templates",
        headers=headers,
        content_type="multipart/form-data",
        data={"name": "Contract", "file": (io.BytesIO(contract), "contract.docx")},
    )
    assert created.status_code == 201, created.json
    assert created.json == {
        **created.json,
        "name": "Contract",
        "version": 1,
        "kind": "docx",
        "variables": ["city", "email", "name", "number", "role", "salary"],
    }
    version = get_version(db.session, template_id=created.json["id"])
    assert version.source_key.endswith(".docx") and get_storage().get(version.source_key) == contract
    html = client.post(
        "/api/v1/templates",
        headers=headers,
        content_type="multipart/form-data",
        data={"name": "H", "file": (io.BytesIO(b"<p>{{ a }}</p>"), "t.html")},
    )
    assert html.status_code == 201 and html.json["kind"] == "html" and html.json["variables"] == ["a"]
    macro = client.post(
        "/api/v1/templates",
        headers=headers,
        content_type="multipart/form-data",
        data={"name": "M", "file": (io.BytesIO(docx_files.contract()), "evil.docm")},
    )
    assert macro.status_code == 422 and "macro" in macro.json["error"]["message"]


def test_each_recipient_gets_their_own_values_in_their_own_pdf(app, users, run_jobs):
    batch = make_batch(
        user=users["staff"],
        now=NOW,
        recipients=[("a@example.com", "Анна Иванова"), ("b@example.com", "Борис Петров")],
        html="",
        kind="docx",
        file=docx_files.contract(),
    )
    enqueue_renders(request_ids(batch))
    run_jobs("pdf")
    texts = {}
    for request in requests_of(batch):
        assert request.status == "generated", request.error_message
        doc = db.session.scalar(select(Document).where(Document.request_id == request.id))
        texts[request.name] = pdftotext(get_storage().get(doc.storage_key))
    for name, text in texts.items():
        other = next(n for n in texts if n != name)
        assert name in text and other not in text
        assert "Трудовой договор" in text and "Должность" in text and "Страница 2" in text


def _parts(docx: bytes) -> dict[str, bytes]:
    """Each part of a package, XML canonicalised (the same tree serialised the same way)."""
    from lxml import etree

    with zipfile.ZipFile(io.BytesIO(docx)) as archive:
        parts = {name: archive.read(name) for name in archive.namelist()}
    return {
        name: etree.tostring(etree.fromstring(part), method="c14n") if name.endswith((".xml", ".rels")) else part
        for name, part in parts.items()
    }


@pytest.mark.parametrize("make", [docx_files.contract, docx_files.everything, docx_files.simple])
def test_the_quick_fill_makes_the_document_docxtpl_makes(make):
    """The fill renders only the parts that can change, with docxtpl's own steps; docxtpl's full render (open,
    render, save) is the reference, part by part, including values with line breaks, tabs and XML characters."""
    from docxtpl import DocxTemplate

    source = make()
    for row in (
        {"name": "Анна Иванова", "number": "C-1", "city": "Москва", "role": "Инженер", "salary": "4200"},
        {"name": 'Boris <b>&amp; "B"', "number": "7\ttab", "city": "Line one\nline two", "role": "{{ x }}"},
    ):
        reference = DocxTemplate(io.BytesIO(source))
        reference.render({**row, "signature": docx_templates._signature_box()}, jinja_env=docx_templates._JINJA)
        expected = io.BytesIO()
        reference.save(expected)
        assert _parts(docx_templates.fill(source, row)) == _parts(expected.getvalue())
    if make is docx_files.everything:
        filled = _parts(docx_templates.fill(source, {"name": "Анна", "number": "C-9", "city": "Тула"}))
        assert "Сноска для Анна".encode() in filled["word/footnotes.xml"]
        assert "Договор C-9".encode() in filled["docProps/core.xml"]
        assert filled["word/document.xml"].count("Пункт".encode()) == 3


def _with_document_xml(change) -> bytes:
    with zipfile.ZipFile(io.BytesIO(docx_files.simple())) as source:
        xml = source.read("word/document.xml").decode()
    return with_parts({"word/document.xml": change(xml).encode()})


def _field(code: str) -> str:
    return (
        f'<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText xml:space="preserve">{code}'
        '</w:instrText></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r></w:p>'
    )


def _utf16_footnotes() -> bytes:
    """Footnotes in UTF-16, which Word reads and docxtpl's footnote step (UTF-8 only) cannot."""
    with zipfile.ZipFile(io.BytesIO(docx_files.everything())) as source:
        xml = source.read("word/footnotes.xml").decode()
    return with_parts(
        {"word/footnotes.xml": xml.replace('encoding="UTF-8"', 'encoding="UTF-16"').encode("utf-16")},
        docx_files.everything(),
    )


def _bomb() -> bytes:
    return with_parts({"word/media/empty.xml": b"\0" * (150 * 1024 * 1024)})


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: with_parts({"word/vbaProject.bin": b"macro"}), "contains macros"),
        (lambda: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 2000, "password-protected"),
        (lambda: docx_files.simple()[:3000], "broken"),
        (lambda: b"PK\x03\x04 not really a zip", "broken"),
        (lambda: b"x" * (docx_package.MAX_DOCX_BYTES + 1), "the limit is 10 MB"),
        (_bomb, "unpacks to"),
        (_utf16_footnotes, "cannot be read as a template"),
        (
            lambda: _with_document_xml(lambda xml: xml.replace("</w:p>", _field('INCLUDETEXT "/etc/passwd"'), 1)),
            "loads another file",
        ),
        (
            lambda: _with_document_xml(lambda xml: xml.replace("</w:p>", _field("{{ code }}"), 1)),
            "inside a Word field code",
        ),
        (
            lambda: with_parts(
                {
                    "word/_rels/document.xml.rels": (
                        b'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
                        b'<Relationship Id="rId99" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" '
                        b'Target="http://127.0.0.1/secret.png" TargetMode="External"/></Relationships>'
                    )
                }
            ),
            "links to an outside file",
        ),
        (lambda: docx_files.simple("{{ name "), "written wrong"),
        (lambda: docx_files.simple("{{ ''.__class__.__mro__ }}"), "not allowed"),
        (
            lambda: docx_files.simple(
                "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
            ),
            "took longer than",
        ),
    ],
)
def test_a_word_file_that_cannot_be_a_safe_template_is_refused_with_a_clear_message(make, words):
    with pytest.raises(TemplateError, match=words):
        docx_templates.variables(make())


@pytest.mark.parametrize("text", ["Pay {{ salary|dollars }}", "{% if d %}{{ d|strftime('%Y') }}{% endif %}"])
def test_a_word_file_with_an_unknown_filter_is_refused_on_the_web_form_naming_it_and_those_that_exist(
    client, auth, text
):
    """Even in a branch no sample row takes: Jinja would only fail there on the row that does, at render."""
    auth.login()
    page = client.get("/templates/new")
    response = client.post(
        "/templates/new",
        content_type="multipart/form-data",
        data={"csrf_token": csrf_from(page), "name": "Pay", "file": (io.BytesIO(docx_files.simple(text)), "pay.docx")},
    )
    body = response.get_data(as_text=True)
    assert response.status_code == 422 and "There is no filter named" in body
    assert "How to fix it:" in body and "upper, urlencode" in body


def test_a_condition_that_would_break_a_header_is_refused_with_a_clear_message():
    """A {% if %} that opens in the header's paragraph and closes in its table leaves the header's XML unbalanced
    when false: once an uncaught XML error (a 500 on upload), now a message saying what to change."""
    from docx import Document

    document = Document()
    header = document.sections[0].header
    header.paragraphs[0].text = "{% if name == 'Анна' %}Анна"
    header.add_table(rows=1, cols=1, width=10**6).cell(0, 0).text = "!{% endif %}"
    source = docx_files.save(document)
    with pytest.raises(TemplateError, match="header or footer is broken once filled in"):
        docx_templates.variables(source)
    with pytest.raises(TemplateError, match="Keep each in one paragraph"):
        docx_templates.fill(source, {"name": "Борис"})


def test_a_hyperlink_is_fine_and_values_cannot_write_word_xml():
    assert docx_templates.variables(docx_files.simple("{{ name }} {{ note }}")) == ["name", "note"]
    filled = docx_templates.fill(docx_files.simple("{{ name }}"), {"name": '</w:t></w:r><w:r><w:t>x & "y" <z>'})
    with zipfile.ZipFile(io.BytesIO(filled)) as archive:
        xml = archive.read("word/document.xml").decode()
    assert "&lt;/w:t&gt;&lt;/w:r&gt;" in xml and "&amp;" in xml and "<w:t>x" not in xml


def test_too_many_pages_for_one_recipient_is_refused(monkeypatch):
    monkeypatch.setattr(docx_templates, "MAX_PAGES", 1)
    with pytest.raises(TemplateError, match="runs past 1 pages for this recipient"):
        docx_templates.prepare(None, docx_files.contract(), {"name": "A"}, timeout=60)()


def test_signature_marks_a_fixed_size_box_in_the_line_and_leaves_no_text():
    source = docx_files.simple("Signed by {{ name }}: {{ signature }} (date)")
    assert docx_templates.variables(source) == ["name", "signature"]
    pdf = docx_templates.prepare(None, source, {"name": "Anna", "signature": "not a box"}, timeout=60)()
    assert pdftotext(pdf).split() == ["Signed", "by", "Anna:", "(date)"], "the box adds no word to the text"
    box = find_signature_box(pdf)
    assert box is not None and (round(box.w * 25.4 / 72), round(box.h * 25.4 / 72)) == (60, 22)
    words = subprocess.run(["pdftotext", "-bbox", "-", "-"], input=pdf, capture_output=True, check=True).stdout.decode()
    anna = re.search(r'xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">Anna:<', words)
    page_height = float(re.search(r'<page width="[\d.]+" height="([\d.]+)"', words).group(1))
    # The box stands in the line after "Anna:" and rises 22 mm above the line's foot.
    assert 0 < box.x - float(anna.group(3)) < 10
    assert abs(float(anna.group(4)) - (page_height - box.y - box.h) - 22 * 72 / 25.4) < 6


@pytest.mark.slow
def test_the_converter_is_kept_warm_and_replaced_when_it_dies_hangs_or_has_served_enough():
    converter = libreoffice.Converter(max_documents=2)
    try:
        filled = docx_templates.fill(docx_files.simple(), {"name": "Warm"})
        # A caller that cannot wait for the start (a preview) gets an answer in time; the start goes on.
        with pytest.raises(RenderError, match="still starting") as starting:
            converter.convert(filled, timeout=0.01)
        assert starting.value.transient and converter.pid is not None
        for _ in range(2):
            assert "Warm" in pdftotext(converter.convert(filled, timeout=60))
        assert converter.starts == 1
        converter.convert(filled, timeout=60)  # the third document: a fresh LibreOffice
        assert converter.starts == 2
        dead = converter.pid
        os.killpg(dead, signal.SIGKILL)
        wait_for(lambda: not alive(dead), timeout=10, what="the killed converter to end")
        assert "Warm" in pdftotext(converter.convert(filled, timeout=60))
        assert converter.starts == 3
        big = docx_templates.fill(docx_files.simple("{% for i in range(3000) %}Line {{ i }} of many. {% endfor %}"), {})
        with pytest.raises(RenderError, match="longer than 0.01 s") as hung:
            converter.convert(big, timeout=0.01)
        assert hung.value.transient and converter.pid is None
        assert "Warm" in pdftotext(converter.convert(filled, timeout=60)) and converter.starts == 4
    finally:
        converter.stop()


def test_staff_upload_a_word_template_in_the_browser_and_preview_it_as_a_pdf(client, auth):
    auth.login()
    page = client.get("/templates/new")
    assert 'value="docx"' in page.get_data(as_text=True)
    response = client.post(
        "/templates/new",
        content_type="multipart/form-data",
        data={
            "csrf_token": csrf_from(page),
            "name": "Договор",
            "kind": "docx",
            "file": (io.BytesIO(docx_files.contract()), "contract.docx"),
        },
    )
    assert response.status_code == 302, response.get_data(as_text=True)
    template_id = db.session.scalar(select(DocumentTemplate.id))
    detail = client.get(f"/templates/{template_id}").get_data(as_text=True)
    assert "Word (.docx)" in detail and "city, email, name, number, role, salary" in detail
    preview = client.get(f"/templates/{template_id}/preview.pdf")
    assert preview.status_code == 200 and preview.data.startswith(b"%PDF")
    assert "Jane Example" in pdftotext(preview.data) and "[city]" in pdftotext(preview.data)
    # A new version with only new mail texts keeps the file; one without any file is refused.
    edit = client.get(f"/templates/{template_id}/edit")
    again = client.post(
        f"/templates/{template_id}/edit",
        data={"csrf_token": csrf_from(edit), "kind": "docx", "email_subject": "Подпишите"},
    )
    assert again.status_code == 302
    first, second = (get_version(db.session, template_id=template_id, version=n) for n in (1, 2))
    assert second.source_key == first.source_key and second.email_subject == "Подпишите"
    new = client.get("/templates/new")
    missing = client.post("/templates/new", data={"csrf_token": csrf_from(new), "name": "X", "kind": "docx"})
    assert missing.status_code == 422 and "Upload the template file (.docx)" in missing.get_data(as_text=True)
    docm = client.post(
        "/templates/new",
        content_type="multipart/form-data",
        data={"csrf_token": csrf_from(new), "name": "M", "file": (io.BytesIO(docx_files.simple()), "m.docm")},
    )
    assert docm.status_code == 422 and "macro" in docm.get_data(as_text=True)


@pytest.mark.parametrize(
    "text", ['{{ "<w:r><w:t>x</w:t></w:r>"|safe }}', "{% autoescape false %}{{ name }}{% endautoescape %}"]
)
def test_a_word_template_cannot_turn_text_into_word_xml(text):
    with pytest.raises(TemplateError, match="not allowed"):
        docx_templates.variables(docx_files.simple(text))


def test_a_fetching_field_split_over_runs_is_still_refused():
    split = _field("INCLU").replace("</w:p>", "") + _field('DETEXT "/etc/passwd"')
    with pytest.raises(TemplateError, match="loads another file"):
        docx_templates.variables(_with_document_xml(lambda xml: xml.replace("</w:p>", split, 1)))


@pytest.mark.parametrize("when", ["warm", "starting"])
def test_a_killed_worker_leaves_no_libreoffice_behind(tmp_path, when):
    """Killed with LibreOffice warm, or while it starts: then unoserver passes the death signal on and would serve on
    (seen in the soak: orphaned unoserver and oosplash)."""
    convert = "c.convert(open(sys.argv[1], 'rb').read(), timeout=120)"
    script = (
        "import sys, threading, time; from bulksign.documents import libreoffice; c = libreoffice.converter(); "
        + {
            "warm": f"{convert}; print(c.pid, flush=True); time.sleep(600)",
            "starting": f"threading.Thread(target=lambda: {convert}, daemon=True).start()\n"
            "while c.pid is None: time.sleep(0.05)\n"
            "time.sleep(2); print(c.pid, flush=True); time.sleep(600)",
        }[when]
    )
    (tmp_path / "a.docx").write_bytes(docx_files.simple())
    worker = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "a.docx")], stdout=subprocess.PIPE, text=True
    )
    server = int(worker.stdout.readline())
    if when == "warm":
        assert len(_session(server)) >= 2  # unoserver and soffice, in their own session
    worker.kill()
    worker.wait()
    wait_for(lambda: not _session(server), timeout=20, what="the converter's session to end", every=0.2)


def _session(leader: int) -> list[int]:
    """The live processes of a session (LibreOffice started later by one of them included)."""
    found = subprocess.run(["pgrep", "-s", str(leader)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in found if alive(int(p))]


def test_a_converter_started_from_a_short_lived_thread_outlives_that_thread():
    """The render job converts in a helper thread that ends with the job; its LibreOffice must not end with it
    (the death signal follows the thread that started the process)."""
    import threading

    filled = docx_templates.fill(docx_files.contract(), {"name": "Иван", "email": "ivan@example.com"})
    converter = libreoffice.Converter()
    try:
        first = threading.Thread(target=converter.convert, args=(filled,), kwargs={"timeout": 120})
        first.start()
        first.join()
        time.sleep(1)  # long enough for a death signal to have ended the server
        assert converter.convert(filled, timeout=60).startswith(b"%PDF")
        assert converter.starts == 1
    finally:
        converter.stop()

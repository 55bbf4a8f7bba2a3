"""Shared seams: PDF rendering, storage keys, sandboxed rendering and signing tokens."""

from __future__ import annotations

import pytest

from bulksign.core.tokens import hash_token, new_nonce, signing_token
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.jinja_sandbox import render_html, render_text
from bulksign.documents.pdf import RenderError, render_pdf
from bulksign.documents.storage import InvalidKey, LocalStorage


def test_a_document_renders_to_a_pdf_with_its_text():
    pdf = render_pdf('<meta charset="utf-8"><p style="font-family:\'DejaVu Serif\'">Договор № 7 — Müller</p>')
    assert pdf.startswith(b"%PDF") and len(pdf) > 1000


@pytest.mark.parametrize("html", ['<img src="file:///etc/passwd">', '<iframe src="file:///etc/passwd"></iframe>'])
def test_a_local_file_cannot_be_pulled_into_a_pdf(html):
    with pytest.raises(RenderError) as caught:
        render_pdf(html)
    assert "not allowed" in caught.value.message and not caught.value.transient


def test_a_render_that_hangs_is_stopped_by_the_timeout():
    # A huge table keeps wkhtmltopdf busy for far longer than the timeout.
    rows = "".join(f"<tr><td>{i}</td><td>{'x ' * 40}</td></tr>" for i in range(60000))
    with pytest.raises(RenderError) as caught:
        render_pdf(f"<table>{rows}</table>", timeout=0.5)
    assert "longer than 0.5 s" in caught.value.message


@pytest.mark.parametrize("key", ["../x", "a/../../b", "/etc/passwd", "a//b", "a\\b", ".hidden", "", "a/./b"])
def test_storage_refuses_keys_that_could_leave_its_folder(tmp_path, key):
    with pytest.raises(InvalidKey):
        LocalStorage(tmp_path).put(key, b"x")


def test_storage_round_trip(tmp_path):
    storage = LocalStorage(tmp_path / "s")
    storage.put("batches/1/requests/2/original.pdf", b"%PDF-1")
    assert storage.get("batches/1/requests/2/original.pdf") == b"%PDF-1"
    assert storage.exists("batches/1/requests/2/original.pdf")


def test_recipient_values_are_escaped_and_internals_are_out_of_reach():
    assert render_html("<p>{{ name }}</p>", {"name": "<script>x</script>"}) == "<p>&lt;script&gt;x&lt;/script&gt;</p>"
    with pytest.raises(TemplateError):
        render_html("{{ ''.__class__.__mro__[1].__subclasses__() }}", {})
    assert render_html("{{ config }}", {}) == ""
    assert render_text("Hi {{ name }}", {"name": "O'Brien & Co"}) == "Hi O'Brien & Co"


def test_a_signing_token_is_stable_per_nonce_and_dies_with_a_new_one():
    nonce = new_nonce()
    token = signing_token(secret="s", request_id=7, nonce=nonce)
    assert token == signing_token(secret="s", request_id=7, nonce=nonce)
    assert len(token) >= 43 and hash_token(token) != token
    assert token != signing_token(secret="s", request_id=7, nonce=new_nonce())
    assert token != signing_token(secret="s", request_id=8, nonce=nonce)

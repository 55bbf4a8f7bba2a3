"""/verify: a signed copy checks out, an original is named as such, a changed file is rejected, a bare hash tells little."""

from __future__ import annotations

import hashlib
import io

import pytest

from bulksign.documents.seal_keys import seal_key
from bulksign.documents.sealing import apply_seal
from bulksign.documents.storage import get_storage
from tests.support.sealed import make_pdf, signed_document, signed_request, upload
from tests.support.web import csrf_from


@pytest.fixture
def issued(app, users, run_jobs):
    """A signed request whose sealed copy exists: (request, signed bytes)."""
    r = signed_request(owner=users["staff"], image=False)
    run_jobs("pdf")
    return r, get_storage().get(signed_document(r.id).storage_key)


def by_hash(client, sha256: str):
    form = client.get("/verify")
    return client.post("/verify", data={"csrf_token": csrf_from(form), "sha256": sha256})


def test_a_signed_copy_is_valid_and_names_its_signer(client, issued):
    r, data = issued
    page = upload(client, data)
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and "Valid signed document" in html
    assert "Иван Петров" in html and "Employment contract" in html and "covers the whole file" in html
    assert hashlib.sha256(data).hexdigest() in html


def test_an_original_is_recognised_as_the_unsigned_original(client, issued):
    r, _ = issued
    html = upload(client, r.original).get_data(as_text=True)
    assert "Original document, not signed" in html and "Иван Петров" in html


def test_a_changed_byte_is_rejected(client, issued):
    _, data = issued
    tampered = bytearray(data)
    at = data.index(b"/Producer")
    tampered[at + 12] ^= 0x01
    html = upload(client, bytes(tampered)).get_data(as_text=True)
    assert "Rejected: this file was changed" in html and "Иван Петров" not in html


def test_an_update_appended_after_sealing_is_rejected(client, issued):
    from pyhanko.pdf_utils.generic import NameObject, TextStringObject
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter

    _, data = issued
    writer = IncrementalPdfFileWriter(io.BytesIO(data))
    writer.root[NameObject("/Lang")] = TextStringObject("xx")
    writer.update_root()
    out = io.BytesIO()
    writer.write(out)
    html = upload(client, out.getvalue()).get_data(as_text=True)
    assert "Rejected: this file was changed" in html


def test_a_foreign_pdf_and_garbage_are_not_ours(client, app):
    assert "Not issued by this system" in upload(client, make_pdf()).get_data(as_text=True)
    assert "Not a readable PDF" in upload(client, b"hello, not a pdf").get_data(as_text=True)
    assert "Not a readable PDF" in upload(client, b"%PDF-1.7\n garbage").get_data(as_text=True)


def test_our_intact_seal_on_a_file_we_have_no_record_of_is_reported(client, app):
    sealed = apply_seal(make_pdf(), seal_key(app.config))
    assert "Sealed by us, but not in our records" in upload(client, sealed).get_data(as_text=True)


def test_a_bare_fingerprint_says_whether_it_was_issued_but_not_for_whom(client, issued):
    r, data = issued
    signed = by_hash(client, hashlib.sha256(data).hexdigest().upper()).get_data(as_text=True)
    assert "A signed document with this fingerprint was issued" in signed
    assert "Иван Петров" not in signed and "Employment contract" not in signed
    original = by_hash(client, hashlib.sha256(r.original).hexdigest()).get_data(as_text=True)
    assert "An original (unsigned) document" in original and "Иван Петров" not in original
    assert "Not issued by this system" in by_hash(client, "0" * 64).get_data(as_text=True)


@pytest.mark.parametrize("value", ["abc", "z" * 64, "0" * 63])
def test_a_malformed_fingerprint_is_a_clear_400(client, app, value):
    page = by_hash(client, value)
    assert page.status_code == 400 and "64 characters" in page.get_data(as_text=True)


def test_an_empty_form_asks_for_a_file_or_a_fingerprint(client, app):
    page = by_hash(client, "")
    assert page.status_code == 400 and "Choose a PDF file" in page.get_data(as_text=True)


def test_verify_needs_no_login_and_is_not_cached(client, app):
    page = client.get("/verify")
    assert page.status_code == 200 and page.headers["Cache-Control"] == "no-store"
    assert 'enctype="multipart/form-data"' in page.get_data(as_text=True)


def test_a_post_without_csrf_is_refused(client, app):
    page = client.post("/verify", data={"sha256": "0" * 64})
    assert page.status_code == 400

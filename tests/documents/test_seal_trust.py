"""Trusted time-stamps on seals (PAdES B-T / B-LT) and seal certificates that are replaced without orphaning documents."""

from __future__ import annotations

import io
import subprocess

import pytest
from pypdf import PdfReader

from bulksign.core.extensions import db
from bulksign.documents.seal_keys import SealError, _create_self_signed, seal_key
from bulksign.documents.sealing import apply_seal, check_seal, timestamping
from bulksign.documents.storage import get_storage
from bulksign.models import SealCertificate, User
from tests.support.sealed import make_pdf, signed_document, signed_request, upload
from tests.support.tsa import TimeStampAuthority


@pytest.fixture(scope="module")
def tsa():
    authority = TimeStampAuthority()
    authority.start()
    yield authority
    authority.stop()


@pytest.fixture
def tsa_ca_path(tsa, tmp_path):
    path = tmp_path / "tsa-ca.pem"
    path.write_bytes(tsa.ca_pem)
    return str(path)


def _sealed_copy(owner_id: int, run_jobs) -> bytes:
    request = signed_request(owner=db.session.get(User, owner_id), image=False)
    run_jobs("pdf")
    return get_storage().get(signed_document(request.id).storage_key)


def test_with_a_tsa_every_seal_carries_a_trusted_time_stamp_and_its_validation_data(
    app, users, run_jobs, client, tsa, tsa_ca_path, tmp_path
):
    app.config.update(TSA_URL=tsa.url, TSA_CA_CERT_PATH=tsa_ca_path)
    asked = tsa.requests
    data = _sealed_copy(users["staff"].id, run_jobs)
    assert tsa.requests > asked

    check = check_seal(data, seal_key(app.config), tsa_roots=timestamping(app.config).trust_roots)
    assert check.valid and check.timestamped_at is not None and check.long_term
    # B-LT: the document security store holds the certificates a validator needs years from now.
    assert "/DSS" in PdfReader(io.BytesIO(data)).trailer["/Root"]

    html = upload(client, data).get_data(as_text=True)
    assert "Valid signed document" in html and "trusted time-stamp authority confirms" in html

    # poppler's pdfsig, an independent reader: the seal is valid, and the file is longer than the signed part
    # only by the validation data (so it says "not total document signed" but nothing else is wrong).
    path = tmp_path / "signed.pdf"
    path.write_bytes(data)
    out = subprocess.run(["pdfsig", str(path)], capture_output=True, text=True, timeout=30).stdout
    assert "Signature is Valid" in out and "ETSI.CAdES.detached" in out, out


def test_without_the_tsa_ca_the_seal_is_still_time_stamped(app, tsa):
    app.config.update(TSA_URL=tsa.url)
    sealed = apply_seal(make_pdf(), seal_key(app.config), tsa=timestamping(app.config))
    check = check_seal(sealed, seal_key(app.config))
    # The time-stamp is there and intact, but nobody told us to trust its authority: not shown as trusted.
    assert check.valid and check.timestamped_at is None and not check.long_term
    from pyhanko.pdf_utils.reader import PdfFileReader

    (sig,) = PdfFileReader(io.BytesIO(sealed)).embedded_signatures
    unsigned = [a["type"].native for a in sig.signer_info["unsigned_attrs"]]
    assert "signature_time_stamp_token" in unsigned


def test_an_unreachable_tsa_is_a_clear_seal_error(app):
    from tests.support.services import free_port

    app.config.update(TSA_URL=f"http://127.0.0.1:{free_port()}/tsa", TSA_TIMEOUT_SECONDS=2)
    with pytest.raises(SealError, match="time-stamp authority .* did not answer"):
        apply_seal(make_pdf(), seal_key(app.config), tsa=timestamping(app.config))


def test_documents_sealed_before_the_certificate_was_replaced_still_verify(app, users, run_jobs, client, tmp_path):
    owner_id = users["staff"].id
    old_data = _sealed_copy(owner_id, run_jobs)
    old_fingerprint = seal_key(app.config).fingerprint

    replacement = tmp_path / "new-seal.p12"
    _create_self_signed(replacement)
    app.config["SEAL_PKCS12_PATH"] = str(replacement)
    assert seal_key(app.config).fingerprint != old_fingerprint
    new_data = _sealed_copy(owner_id, run_jobs)

    fingerprints = set(db.session.scalars(db.select(SealCertificate.fingerprint)))
    assert fingerprints == {old_fingerprint, seal_key(app.config).fingerprint}
    for data in (old_data, new_data):
        html = upload(client, data).get_data(as_text=True)
        assert "Valid signed document" in html, html
    assert signed_document_fingerprints() == [old_fingerprint, seal_key(app.config).fingerprint]


def signed_document_fingerprints() -> list[str]:
    from bulksign.models import Document

    db.session.expire_all()
    return list(
        db.session.scalars(db.select(Document.seal_fingerprint).where(Document.kind == "signed").order_by(Document.id))
    )

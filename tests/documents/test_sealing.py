"""The signed record: signature block, audit certificate, PAdES seal (pyHanko and pdfsig), mail, key handling."""

from __future__ import annotations

import hashlib
import io
import subprocess
from datetime import timedelta

import pytest
from pypdf import PdfReader
from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.documents import seal_keys, sealing
from bulksign.documents.seal_keys import SealError, seal_key, seal_status
from bulksign.documents.sealing import check_seal
from bulksign.documents.storage import get_storage
from bulksign.jobs.seal import seal
from bulksign.models import Document, OutgoingMail, SigningRequest, utcnow
from tests.support.clock import NOW
from tests.support.sealed import make_pdf, signed_document, signed_request
from tests.support.signing_requests import make_sent_request
from tests.support.web import csrf_from


def test_the_seal_job_stores_a_signed_pdf_beside_the_original(app, users, run_jobs):
    r = signed_request(owner=users["staff"])
    run_jobs("pdf")
    kinds = sorted(d.kind for d in db.session.scalars(select(Document).where(Document.request_id == r.id)))
    assert kinds == ["original", "signed"]
    doc = signed_document(r.id)
    data = get_storage().get(doc.storage_key)
    assert doc.sha256 == hashlib.sha256(data).hexdigest() and doc.size == len(data)
    assert get_storage().get(f"batches/{r.batch_id}/requests/{r.id}/original.pdf") == r.original
    reader = PdfReader(io.BytesIO(data))
    # The document marks no place for the signature: a signature page, then the audit certificate.
    assert len(reader.pages) == len(PdfReader(io.BytesIO(r.original)).pages) + 2


def test_an_unmarked_document_gets_a_signature_page_and_the_audit_page_every_event(app, users, run_jobs):
    r = signed_request(owner=users["staff"])
    run_jobs("pdf")
    reader = PdfReader(io.BytesIO(get_storage().get(signed_document(r.id).storage_key)))
    assert reader.pages[0].extract_text() == PdfReader(io.BytesIO(r.original)).pages[0].extract_text()
    block = " ".join(reader.pages[-2].extract_text().split())
    for line in (
        "Signature",
        "Document: Employment contract",
        "Signed electronically",
        "Иван Петров",
        "2026-11-02 09:12:00 UTC",
        "IP 203.0.113.5",
    ):
        assert line in block
    assert reader.pages[-2]["/Resources"]["/XObject"], "the drawn signature is on the page"
    audit = " ".join(reader.pages[-1].extract_text().split())
    assert "November contracts" not in audit  # the batch's internal name is not the recipient's business
    for line in (
        "Audit certificate",
        "Employment contract",
        "ivan@example.com",
        "Created",
        "Sent",
        "Email opened",
        "192.0.2.7",
        "MailClient/2",
        "Page opened",
        "Signed",
        "Mozilla/5.0 (iPhone) Safari",
        "203.0.113.5",
        hashlib.sha256(r.original).hexdigest(),
    ):
        assert line in audit, line


def test_the_seal_is_valid_for_pyhanko_and_for_pdfsig(app, users, run_jobs, tmp_path):
    r = signed_request(owner=users["staff"], image=False)
    run_jobs("pdf")
    data = get_storage().get(signed_document(r.id).storage_key)
    check = check_seal(data, seal_key(app.config))
    assert check.intact and check.whole_file and check.ours and check.valid
    path = tmp_path / "signed.pdf"
    path.write_bytes(data)
    out = subprocess.run(["pdfsig", str(path)], capture_output=True, text=True, timeout=30).stdout
    assert "Signature is Valid" in out and "Total document signed" in out and "ETSI.CAdES.detached" in out


def test_sealing_twice_does_nothing_the_second_time(app, users, smtp, run_jobs):
    r = signed_request(owner=users["staff"])
    first = seal(r.id)
    second = seal(r.id)
    assert (first.status, second.status) == ("sealed", "already_sealed") and first.document_id == second.document_id
    assert len(db.session.scalars(select(Document).where(Document.kind == "signed")).all()) == 1
    assert len(db.session.scalars(select(OutgoingMail).where(OutgoingMail.kind == "confirmation")).all()) == 1


def test_a_request_that_is_not_signed_is_not_sealed(app, users):
    r = make_sent_request(now=NOW, owner=users["staff"])
    assert seal(r.id).status == "not_signed"
    assert seal(999_999).status == "not_signed"
    assert signed_document(r.id) is None


def test_the_recipient_gets_the_signed_pdf_by_mail(app, users, smtp, run_jobs):
    r = signed_request(owner=users["staff"], reply_to="hr@example.com")
    run_jobs("pdf")
    run_jobs("mail")
    (mail,) = smtp.to("ivan@example.com")
    # The document's title, never the batch's internal name.
    assert mail.subject == "Signed: Employment contract" and "November contracts" not in mail.text()
    (attachment,) = list(mail.message.iter_attachments())
    assert attachment.get_content_type() == "application/pdf" and attachment.get_filename() == f"signed-{r.id}.pdf"
    assert attachment.get_content() == get_storage().get(signed_document(r.id).storage_key)
    assert r.token not in mail.text()
    assert db.session.scalar(select(OutgoingMail.status).where(OutgoingMail.kind == "confirmation")) == "sent"


def test_the_signed_copy_can_be_downloaded_from_the_link(app, users, client, run_jobs):
    r = make_sent_request(now=utcnow() - timedelta(minutes=5), owner=users["staff"])
    page = client.get(f"/sign/{r.token}")
    client.post(f"/sign/{r.token}/sign", data={"csrf_token": csrf_from(page), "name": "Иван", "consent": "yes"})
    run_jobs("pdf")
    html = client.get(f"/sign/{r.token}").get_data(as_text=True)
    assert f"/sign/{r.token}/signed?download=1" in html
    copy = client.get(f"/sign/{r.token}/signed?download=1")
    assert copy.status_code == 200 and copy.data == get_storage().get(signed_document(r.id).storage_key)


# --- the seal key --------------------------------------------------------------------------------


def test_without_configuration_a_self_signed_seal_is_created_once_and_reported_to_admins(app, users, client, auth):
    auth.login_admin()
    before = client.get("/admin/").get_data(as_text=True)
    assert "self-signed certificate" in before and "created when the first document is sealed" in before
    key = seal_key(app.config)
    assert key.self_signed and seal_key(app.config) is key
    path = seal_keys._self_signed_path(app.config["VAR_DIR"])
    assert path.exists() and (path.stat().st_mode & 0o777) == 0o600
    after = client.get("/admin/").get_data(as_text=True)
    assert key.fingerprint in after and "(self-signed)" in after


def _pkcs12(tmp_path, password: bytes):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ACME Corp document seal")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(utcnow() - timedelta(days=1))
        .not_valid_after(utcnow() + timedelta(days=365))
        .sign(key, hashes.SHA256())
    )
    path = tmp_path / "org.p12"
    path.write_bytes(pkcs12.serialize_key_and_certificates(b"org", key, cert, None, BestAvailableEncryption(password)))
    return str(path)


def test_an_organisation_pkcs12_seals_instead(make_app, tmp_path):
    path = _pkcs12(tmp_path, b"s3cret")
    app = make_app(SEAL_PKCS12_PATH=path, SEAL_PKCS12_PASSWORD="s3cret")
    with app.app_context():
        key = seal_key(app.config)
        assert not key.self_signed and "ACME Corp" in key.subject
        sealed = sealing.apply_seal(make_pdf(), key)
        assert check_seal(sealed, key).valid
        assert not seal_keys._self_signed_path(app.config["VAR_DIR"]).exists()
        status = seal_status(app.config)
        assert status.configured and status.fingerprint == key.fingerprint


def test_a_wrong_pkcs12_password_is_a_clear_error(make_app, tmp_path):
    path = _pkcs12(tmp_path, b"right")
    app = make_app(SEAL_PKCS12_PATH=path, SEAL_PKCS12_PASSWORD="wrong")
    with app.app_context():
        with pytest.raises(SealError, match="wrong password"):
            seal_key(app.config)
        assert "wrong password" in seal_status(app.config).error


def test_the_cached_signer_and_pyhanko_plain_signer_make_equally_valid_seals(app):
    key = seal_key(app.config)
    data = seal_keys._self_signed_path(app.config["VAR_DIR"]).read_bytes()
    plain = seal_keys.load_seal_key(
        pkcs12_bytes=data, password=None, path="x", self_signed=True, cache_key_material=False
    )
    for signer_key in (key, plain):
        assert check_seal(sealing.apply_seal(make_pdf(), signer_key), key).valid


def test_a_lost_or_failed_seal_job_is_queued_again_by_the_safety_net(app, users, run_jobs):
    from bulksign.core.extensions import get_redis
    from bulksign.jobs.seal import seal_missing
    from bulksign.work.queues import get_queue

    r = signed_request(owner=users["staff"])
    get_queue("pdf").empty()
    get_redis().flushdb()  # Redis lost the job
    signed_at = db.session.get(SigningRequest, r.id).signed_at
    app.config.update(RETRY_BACKOFF_SECONDS=0, SEAL_MAX_ATTEMPTS=1)
    assert seal_missing(now=signed_at + timedelta(minutes=1)) == 0, "within the grace period nothing happens"
    assert seal_missing(now=signed_at + timedelta(minutes=10)) == 1
    storage = get_storage()
    original = storage.get(f"batches/{r.batch_id}/requests/{r.id}/original.pdf")
    storage.delete(f"batches/{r.batch_id}/requests/{r.id}/original.pdf")
    run_jobs("pdf")  # fails twice (one retry): the original is missing; the job stays failed in Redis
    assert signed_document(r.id) is None
    storage.put(f"batches/{r.batch_id}/requests/{r.id}/original.pdf", original)
    assert seal_missing(now=signed_at + timedelta(minutes=10)) == 1, "the failed job is replaced"
    run_jobs("pdf")
    assert signed_document(r.id) is not None
    assert seal_missing(now=signed_at + timedelta(minutes=20)) == 0


def test_a_russian_batch_seals_a_russian_record_in_its_time_zone_and_mails_in_russian(app, users, run_jobs, smtp):
    from sqlalchemy import update

    from bulksign.models import Batch

    r = signed_request(owner=users["staff"], language="ru")
    db.session.execute(update(Batch).where(Batch.id == r.batch_id).values(timezone="Europe/Moscow"))
    db.session.commit()
    run_jobs("pdf")
    reader = PdfReader(io.BytesIO(get_storage().get(signed_document(r.id).storage_key)))
    block = " ".join(reader.pages[-2].extract_text().split())
    # Signed at 09:12 UTC: 12:12 in Moscow.
    assert "Подписано электронно" in block and "2026-11-02 12:12:00 UTC+03:00" in block
    audit = " ".join(reader.pages[-1].extract_text().split())
    assert "Сертификат аудита" in audit and "Время (Europe/Moscow)" in audit and "Audit certificate" not in audit
    run_jobs("mail")
    (mail,) = smtp.to("ivan@example.com")
    assert mail.subject == "Подписано: Employment contract" and "2 ноября 2026, 12:12 (Europe/Moscow)" in mail.text()

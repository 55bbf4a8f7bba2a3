"""DKIM: with a key configured, every mail that reaches the SMTP server verifies against the published record."""

from __future__ import annotations

import re
from unittest import mock

import dkim
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from bulksign.core.config import ConfigError
from bulksign.core.extensions import db
from bulksign.mail.dkim_signing import SIGNED_HEADERS, DkimKey, generate_key, key_from_settings, sign
from bulksign.people.users import create_user
from bulksign.work.pipeline import enqueue_renders
from tests.support.batches import make_batch, request_ids, run_worker
from tests.support.clock import NOW


def _dns_answering(record_name: str, record_value: str):
    """A resolver for dkimpy that knows one TXT record, as the organisation's DNS would publish it."""

    def lookup(name: bytes, timeout: int = 5) -> bytes | None:
        return record_value.encode() if name.decode().rstrip(".") == record_name else None

    return lookup


@pytest.fixture(scope="module")
def published_key():
    return generate_key(domain="Example.org", selector="mail2026")


def test_every_invitation_verifies_against_the_published_record(make_app, smtp, published_key):
    app = make_app(
        DKIM_DOMAIN="example.org", DKIM_SELECTOR="mail2026", DKIM_PRIVATE_KEY=published_key.private_pem.decode()
    )
    with app.app_context():
        user = create_user(db.session, email="owner@example.com", password="owner-password", role="staff", now=NOW)
        db.session.commit()
        batch = make_batch(
            user=user, now=NOW, recipients=[("anna@example.com", "Анна Иванова"), ("bob@example.com", "Bob")]
        )
        enqueue_renders(request_ids(batch))
        run_worker(app, "pdf")
        run_worker(app, "mail")

    assert len(smtp.of_kind("invitation")) == 2  # and the owner's completion notice, signed as well
    dns = _dns_answering(published_key.record_name, published_key.record_value)
    for received in smtp.received:
        raw = received.message.as_bytes()
        assert b"d=example.org" in raw and b"s=mail2026" in raw
        assert dkim.verify(raw, dnsfunc=dns), received.subject
        # A receiver rejects a mail whose signed text was changed on the way.
        forged = raw.replace(b"Subject: ", b"Subject: URGENT ", 1)
        assert not dkim.verify(forged, dnsfunc=dns)


def test_without_dkim_settings_mails_go_out_unsigned(app, smtp):
    user = create_user(db.session, email="owner@example.com", password="owner-password", role="staff", now=NOW)
    db.session.commit()
    batch = make_batch(user=user, now=NOW, recipients=1)
    enqueue_renders(request_ids(batch))
    run_worker(app, "pdf")
    run_worker(app, "mail")
    (received,) = smtp.of_kind("invitation")
    assert received.message["DKIM-Signature"] is None


@pytest.mark.parametrize(
    "settings, named",
    [
        ({"DKIM_DOMAIN": "example.org", "DKIM_PRIVATE_KEY": "x"}, "DKIM_SELECTOR"),
        ({"DKIM_DOMAIN": "example.org", "DKIM_SELECTOR": "s"}, "DKIM_PRIVATE_KEY"),
        (
            {"DKIM_DOMAIN": "example.org", "DKIM_SELECTOR": "s", "DKIM_PRIVATE_KEY_PATH": "/nonexistent/key.pem"},
            "DKIM_PRIVATE_KEY_PATH",
        ),
        ({"DKIM_DOMAIN": "example.org", "DKIM_SELECTOR": "s", "DKIM_PRIVATE_KEY": "not a key"}, "PEM"),
        (
            {
                "DKIM_DOMAIN": "example.org",
                "DKIM_SELECTOR": "s",
                "DKIM_PRIVATE_KEY": ec.generate_private_key(ec.SECP256R1())
                .private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
                )
                .decode(),
            },
            "not a usable RSA key",
        ),
    ],
)
def test_incomplete_or_broken_dkim_settings_stop_the_start_with_the_variable_named(make_app, settings, named):
    with pytest.raises(ConfigError, match=named):
        make_app(**settings)


def test_keygen_writes_a_private_key_and_prints_the_record_that_verifies_its_mail(app, tmp_path, smtp):
    key_path = tmp_path / "dkim.pem"
    result = app.test_cli_runner().invoke(
        args=["mail", "dkim-keygen", "--domain", "Example.org", "--selector", "s1", "--out", str(key_path)]
    )
    assert result.exit_code == 0, result.output
    zone_line = result.stdout.strip()
    assert zone_line.startswith("s1._domainkey.example.org. IN TXT (")
    assert key_path.stat().st_mode & 0o777 == 0o600
    # The value, joined from its 255-character strings, is what a resolver hands back.
    value = "".join(re.findall(r'"([^"]*)"', zone_line))
    assert value.startswith("v=DKIM1; k=rsa; p=")

    key = key_from_settings(domain="example.org", selector="s1", private_key="", private_key_path=str(key_path))
    message = b"From: hr@example.org\r\nTo: anna@example.com\r\nSubject: Contract\r\n\r\nPlease sign.\r\n"
    assert dkim.verify(sign(message, key=key), dnsfunc=_dns_answering("s1._domainkey.example.org", value))

    again = app.test_cli_runner().invoke(
        args=["mail", "dkim-keygen", "--domain", "example.org", "--selector", "s1", "--out", str(key_path)]
    )
    assert again.exit_code == 1 and "exists already" in again.stderr


def test_the_signature_header_is_the_one_dkimpy_writes_byte_for_byte(published_key):
    """The RSA step is OpenSSL's (dkimpy's pure-Python one cost 7 ms a mail); the header must not change:
    folded headers, a non-ASCII name, trailing spaces and blank lines at the end of the body included."""
    key = DkimKey(domain="example.org", selector="mail2026", private_pem=published_key.private_pem)
    message = (
        "From: Анна Иванова <hr@example.org>\r\nTo: anna@example.com\r\n"
        "Subject: Contract for signature, a subject long enough\r\n  to be folded by the sender\r\n"
        "Date: Fri, 04 Dec 2026 08:00:00 +0000\r\nMessage-ID: <m1@example.org>\r\nMIME-Version: 1.0\r\n"
        "Content-Type: text/plain; charset=utf-8\r\nX-Mailer:  spaced   value \r\n\r\n"
        "Please  sign. \r\n\r\n\r\n"
    ).encode()
    with mock.patch("time.time", return_value=NOW.timestamp()):
        ours = sign(message, key=key)
        dkimpy = dkim.sign(
            message,
            b"mail2026",
            b"example.org",
            published_key.private_pem,
            canonicalize=(b"relaxed", b"relaxed"),
            include_headers=list(SIGNED_HEADERS),
        )
    assert ours == dkimpy + message
    assert dkim.verify(ours, dnsfunc=_dns_answering(published_key.record_name, published_key.record_value))

"""A real RFC 3161 time-stamp authority over HTTP on loopback, for sealing tests (pyHanko's test TSA signs)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from asn1crypto import keys as asn1_keys
from asn1crypto import tsp
from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from pyhanko.sign.timestamps.dummy_client import DummyTimeStamper


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Test Trust Services"),
        ]
    )


class TimeStampAuthority:
    """A CA, a TSA certificate it issued, and an HTTP server answering time-stamp queries."""

    def __init__(self):
        now = datetime.now(UTC)
        ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ca_cert = (
            x509.CertificateBuilder()
            .subject_name(_name("Test Root CA"))
            .issuer_name(_name("Test Root CA"))
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1))
            .not_valid_after(now + timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(ca_key, hashes.SHA256())
        )
        tsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        tsa_cert = (
            x509.CertificateBuilder()
            .subject_name(_name("Test TSA"))
            .issuer_name(self.ca_cert.subject)
            .public_key(tsa_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1))
            .not_valid_after(now + timedelta(days=365))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        der = serialization.Encoding.DER
        self.stamper = DummyTimeStamper(
            tsa_cert=asn1_x509.Certificate.load(tsa_cert.public_bytes(der)),
            tsa_key=asn1_keys.PrivateKeyInfo.load(
                tsa_key.private_bytes(der, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
            ),
            certs_to_embed=[asn1_x509.Certificate.load(self.ca_cert.public_bytes(der))],
        )
        self.requests = 0
        self.server: ThreadingHTTPServer | None = None

    @property
    def ca_pem(self) -> bytes:
        return self.ca_cert.public_bytes(serialization.Encoding.PEM)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/tsa"

    def start(self) -> None:
        authority = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                authority.requests += 1
                reply = authority.stamper.request_tsa_response(tsp.TimeStampReq.load(body)).dump()
                self.send_response(200)
                self.send_header("Content-Type", "application/timestamp-reply")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

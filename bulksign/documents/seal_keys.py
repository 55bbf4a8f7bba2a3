"""The organisation's seal key: loaded once per process, self-signed when none is configured, and remembered.
More in docs/architecture/documents.md."""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.core.errors import BulksignError
from bulksign.core.logs import log
from bulksign.models import SealCertificate

if TYPE_CHECKING:
    from asn1crypto import x509

logger = logging.getLogger(__name__)

SELF_SIGNED_NAME = "seal-self-signed.p12"


class SealError(BulksignError):
    """The seal key cannot be loaded or the document cannot be sealed; ``message`` is for people."""

    status = 500


@dataclass(frozen=True)
class SealKey:
    """A loaded seal: the pyHanko signer plus what the admin and /verify pages show about it."""

    signer: object
    #: sha256 hex of the certificate (DER): how /verify recognises our seal.
    fingerprint: str
    subject: str
    not_after: datetime
    self_signed: bool
    path: str
    #: The certificate as asn1crypto object, the trust root for validation.
    certificate: x509.Certificate


@dataclass(frozen=True)
class SealStatus:
    """What the admin page says about the seal certificate."""

    configured: bool
    exists: bool
    path: str
    subject: str = ""
    fingerprint: str = ""
    not_after: datetime | None = None
    error: str = ""


_cache: dict[tuple, SealKey] = {}
_cache_lock = threading.Lock()


def _signer_class():
    """A SimpleSigner that signs with a key parsed once, instead of once per raw signature."""
    from cryptography.hazmat.primitives.asymmetric.ec import ECDSA, EllipticCurvePrivateKey
    from cryptography.hazmat.primitives.asymmetric.padding import PKCS1v15
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
    from pyhanko.sign.signers import SimpleSigner
    from pyhanko_certvalidator.util import get_pyca_cryptography_hash

    class CachedKeySigner(SimpleSigner):
        def __init__(self, *, private_key, **kwargs):
            super().__init__(**kwargs)
            self._private_key = private_key

        def sign_raw(self, data: bytes, digest_algorithm: str) -> bytes:
            mechanism = self.get_signature_mechanism_for_digest(digest_algorithm).signature_algo
            hash_algo = get_pyca_cryptography_hash(digest_algorithm)
            key = self._private_key
            if mechanism == "rsassa_pkcs1v15" and isinstance(key, RSAPrivateKey):
                return key.sign(data, PKCS1v15(), hash_algo)
            if mechanism == "ecdsa" and isinstance(key, EllipticCurvePrivateKey):
                return key.sign(data, ECDSA(hash_algo))
            return super().sign_raw(data, digest_algorithm)

    return CachedKeySigner


def load_seal_key(
    *, pkcs12_bytes: bytes, password: bytes | None, path: str, self_signed: bool, cache_key_material: bool = True
) -> SealKey:
    """Parse a PKCS#12 into a signer (``cache_key_material=False``: pyHanko's plain SimpleSigner, for the bench)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    from pyhanko.keys.internal import translate_pyca_cryptography_cert_to_asn1, translate_pyca_cryptography_key_to_asn1
    from pyhanko.sign.signers import SimpleSigner
    from pyhanko_certvalidator.registry import SimpleCertificateStore

    try:
        private_key, cert, others = pkcs12.load_key_and_certificates(pkcs12_bytes, password)
    except Exception as exc:
        raise SealError(
            f"The seal certificate {path} could not be opened (wrong password or not a PKCS#12 file)."
        ) from exc
    if private_key is None or cert is None:
        raise SealError(f"The seal file {path} holds no private key and certificate.")
    registry = SimpleCertificateStore()
    registry.register_multiple({translate_pyca_cryptography_cert_to_asn1(c) for c in others or []})
    kwargs = dict(
        signing_cert=translate_pyca_cryptography_cert_to_asn1(cert),
        signing_key=translate_pyca_cryptography_key_to_asn1(private_key),
        cert_registry=registry,
    )
    signer = _signer_class()(private_key=private_key, **kwargs) if cache_key_material else SimpleSigner(**kwargs)
    der = cert.public_bytes(serialization.Encoding.DER)
    return SealKey(
        signer=signer,
        fingerprint=hashlib.sha256(der).hexdigest(),
        subject=cert.subject.rfc4514_string(),
        not_after=cert.not_valid_after_utc,
        self_signed=self_signed,
        path=path,
        certificate=kwargs["signing_cert"],
    )


def _self_signed_path(var_dir: str) -> Path:
    return Path(var_dir) / "seal" / SELF_SIGNED_NAME


def _create_self_signed(path: Path) -> None:
    """Write a new self-signed seal certificate; when two processes race, the first file wins."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import NoEncryption, pkcs12
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, "Bulksign document seal (self-signed)"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Bulksign"),
        ]
    )
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=True,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    # The file holds the key unencrypted; it is protected by its mode, like the embedded secret key.
    data = pkcs12.serialize_key_and_certificates(b"bulksign-seal", key, cert, None, NoEncryption())
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-seal-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o600)
        try:
            os.link(tmp, path)  # fails if another process created it first: theirs is kept
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)
    log(
        logger,
        logging.WARNING,
        "created a self-signed seal certificate; configure SEAL_PKCS12_PATH for production",
        path=str(path),
    )


def seal_key(config) -> SealKey:
    """The process's seal key from the app config: loaded once, created (self-signed) when none is configured."""
    configured = config.get("SEAL_PKCS12_PATH")
    path = Path(configured) if configured else _self_signed_path(config["VAR_DIR"])
    password = config.get("SEAL_PKCS12_PASSWORD")
    cache_id = (str(path), password)
    key = _cache.get(cache_id)
    if key is not None:
        return key
    with _cache_lock:
        key = _cache.get(cache_id)
        if key is None:
            if not configured and not path.exists():
                _create_self_signed(path)
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise SealError(f"The seal certificate {path} cannot be read ({exc.strerror or exc}).") from exc
            key = load_seal_key(
                pkcs12_bytes=data,
                password=password.encode() if password else None,
                path=str(path),
                self_signed=not configured,
            )
            _cache[cache_id] = key
    return key


def seal_status(config) -> SealStatus:
    """For the admin page: which certificate seals documents (without creating one)."""
    configured = bool(config.get("SEAL_PKCS12_PATH"))
    path = config.get("SEAL_PKCS12_PATH") or str(_self_signed_path(config["VAR_DIR"]))
    if not Path(path).exists():
        return SealStatus(
            configured=configured,
            exists=False,
            path=path,
            error="The configured file does not exist." if configured else "",
        )
    try:
        key = seal_key(config)
    except SealError as exc:
        return SealStatus(configured=configured, exists=True, path=path, error=str(exc))
    return SealStatus(
        configured=configured,
        exists=True,
        path=path,
        subject=key.subject,
        fingerprint=key.fingerprint,
        not_after=key.not_after,
    )


def remember_certificate(session: Session, key: SealKey, *, now: datetime) -> None:
    """Keep the seal's certificate, so /verify recognises its documents after the certificate is replaced."""
    # One primary-key read per seal (a seal costs ~30 ms); a per-process memo would miss a restored database.
    if session.get(SealCertificate, key.fingerprint) is None:
        with session.begin_nested():  # two workers sealing at once with a new certificate: the first row stays
            session.add(
                SealCertificate(
                    fingerprint=key.fingerprint,
                    subject=key.subject[:500],
                    der=key.certificate.dump(),
                    not_after=key.not_after,
                    first_used_at=now,
                )
            )


def past_certificates(session: Session, *, current: SealKey) -> list:
    """The certificates that sealed documents here before ``current`` (asn1crypto objects)."""
    from asn1crypto import x509

    return [
        x509.Certificate.load(der)
        for der in session.scalars(
            select(SealCertificate.der).where(SealCertificate.fingerprint != current.fingerprint)
        )
    ]

"""The signed record: original pages + signature block + audit certificate, sealed with PAdES.

B-B by default; with ``TSA_URL`` every seal carries an RFC 3161 time-stamp (B-T), and with the
TSA's CA (``TSA_CA_CERT_PATH``) the validation data too (B-LT), so the seal can be checked long
after the certificates expire.

The organisation's key (``SEAL_PKCS12_PATH``) is loaded once per process: pyHanko's
``SimpleSigner`` parses the private key again for every raw signature (twice per seal),
which costs ~105 ms per seal with RSA-2048 instead of ~30 ms (field notes). When no PKCS#12
is configured, a self-signed seal certificate is created under ``VAR_DIR/seal/`` on first use.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from contextlib import nullcontext
from io import BytesIO
from pathlib import Path
from zoneinfo import ZoneInfo
from xml.sax.saxutils import escape

from sqlalchemy import select
from sqlalchemy.orm import Session

from .localtime import zone_of
from .logs import log
from .mailer import builder
from .messages import N_
from .models import Batch, Document, Event, SealCertificate, SigningRequest
from .signature_box import SignatureBox
from .states import Status

logger = logging.getLogger(__name__)

FONT_PATH = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
FONT_BOLD_PATH = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"
SEAL_FIELD = "BulksignSeal"
SELF_SIGNED_NAME = "seal-self-signed.p12"


class SealError(RuntimeError):
    """The seal key cannot be loaded or the document cannot be sealed; ``message`` is for people."""


# ---------------------------------------------------------------------------------------------
# The seal key, cached per process
# ---------------------------------------------------------------------------------------------

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
    certificate: object


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


def load_seal_key(*, pkcs12_bytes: bytes, password: bytes | None, path: str, self_signed: bool,
                  cache_key_material: bool = True) -> SealKey:
    """Parse a PKCS#12 into a signer (``cache_key_material=False``: pyHanko's plain SimpleSigner, for the bench)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    from pyhanko.keys.internal import translate_pyca_cryptography_cert_to_asn1, translate_pyca_cryptography_key_to_asn1
    from pyhanko.sign.signers import SimpleSigner
    from pyhanko_certvalidator.registry import SimpleCertificateStore

    try:
        private_key, cert, others = pkcs12.load_key_and_certificates(pkcs12_bytes, password)
    except Exception as exc:
        raise SealError(f"The seal certificate {path} could not be opened (wrong password or not a PKCS#12 file).") from exc
    if private_key is None or cert is None:
        raise SealError(f"The seal file {path} holds no private key and certificate.")
    registry = SimpleCertificateStore()
    registry.register_multiple({translate_pyca_cryptography_cert_to_asn1(c) for c in others or []})
    kwargs = dict(signing_cert=translate_pyca_cryptography_cert_to_asn1(cert),
                  signing_key=translate_pyca_cryptography_key_to_asn1(private_key), cert_registry=registry)
    signer = _signer_class()(private_key=private_key, **kwargs) if cache_key_material else SimpleSigner(**kwargs)
    der = cert.public_bytes(serialization.Encoding.DER)
    return SealKey(signer=signer, fingerprint=hashlib.sha256(der).hexdigest(), subject=cert.subject.rfc4514_string(),
                   not_after=cert.not_valid_after_utc, self_signed=self_signed, path=path,
                   certificate=kwargs["signing_cert"])


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
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Bulksign document seal (self-signed)"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Bulksign")])
    now = datetime.now(timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=True, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
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
    log(logger, logging.WARNING, "created a self-signed seal certificate; configure SEAL_PKCS12_PATH for production",
        path=str(path))


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
            key = load_seal_key(pkcs12_bytes=data, password=password.encode() if password else None,
                                path=str(path), self_signed=not configured)
            _cache[cache_id] = key
    return key


def seal_status(config) -> SealStatus:
    """For the admin page: which certificate seals documents (without creating one)."""
    configured = bool(config.get("SEAL_PKCS12_PATH"))
    path = config.get("SEAL_PKCS12_PATH") or str(_self_signed_path(config["VAR_DIR"]))
    if not Path(path).exists():
        return SealStatus(configured=configured, exists=False, path=path,
                          error="The configured file does not exist." if configured else "")
    try:
        key = seal_key(config)
    except SealError as exc:
        return SealStatus(configured=configured, exists=True, path=path, error=str(exc))
    return SealStatus(configured=configured, exists=True, path=path, subject=key.subject,
                      fingerprint=key.fingerprint, not_after=key.not_after)


# ---------------------------------------------------------------------------------------------
# Building the signed PDF
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AuditLine:
    at: datetime
    #: Translated when printed (``N_``), or an unknown event type as it is.
    label: N_ | str
    ip: str
    user_agent: str


@dataclass(frozen=True)
class AuditRecord:
    """Everything the signature block and the audit certificate print (never the batch's internal name)."""

    document_name: str
    batch_id: int
    request_id: int
    recipient_name: str
    recipient_email: str
    signer_name: str
    signer_ip: str
    signed_at: datetime
    original_sha256: str
    lines: tuple[AuditLine, ...]
    #: The recipient's language and time zone (the batch's): the record speaks to them.
    language: str = "en"
    timezone: str = "UTC"
    #: How the signer proved who they are beyond the link (a confirmed one-time code); None: only the link.
    identity: N_ | None = None


#: Event type → label on the audit certificate; other types print as they are.
EVENT_LABELS = {
    "request.created": N_("Created"),
    "status.generating": N_("Document generation started"),
    "status.generated": N_("Document generated"),
    "status.sending": N_("Invitation being sent"),
    "status.sent": N_("Sent"),
    "email.opened": N_("Email opened"),
    "status.opened": N_("Page opened"),
    "page.opened": N_("Page opened again"),
    "status.signed": N_("Signed"),
    "link.issued": N_("Signing link issued"),
    # One-time codes (``one_time_codes``): ``%(…)s`` are filled from the event's details.
    "code.sent.email": N_("One-time code sent by email to %(to)s"),
    "code.sent.sms": N_("One-time code sent by SMS to %(to)s"),
    "code.failed": N_("Wrong one-time code (%(tries_left)s tries left)"),
    "code.verified": N_("One-time code confirmed"),
    "code.locked": N_("One-time code locked: too many wrong tries"),
}


def _label(event: Event) -> N_ | str:
    """The event's line on the certificate; a one-time code's lines say where it went and the tries left."""
    details = event.details or {}
    if not event.type.startswith("code."):
        return EVENT_LABELS.get(event.type, event.type)
    label = EVENT_LABELS.get(f"code.sent.{details.get('channel')}" if event.type == "code.sent" else event.type)
    return N_(label.msgid, **details) if label is not None else event.type


def _register_fonts() -> None:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    if "DejaVuSans" not in pdfmetrics.getRegisteredFontNames():
        pdfmetrics.registerFont(TTFont("DejaVuSans", FONT_PATH))
        pdfmetrics.registerFont(TTFont("DejaVuSans-Bold", FONT_BOLD_PATH))


def _local(at: datetime, zone: str, *, short: bool = False) -> str:
    """A moment in the recipient's time zone, with its UTC offset so that it is exact anywhere
    (``short``: the offset without the zone's name, for the narrow signature block)."""
    local = at.astimezone(ZoneInfo(zone))
    if zone == "UTC":
        return f"{local:%Y-%m-%d %H:%M:%S} UTC"
    offset = local.strftime("%z")
    offset = f"UTC{offset[:3]}:{offset[3:]}"
    return f"{local:%Y-%m-%d %H:%M:%S} {offset}" if short else f"{local:%Y-%m-%d %H:%M:%S} {zone} ({offset})"


def _in_language(language: str):
    """The record's language while it is drawn (outside an app, e.g. a bench, English)."""
    from flask import has_app_context
    from flask_babel import force_locale

    return force_locale(language) if has_app_context() else nullcontext()


def _fit(text: str, font: str, size: float, width: float) -> str:
    from reportlab.pdfbase.pdfmetrics import stringWidth

    if stringWidth(text, font, size) <= width:
        return text
    while text and stringWidth(text + "…", font, size) > width:
        text = text[:-1]
    return text + "…"


def _draw_block(c, *, x: float, y: float, w: float, h: float, signer_name: str, signed_at: datetime,
                signer_ip: str, image_png: bytes | None, zone: str) -> None:
    """The drawn signature and its four lines, laid out inside the box (x, y, w, h) whatever its shape."""
    from reportlab.lib.units import mm
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfbase.pdfmetrics import stringWidth

    pad = min(2 * mm, h * 0.08, w * 0.04)
    x, y, w, h = x + pad, y + pad, w - 2 * pad, h - 2 * pad
    text_x, text_w, text_h = x, w, h
    if image_png:
        image = ImageReader(BytesIO(image_png))
        if w >= 2.2 * h:  # wide: the drawing on the left, the lines beside it
            img_w = min(w * 0.38, h * 2.5)
            c.drawImage(image, x, y, img_w, h, preserveAspectRatio=True, anchor="c", mask="auto")
            text_x, text_w = x + img_w + pad, w - img_w - pad
        else:  # tall or square: the drawing above, the lines below
            text_h = h * 0.5
            c.drawImage(image, x, y + text_h, w, h - text_h, preserveAspectRatio=True, anchor="c", mask="auto")
    rows = [("DejaVuSans-Bold", str(N_("Signed electronically"))), ("DejaVuSans", signer_name),
            ("DejaVuSans", _local(signed_at, zone, short=True)), ("DejaVuSans", str(N_("IP %(ip)s", ip=signer_ip)))]
    # As large as the box allows up to 8 pt; below 4.5 pt a long name is cut (…) rather than made unreadable.
    widest = max(stringWidth(text, font, 1) for font, text in rows[:1] + rows[2:]) or 1
    size = max(4.5, min(8.0, text_h / (len(rows) * 1.3), text_w / widest))
    leading = size * 1.3
    top = y + text_h - (text_h - leading * len(rows)) / 2  # the lines centred in their part of the box
    c.setFillColorRGB(0.1, 0.14, 0.19)
    for i, (font, text) in enumerate(rows):
        c.setFont(font, size)
        c.drawString(text_x, top - size - i * leading, _fit(text, font, size, text_w))


def signature_stamp(*, width: float, height: float, box: SignatureBox, signer_name: str, signed_at: datetime,
                    signer_ip: str, image_png: bytes | None, zone: str = "UTC") -> bytes:
    """A one-page overlay the size of the target page with the block inside ``box`` (user-space points)."""
    from reportlab.pdfgen import canvas

    _register_fonts()
    buf = BytesIO()
    c = canvas.Canvas(buf, pagesize=(width, height))
    # The document draws the box's frame (``{{ signature }}``) or staff chose a bare place: no frame of ours.
    _draw_block(c, x=box.x, y=box.y, w=box.w, h=box.h, signer_name=signer_name, signed_at=signed_at,
                signer_ip=signer_ip, image_png=image_png, zone=zone)
    c.showPage()
    c.save()
    return buf.getvalue()


def signature_page(record: AuditRecord, *, width: float, height: float, image_png: bytes | None) -> bytes:
    """The page appended when the document marks no place for the signature: nothing of it is covered."""
    from reportlab.lib.units import mm
    from reportlab.pdfgen import canvas

    _register_fonts()
    buf = BytesIO()
    c = canvas.Canvas(buf, pagesize=(width, height))
    left, top = 20 * mm, height - 20 * mm
    c.setFillColorRGB(0.1, 0.14, 0.19)
    c.setFont("DejaVuSans-Bold", 15)
    c.drawString(left, top - 15, str(N_("Signature")))
    c.setFont("DejaVuSans", 9)
    c.drawString(left, top - 32, _fit(str(N_("Document: %(name)s", name=record.document_name)), "DejaVuSans", 9,
                                      width - 2 * left))
    box_w, box_h = min(95 * mm, width - 2 * left), 30 * mm
    box_y = top - 44 - box_h
    c.setStrokeColorRGB(0.14, 0.34, 0.85)
    c.setLineWidth(0.6)
    c.roundRect(left, box_y, box_w, box_h, 2 * mm)
    _draw_block(c, x=left, y=box_y, w=box_w, h=box_h, signer_name=record.signer_name, signed_at=record.signed_at,
                signer_ip=record.signer_ip, image_png=image_png, zone=record.timezone)
    c.showPage()
    c.save()
    return buf.getvalue()


def audit_certificate(record: AuditRecord) -> bytes:
    """The appended audit certificate page(s): the facts of the document and every event of its request."""
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.lib.units import mm
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

    _register_fonts()
    body = ParagraphStyle("body", fontName="DejaVuSans", fontSize=8.5, leading=11)
    small = ParagraphStyle("small", parent=body, fontSize=7, leading=9)
    title = ParagraphStyle("title", parent=body, fontName="DejaVuSans-Bold", fontSize=15, leading=19)
    heading = ParagraphStyle("heading", parent=body, fontName="DejaVuSans-Bold", fontSize=10.5, leading=14)

    def p(text, style=body):
        # Names and user agents come from people: Paragraph reads markup, so escape everything.
        return Paragraph(escape(str(text)), style)

    zone = record.timezone
    facts = [
        (N_("Document"), record.document_name),
        (N_("Reference"), f"#{record.batch_id}-{record.request_id}"),
        (N_("Recipient"), f"{record.recipient_name} <{record.recipient_email}>"),
        (N_("Signed by"), record.signer_name),
        (N_("Signed at"), _local(record.signed_at, zone)),
        (N_("Signer IP"), record.signer_ip),
        *([(N_("Identity check"), record.identity)] if record.identity else []),
        (N_("Original sha256"), record.original_sha256),
    ]
    fact_table = Table([[p(k), p(v)] for k, v in facts], colWidths=[38 * mm, 132 * mm])
    event_rows = [[p(N_("Time (%(zone)s)", zone=zone), small), p(N_("Event"), small), p(N_("IP"), small),
                   p(N_("User agent"), small)]]
    event_rows += [[p(_local(line.at, zone), small), p(line.label, small), p(line.ip or "—", small),
                    p(line.user_agent or "—", small)] for line in record.lines]
    event_table = Table(event_rows, colWidths=[44 * mm, 33 * mm, 26 * mm, 67 * mm], repeatRows=1)
    grid = TableStyle([("GRID", (0, 0), (-1, -1), 0.3, colors.HexColor("#c9ced8")),
                       ("VALIGN", (0, 0), (-1, -1), "TOP"),
                       ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#eef0f4"))])
    fact_table.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.3, colors.HexColor("#c9ced8")),
                                    ("VALIGN", (0, 0), (-1, -1), "TOP")]))
    event_table.setStyle(grid)
    story = [
        p(N_("Audit certificate"), title), Spacer(1, 3 * mm),
        p(N_("This page records how the document above was signed electronically. The whole file is sealed "
             "with a PAdES signature; any change after sealing breaks the seal.")),
        Spacer(1, 4 * mm), fact_table, Spacer(1, 6 * mm), p(N_("Events"), heading), Spacer(1, 2 * mm), event_table,
    ]
    buf = BytesIO()
    SimpleDocTemplate(buf, pagesize=A4, leftMargin=20 * mm, rightMargin=20 * mm, topMargin=18 * mm,
                      bottomMargin=18 * mm, title=str(N_("Audit certificate")), author="Bulksign").build(story)
    return buf.getvalue()


def build_signed_pdf(original: bytes, record: AuditRecord, *, image_png: bytes | None,
                     box: SignatureBox | None = None) -> bytes:
    """Original pages with the signature block in ``box`` (or on an appended signature page), then the audit certificate.

    Both speak the recipient's language and give times in the batch's time zone.
    """
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(BytesIO(original)))
    with _in_language(record.language):
        if box is not None and 0 <= box.page < len(writer.pages):
            page = writer.pages[box.page]
            stamp = signature_stamp(width=float(page.mediabox.right), height=float(page.mediabox.top), box=box,
                                    signer_name=record.signer_name, signed_at=record.signed_at,
                                    signer_ip=record.signer_ip, image_png=image_png, zone=record.timezone)
            page.merge_page(PdfReader(BytesIO(stamp)).pages[0])
        else:
            last = writer.pages[-1].mediabox
            writer.add_page(PdfReader(BytesIO(signature_page(record, width=float(last.width),
                                                             height=float(last.height), image_png=image_png))).pages[0])
        certificate = audit_certificate(record)
    for page in PdfReader(BytesIO(certificate)).pages:
        writer.add_page(page)
    writer.add_metadata({"/Producer": "Bulksign"})
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def _outside_event_loop(func, *args, **kwargs):
    """Call one of pyHanko's sync functions: they use asyncio.run(), which fails inside a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return func(*args, **kwargs)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(func, *args, **kwargs).result()


@dataclass(frozen=True)
class TimeStamping:
    """Where seals get their RFC 3161 time-stamp, and which roots vouch for the authority."""

    url: str
    auth: tuple[str, str] | None
    timeout_seconds: int
    #: The TSA's CA certificates (asn1crypto): with them the seal embeds its validation data (B-LT).
    trust_roots: tuple = ()


def timestamping(config) -> TimeStamping | None:
    """The time-stamping settings (``TSA_URL`` …), or None when seals carry no time-stamp."""
    url = config.get("TSA_URL") or ""
    if not url:
        return None
    roots: tuple = ()
    if config.get("TSA_CA_CERT_PATH"):
        from asn1crypto import pem, x509

        try:
            raw = Path(config["TSA_CA_CERT_PATH"]).read_bytes()
        except OSError as exc:
            raise SealError(f"TSA_CA_CERT_PATH cannot be read ({exc.strerror}).") from exc
        roots = tuple(x509.Certificate.load(der) for _, _, der in pem.unarmor(raw, multiple=True)) \
            if pem.detect(raw) else (x509.Certificate.load(raw),)
    username = config.get("TSA_USERNAME") or ""
    return TimeStamping(url=url, auth=(username, config.get("TSA_PASSWORD") or "") if username else None,
                        timeout_seconds=int(config.get("TSA_TIMEOUT_SECONDS") or 10), trust_roots=roots)


def apply_seal(pdf: bytes, key: SealKey, *, tsa: TimeStamping | None = None) -> bytes:
    """Seal the whole file with a PAdES signature (an invisible field): B-B, or B-T/B-LT with a time-stamp."""
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
    from pyhanko.sign import fields, signers
    from pyhanko.sign.timestamps import TimestampRequestError
    from pyhanko.sign.timestamps.requests_client import HTTPTimeStamper
    from pyhanko_certvalidator import ValidationContext

    def sign(**extra) -> bytes:
        meta = signers.PdfSignatureMetadata(field_name=SEAL_FIELD, md_algorithm="sha256",
                                            subfilter=fields.SigSeedSubFilter.PADES,
                                            reason="Document sealed by Bulksign", **extra)
        writer = IncrementalPdfFileWriter(BytesIO(pdf), strict=False)
        return _outside_event_loop(signers.sign_pdf, writer, meta, signer=key.signer, timestamper=stamper).getvalue()

    if tsa is None:
        stamper = None
        return sign()
    stamper = HTTPTimeStamper(tsa.url, timeout=tsa.timeout_seconds, auth=tsa.auth)
    try:
        if tsa.trust_roots:
            try:
                context = ValidationContext(trust_roots=[key.certificate, *tsa.trust_roots], allow_fetching=True)
                return sign(embed_validation_info=True, validation_context=context)
            except TimestampRequestError:
                raise
            except Exception as exc:  # a chain pyHanko cannot complete: the time-stamp alone still holds
                log(logger, logging.WARNING, "seal validation data not embedded; sealing with a time-stamp only",
                    error=repr(exc)[:300])
        return sign()
    except TimestampRequestError as exc:
        raise SealError(f"The time-stamp authority {tsa.url} did not answer ({exc}).") from exc


# ---------------------------------------------------------------------------------------------
# Checking a seal
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SealCheck:
    """What a PDF's seal says. ``readable`` False: not a PDF we can parse."""

    readable: bool
    sealed: bool = False
    #: The signed bytes are unchanged and the signature verifies.
    intact: bool = False
    #: The signature covers the whole file (nothing appended after sealing but its own validation data).
    whole_file: bool = False
    #: Signed by this installation's seal certificate, or one it used before.
    ours: bool = False
    signer: str = ""
    signed_at: datetime | None = None
    #: When a trusted time-stamp authority vouched the seal existed (PAdES B-T); None: no trusted time-stamp.
    timestamped_at: datetime | None = None
    #: The seal carries its validation data (PAdES B-LT).
    long_term: bool = False

    @property
    def valid(self) -> bool:
        return self.intact and self.whole_file and self.ours


def check_seal(pdf: bytes, key: SealKey, *, past: Sequence = (), tsa_roots: Sequence = ()) -> SealCheck:
    """Validate the seal of ``pdf`` against our certificate and the ``past`` ones; never raises on bad input."""
    from pyhanko.pdf_utils.reader import PdfFileReader
    from pyhanko.sign.validation import validate_pdf_signature
    from pyhanko.sign.diff_analysis import ModificationLevel
    from pyhanko.sign.validation.status import SignatureCoverageLevel
    from pyhanko_certvalidator import ValidationContext

    try:
        reader = PdfFileReader(BytesIO(pdf), strict=False)
        signatures = reader.embedded_signatures
    except Exception:  # pyHanko raises many kinds on garbage; any of them means "not a readable PDF"
        return SealCheck(readable=False)
    if not signatures:
        return SealCheck(readable=True)
    sig = signatures[-1]
    try:
        roots = [key.certificate, *past, *tsa_roots]
        status = _outside_event_loop(validate_pdf_signature, sig,
                                     ValidationContext(trust_roots=roots, allow_fetching=False),
                                     ts_validation_context=ValidationContext(trust_roots=roots, allow_fetching=False))
    except Exception as exc:
        log(logger, logging.INFO, "seal validation failed", error=repr(exc)[:300])
        return SealCheck(readable=True, sealed=True)
    cert = status.signing_cert
    fingerprint = hashlib.sha256(cert.dump()).hexdigest() if cert is not None else ""
    ours = {key.fingerprint, *(hashlib.sha256(c.dump()).hexdigest() for c in past)}
    stamp = status.timestamp_validity
    try:
        long_term = "/DSS" in reader.root
    except Exception:
        long_term = False
    return SealCheck(
        readable=True, sealed=True, intact=bool(status.intact and status.valid),
        whole_file=status.coverage == SignatureCoverageLevel.ENTIRE_FILE or (
            # B-LT appends its validation data after the signature: the only addition allowed.
            status.coverage == SignatureCoverageLevel.ENTIRE_REVISION
            and status.modification_level == ModificationLevel.LTA_UPDATES),
        ours=fingerprint in ours, signer=cert.subject.human_friendly if cert is not None else "",
        signed_at=status.signer_reported_dt,
        timestamped_at=stamp.timestamp if stamp is not None and stamp.intact and stamp.valid and stamp.trusted else None,
        long_term=long_term,
    )


# ---------------------------------------------------------------------------------------------
# The seal step of a request
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SealOutcome:
    #: ``sealed``, ``already_sealed``, ``not_signed`` or ``no_original``.
    status: str
    request_id: int
    document_id: int | None = None
    mail_id: int | None = None


def audit_record(session: Session, request: SigningRequest, original: Document) -> AuditRecord:
    """The facts and events of ``request`` as the audit certificate prints them."""
    batch: Batch = request.batch
    events = session.scalars(
        select(Event).where(Event.request_id == request.id).order_by(Event.created_at, Event.id)).all()
    lines = [AuditLine(at=e.created_at, label=_label(e), ip=e.ip or "", user_agent=e.user_agent or "")
             for e in events]
    types = {e.type for e in events}
    if "request.created" not in types:
        lines.insert(0, AuditLine(at=request.created_at, label=EVENT_LABELS["request.created"], ip="", user_agent=""))
    if request.email_opened_at and "email.opened" not in types:
        lines.append(AuditLine(at=request.email_opened_at, label=EVENT_LABELS["email.opened"], ip="", user_agent=""))
    lines.sort(key=lambda line: line.at)
    return AuditRecord(
        document_name=document_title(batch), batch_id=batch.id,
        request_id=request.id, recipient_name=request.name or "", recipient_email=request.email,
        signer_name=request.signer_name or request.name or "", signer_ip=request.signer_ip or "",
        signed_at=request.signed_at, original_sha256=original.sha256, lines=tuple(lines),
        language=batch.language or "en", timezone=zone_of(batch).key,
        identity=_identity(events, zone=zone_of(batch).key),
    )


def _identity(events: Sequence[Event], *, zone: str) -> N_ | None:
    """The last one-time code confirmed before signing: where it went and when it was confirmed."""
    verified = [e for e in events if e.type == "code.verified"]
    if not verified:
        return None
    code_id = verified[-1].details.get("code_id")
    # Issued before it could be confirmed: its ``code.sent`` is in the same trail.
    sent = next(e for e in events if e.type == "code.sent" and e.details.get("code_id") == code_id)
    when = _local(verified[-1].created_at, zone)
    if sent.details.get("channel") == "sms":
        return N_("One-time code sent by SMS to %(to)s, confirmed %(when)s", to=sent.details.get("to"), when=when)
    return N_("One-time code sent by email to %(to)s, confirmed %(when)s", to=sent.details.get("to"), when=when)


def document_title(batch: Batch) -> str:
    """What recipients call the document: its template's name, never the batch's internal name."""
    template = batch.template_version.template if batch.template_version else None
    return template.name if template else ""


def signed_storage_key(request: SigningRequest) -> str:
    return f"batches/{request.batch_id}/requests/{request.id}/signed.pdf"


def signed_filename(request: SigningRequest) -> str:
    return f"signed-{request.id}.pdf"


def latest_document(session: Session, request_id: int, kind: str) -> Document | None:
    return session.scalar(select(Document).where(Document.request_id == request_id, Document.kind == kind)
                          .order_by(Document.id.desc()).limit(1))


def seal_request(session: Session, *, request_id: int, now: datetime, storage, key: SealKey,
                 tsa: TimeStamping | None = None) -> SealOutcome:
    """Build, seal and store the signed PDF of a signed request, and queue its confirmation mail; commits.

    Idempotent: a request that already has its signed document is left alone. The row lock
    makes two concurrent runs for one request take turns.
    """
    from .mailer import queue_mail
    from .pipeline import enqueue_sends

    request = session.scalar(select(SigningRequest).where(SigningRequest.id == request_id).with_for_update())
    if request is None or request.status != Status.SIGNED:
        session.rollback()
        return SealOutcome(status="not_signed", request_id=request_id)
    existing = latest_document(session, request_id, "signed")
    if existing is not None:
        session.rollback()
        return SealOutcome(status="already_sealed", request_id=request_id, document_id=existing.id)
    original = latest_document(session, request_id, "original")
    if original is None:
        session.rollback()
        log(logger, logging.ERROR, "signed request has no original document", request_id=request_id)
        return SealOutcome(status="no_original", request_id=request_id)
    data = storage.get(original.storage_key)
    record = audit_record(session, request, original)
    sealed = apply_seal(build_signed_pdf(data, record, image_png=request.signature_image,
                                         box=SignatureBox.from_json(original.signature_box)), key, tsa=tsa)
    storage_key = signed_storage_key(request)
    storage.put(storage_key, sealed, content_type="application/pdf")
    digest = hashlib.sha256(sealed).hexdigest()
    remember_certificate(session, key, now=now)
    document = Document(request_id=request.id, kind="signed", storage_key=storage_key, sha256=digest,
                        size=len(sealed), content_type="application/pdf", created_at=now,
                        seal_fingerprint=key.fingerprint)
    session.add(document)
    session.add(Event(request_id=request.id, batch_id=request.batch_id, type="document.sealed", created_at=now,
                      details={"sha256": digest, "seal": key.fingerprint[:16]}))
    mail = queue_mail(session, key=f"confirmation-{request.id}", kind="confirmation", to_email=request.email,
                      subject=_confirmation_subject(request), now=now, request_id=request.id,
                      batch_id=request.batch_id,
                      attachments=[{"key": storage_key, "filename": signed_filename(request),
                                    "content_type": "application/pdf"}])
    session.flush()
    outcome = SealOutcome(status="sealed", request_id=request.id, document_id=document.id, mail_id=mail.id)
    session.commit()
    enqueue_sends([outcome.mail_id])
    log(logger, logging.INFO, "signed document sealed", request_id=request_id, document_id=outcome.document_id,
        size=len(sealed))
    return outcome


def remember_certificate(session: Session, key: SealKey, *, now: datetime) -> None:
    """Keep the seal's certificate, so /verify recognises its documents after the certificate is replaced."""
    # One primary-key read per seal (a seal costs ~30 ms); a per-process memo would miss a restored database.
    if session.get(SealCertificate, key.fingerprint) is None:
        with session.begin_nested():  # two workers sealing at once with a new certificate: the first row stays
            session.add(SealCertificate(fingerprint=key.fingerprint, subject=key.subject[:500],
                                        der=key.certificate.dump(), not_after=key.not_after, first_used_at=now))


def past_certificates(session: Session, *, current: SealKey) -> list:
    """The certificates that sealed documents here before ``current`` (asn1crypto objects)."""
    from asn1crypto import x509

    return [x509.Certificate.load(der) for der in session.scalars(
        select(SealCertificate.der).where(SealCertificate.fingerprint != current.fingerprint))]


def unsealed_requests(session: Session, *, now: datetime, grace: timedelta = timedelta(minutes=5),
                      window: timedelta = timedelta(days=7), limit: int = 1000) -> list[int]:
    """Requests signed between ``window`` and ``grace`` ago that still have no signed document."""
    has_signed = select(Document.id).where(Document.request_id == SigningRequest.id, Document.kind == "signed")
    return list(session.scalars(
        select(SigningRequest.id)
        .where(SigningRequest.status == Status.SIGNED, SigningRequest.signed_at <= now - grace,
               SigningRequest.signed_at >= now - window, ~has_signed.exists())
        .order_by(SigningRequest.signed_at).limit(limit)))


def _confirmation_subject(request: SigningRequest) -> str:
    from flask_babel import force_locale, gettext as _

    with force_locale(request.batch.language):
        return _("Signed: %(name)s", name=document_title(request.batch))


@builder("confirmation")
def build_confirmation(session: Session, mail, app):
    """The recipient's confirmation with the signed PDF attached (the mail job attaches the files)."""
    from flask import render_template
    from flask_babel import force_locale
    from flask_mail import Message

    request = session.get(SigningRequest, mail.request_id)
    with force_locale(request.batch.language):
        body = render_template("emails/signing_confirmation.txt", request=request, batch=request.batch,
                               document_name=document_title(request.batch))
    message = Message(subject=mail.subject, recipients=[mail.to_email], body=body,
                      reply_to=request.batch.reply_to or None)
    message.msgId = mail.message_id
    return message

"""A batch whose template has fields the signer fills, and values given for its requests as the signing
page stores them (``field_values`` rows, an attachment's bytes in storage), for the staff side's tests."""

from __future__ import annotations

import hashlib
import io
from datetime import datetime

from PIL import Image

from bulksign.core.extensions import db
from bulksign.doc_templates.versions import create_template, save_fields
from bulksign.documents.storage import get_storage
from bulksign.models import SigningRequest, User
from bulksign.models.fields import FieldValue
from tests.support.batches import make_batch

FORM = (
    '<meta charset="utf-8"><p>Contract for {{ name }}</p><p>IBAN {{ field_iban }}</p><p>Start {{ field_start }}</p>'
    "<p>Hours {{ field_hours }}</p><p>Rules read {{ field_rules }}</p><p>ID {{ field_id_scan }}</p>"
)
SETTINGS = [
    {"name": "iban", "label": "IBAN"},
    {"name": "start", "type": "date", "label": "Start date"},
    {"name": "hours", "type": "number", "label": "Hours a week", "required": False},
    {"name": "rules", "type": "checkbox", "label": "I have read the work rules"},
    {"name": "id_scan", "type": "attachment", "label": "ID scan"},
]
#: What a signer gives, as stored (normalised by type).
GIVEN = {"iban": "DE89370400440532013000", "start": "2027-01-31", "hours": "1234.5", "rules": "true"}


def scan_png() -> bytes:
    """A real small PNG, as a phone's scan would be."""
    out = io.BytesIO()
    Image.new("RGB", (40, 30), (200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


def batch_with_fields(*, user: User, now: datetime, recipients: int = 2, **batch_fields) -> int:
    """A committed batch on a template marking ``SETTINGS``' fields, saved with those settings."""
    created = create_template(db.session, name="Contract with fields", html=FORM, user=user, now=now)
    version = save_fields(db.session, template=created.template, fields=SETTINGS, user=user, now=now).version
    db.session.commit()
    return make_batch(user=user, now=now, recipients=recipients, version=version, **batch_fields)


def fill(
    request_id: int,
    *,
    now: datetime,
    values: dict[str, str | None] = GIVEN,
    scan: bytes | None = None,
    filename: str = "passport scan.png",
    role: str = "recipient",
) -> str | None:
    """Store ``values`` (and ``scan`` as the attachment ``id_scan``) for the request as the signing page does;
    committed. The attachment's storage key, or None without one."""
    request = db.session.get(SigningRequest, request_id)
    rows = [
        FieldValue(
            request_id=request_id,
            batch_id=request.batch_id,
            name=name,
            role=role,
            value=value,
            entered_at=now,
            entered_ip="203.0.113.9",
        )
        for name, value in values.items()
    ]
    key = None
    if scan is not None:
        key = f"batches/{request.batch_id}/requests/{request_id}/fields/id_scan"
        get_storage().put(key, scan, content_type="image/png")
        rows.append(
            FieldValue(
                request_id=request_id,
                batch_id=request.batch_id,
                name="id_scan",
                role=role,
                value=filename,
                storage_key=key,
                content_type="image/png",
                size=len(scan),
                sha256=hashlib.sha256(scan).hexdigest(),
                entered_at=now,
                entered_ip="203.0.113.9",
            )
        )
    db.session.add_all(rows)
    db.session.commit()
    return key

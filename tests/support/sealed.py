"""Signed and sealed documents for the sealing and verification tests: a request signed through the real steps, its signed document, a PDF to seal, an upload to /verify."""

from __future__ import annotations

import io
from datetime import timedelta

from sqlalchemy import select

from bulksign.core.extensions import db
from bulksign.documents.pdf import render_pdf
from bulksign.models import Document, Event
from bulksign.signing.field_entry import NOTHING_FILLED, FilledForm
from bulksign.signing.recipient_actions import open_request, sign
from tests.support.clock import NOW
from tests.support.signatures import png
from tests.support.signing_requests import make_sent_request
from tests.support.web import csrf_from


def signed_document(request_id: int) -> Document:
    return db.session.scalar(select(Document).where(Document.request_id == request_id, Document.kind == "signed"))


def signed_request(*, owner, name="Иван Петров", image=True, filled: FilledForm = NOTHING_FILLED, **kwargs):
    """A request on ``make_sent_request``'s (``kwargs``), opened and signed with ``filled`` as its form's fields."""
    r = make_sent_request(now=NOW, owner=owner, name=name, **kwargs)
    db.session.add(
        Event(
            request_id=r.id,
            batch_id=r.batch_id,
            type="email.opened",
            created_at=NOW + timedelta(minutes=3),
            ip="192.0.2.7",
            user_agent="MailClient/2",
        )
    )
    db.session.commit()
    open_request(
        db.session,
        request_id=r.id,
        now=NOW + timedelta(minutes=10),
        ip="203.0.113.5",
        user_agent="Mozilla/5.0 (iPhone) Safari",
    )
    outcome = sign(
        db.session,
        request_id=r.id,
        now=NOW + timedelta(minutes=12),
        signer_name=name,
        signature_png=png() if image else None,
        consent=True,
        ip="203.0.113.5",
        user_agent="Mozilla/5.0 (iPhone) Safari",
        filled=filled,
    )
    assert outcome.status == "signed"
    return r


def make_pdf() -> bytes:
    return render_pdf('<meta charset="utf-8"><p>Seal me</p>')


def upload(client, data: bytes, filename="doc.pdf"):
    form = client.get("/verify")
    return client.post(
        "/verify",
        data={"csrf_token": csrf_from(form), "file": (io.BytesIO(data), filename)},
        content_type="multipart/form-data",
    )

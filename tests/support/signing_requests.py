"""A signing request as the pipeline leaves it: in 'sent', with a real stored original PDF and a live link."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import current_app

from bulksign.batches import counts as batch_counts
from bulksign.batches.states import transition
from bulksign.core.extensions import db
from bulksign.doc_templates.jinja_sandbox import render_html
from bulksign.doc_templates.versions import create_template, save_fields
from bulksign.documents.field_boxes import field_values, find_field_boxes, stored_marks
from bulksign.documents.pdf import render_pdf
from bulksign.documents.signature_box import SignatureBox, find_signature_box, html_mark
from bulksign.documents.storage import get_storage
from bulksign.models import Batch, Document, SigningRequest, User
from bulksign.models.status import Status
from bulksign.signing.links import issue_link

HTML = (
    '<meta charset="utf-8"><body style="font-family:\'DejaVu Serif\'"><h1>Договор {{ number }}</h1>'
    "<p>Между ООО «Ромашка» и {{ name }}.</p><p>Contract body text.</p></body>"
)
#: The path a request takes from creation to an invitation in the recipient's mailbox.
TO_SENT = (Status.GENERATING, Status.GENERATED, Status.SENDING, Status.SENT)
_pdf_cache: dict[str, tuple[bytes, SignatureBox | None, dict]] = {}


@dataclass(frozen=True)
class SentRequest:
    id: int
    token: str
    batch_id: int
    original: bytes


def make_sent_request(
    *,
    now: datetime,
    owner: User | None = None,
    name: str = "Иван Петров",
    email: str = "ivan@example.com",
    language: str = "en",
    reply_to: str | None = None,
    expires_in: timedelta = timedelta(days=7),
    template_name: str = "Employment contract",
    html: str = HTML,
    phone: str | None = None,
    one_time_code: bool = False,
    fields: list[dict] | None = None,
    data: dict | None = None,
) -> SentRequest:
    """One request in 'sent' with its original rendered by wkhtmltopdf and stored (with its signature box and its
    fields' boxes). ``fields``: the settings of the fields ``html`` marks (``save_fields``); ``data``: the row's
    columns beside ``number`` (e.g. a ``field_<name>`` prefill)."""
    session = db.session
    saved = create_template(session, name=template_name, html=html, user=owner, now=now)
    version = saved.version
    if fields is not None:
        version = save_fields(session, template=saved.template, fields=fields, user=owner, now=now).version
    batch = Batch(
        name="November contracts",
        template_version_id=version.id,
        created_by_id=owner.id if owner else None,
        team_id=saved.template.team_id,
        language=language,
        reply_to=reply_to,
        status="processing",
        total_count=1,
        created_at=now,
        one_time_code=one_time_code,
    )
    session.add(batch)
    session.flush()
    request = SigningRequest(
        batch_id=batch.id,
        row_number=2,
        email=email,
        name=name,
        phone=phone,
        data={"number": "7", **(data or {})},
        status=Status.PENDING,
        created_at=now,
        status_changed_at=now,
    )
    session.add(request)
    session.flush()
    # As batch creation does: the counters exist before the request moves, so its moves below count.
    batch_counts.seed(session, batch_id=batch.id, counts={Status.PENDING.value: 1})
    marks = stored_marks(version.fields)
    filled = render_html(html, {"number": "7", "name": name, "signature": html_mark(), **field_values(marks)})
    if filled not in _pdf_cache:
        pdf = render_pdf(filled)
        _pdf_cache[filled] = pdf, find_signature_box(pdf), find_field_boxes(pdf, variables=marks)
    pdf, box, field_boxes = _pdf_cache[filled]
    key = f"batches/{batch.id}/requests/{request.id}/original.pdf"
    get_storage().put(key, pdf)
    session.add(
        Document(
            request_id=request.id,
            kind="original",
            storage_key=key,
            sha256=hashlib.sha256(pdf).hexdigest(),
            size=len(pdf),
            created_at=now,
            signature_box=box.to_json() if box else None,
            field_boxes={name: b.to_json() for name, b in field_boxes.items()} if marks else None,
        )
    )
    frm = Status.PENDING
    for to in TO_SENT:
        fields = {"sent_at": now, "expires_at": now + expires_in} if to == Status.SENT else {}
        assert transition(session, request.id, frm=frm, to=to, now=now, **fields)
        frm = to
    token = issue_link(session, request_id=request.id, secret=current_app.config["SECRET_KEY"], now=now)
    session.commit()
    return SentRequest(id=request.id, token=token, batch_id=batch.id, original=pdf)


def fresh(request_id: int) -> SigningRequest:
    db.session.expire_all()
    return db.session.get(SigningRequest, request_id)

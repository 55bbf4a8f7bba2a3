"""Batches whose requests wait for the recipient ('sent' at a chosen time, with live links), for reminder tests."""

from __future__ import annotations

from datetime import datetime

from flask import current_app
from sqlalchemy import select

from bulksign.batches.states import transition
from bulksign.core.extensions import db
from bulksign.models import Batch, OutgoingMail, SigningRequest
from bulksign.models.status import Status
from bulksign.signing.invitations import deadline_for
from bulksign.signing.links import issue_link
from tests.support.batches import make_batch, request_ids
from tests.support.signing_requests import TO_SENT


def sent_batch(*, user, sent_at: datetime, recipients: int = 1, **batch_fields) -> tuple[int, list[int]]:
    """A batch whose requests were all invited at ``sent_at`` (with the batch's deadline); committed."""
    batch_id = make_batch(user=user, now=sent_at, recipients=recipients, **batch_fields)
    ids = request_ids(batch_id)
    batch = db.session.get(Batch, batch_id)
    for request_id in ids:
        issue_link(db.session, request_id=request_id, secret=current_app.config["SECRET_KEY"], now=sent_at)
    frm = Status.PENDING
    for to in TO_SENT:
        fields = {"sent_at": sent_at, "expires_at": deadline_for(batch, sent_at=sent_at)} if to == Status.SENT else {}
        assert len(transition(db.session, ids, frm=frm, to=to, now=sent_at, **fields).won) == len(ids)
        frm = to
    db.session.commit()
    return batch_id, ids


def mails(kind: str) -> list[OutgoingMail]:
    db.session.expire_all()
    return list(db.session.scalars(select(OutgoingMail).where(OutgoingMail.kind == kind).order_by(OutgoingMail.id)))


def request(request_id: int) -> SigningRequest:
    db.session.expire_all()
    return db.session.get(SigningRequest, request_id)

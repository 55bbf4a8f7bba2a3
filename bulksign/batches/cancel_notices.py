"""What the parties of a cancelled request are told: a short mail with the sender's reason to every party already
invited (one per countersigner for its digest), built when sent from what the cancel recorded."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from flask import Flask, render_template
from flask_babel import force_locale
from flask_babel import gettext as _
from flask_mail import Message
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bulksign.core.slicing import slices
from bulksign.documents.audit_record import document_title
from bulksign.mail.mailer import MailNotNeeded, builder, queue_mail
from bulksign.models import RECIPIENT_ROLE, Batch, CountersignLink, Party, SigningRequest
from bulksign.models.mail import MailKind, OutgoingMail
from bulksign.models.status import Status
from bulksign.signing import digests

#: A party's notice (``cancelled-<request id>-<role>``) and a countersigner's (``cancelled-countersign-<link id>-
#: <first request id>``).
CANCELLED = MailKind.CANCELLED
COUNTERSIGN_CANCELLED = MailKind.CANCELLED_COUNTERSIGN


def tell_cancelled(session: Session, *, request_ids: Sequence[int], now: datetime) -> list[int]:
    """Queue the notices of requests this cancel just moved to ``cancelled`` (all stamped ``now``); the mail ids.
    The caller commits, then sends them."""
    mail_ids: list[int] = []
    by_digest: dict[tuple[int, str], list[int]] = {}
    for part in slices(sorted(request_ids)):
        rows = session.execute(
            select(
                Party.request_id,
                Party.role,
                Party.email,
                SigningRequest.email.label("own_email"),
                SigningRequest.batch_id,
                digests.served_by_digest().label("by_digest"),
            )
            .join(SigningRequest, SigningRequest.id == Party.request_id)
            .where(Party.request_id.in_(part), Party.invited_at.is_not(None))
            .order_by(Party.request_id, Party.step, Party.role)
        ).all()
        for row in rows:
            if row.by_digest:
                by_digest.setdefault((row.batch_id, row.email.lower()), []).append(row.request_id)
                continue
            if row.role == RECIPIENT_ROLE and not row.own_email:
                continue  # reached by text alone: its link now says the request was cancelled
            mail_ids.append(
                queue_mail(
                    session,
                    key=f"cancelled-{row.request_id}-{row.role}",
                    kind=CANCELLED,
                    to_email=row.own_email if row.role == RECIPIENT_ROLE else row.email,
                    subject=_subject(session, row.batch_id),
                    now=now,
                    request_id=row.request_id,
                    batch_id=row.batch_id,
                ).id
            )
    for (batch_id, email), ids in sorted(by_digest.items()):
        link_id = session.scalar(
            select(CountersignLink.id).where(CountersignLink.batch_id == batch_id, CountersignLink.email == email)
        )
        mail_ids.append(
            queue_mail(
                session,
                key=f"cancelled-countersign-{link_id}-{min(ids)}",
                kind=COUNTERSIGN_CANCELLED,
                to_email=email,
                subject=_subject(session, batch_id),
                now=now,
                request_id=min(ids),
                batch_id=batch_id,
            ).id
        )
    return mail_ids


def _subject(session: Session, batch_id: int) -> str:
    batch = session.get_one(Batch, batch_id)
    with force_locale(batch.language):
        return cast(str, _("Cancelled: %(name)s", name=document_title(batch)))


def _cancelled(session: Session, mail: OutgoingMail) -> SigningRequest:
    request = session.get(SigningRequest, mail.request_id) if mail.request_id else None
    if request is None or request.status != Status.CANCELLED or request.purged_at is not None:
        raise MailNotNeeded(f"request {mail.request_id} is not cancelled (or is purged)")
    return request


def notice_message(mail: OutgoingMail, app: Flask, *, batch: Batch, template: str, **context: Any) -> Message:
    """A notice about a request to the mail's address: ``template`` in the batch's language, replies to its sender."""
    with force_locale(batch.language):
        body = render_template(template, document_name=document_title(batch), **context)
    message = Message(
        subject=mail.subject,
        recipients=[mail.to_email],
        body=body,
        sender=app.config["MAIL_DEFAULT_SENDER"],
        reply_to=batch.reply_to or (batch.created_by.email if batch.created_by else None),
    )
    message.msgId = mail.message_id
    return message


@builder(CANCELLED, for_cancelled=True)
def build_cancelled(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """To a party already invited: the sender cancelled the document, and why."""
    request = _cancelled(session, mail)
    return notice_message(
        mail, app, batch=request.batch, template="emails/request_cancelled.txt", reason=request.cancel_reason or ""
    )


@builder(COUNTERSIGN_CANCELLED, for_cancelled=True)
def build_countersign_cancelled(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """To a countersigner: how many of their documents one cancel stopped (those cancelled with the first, at the
    same moment), and why."""
    first = _cancelled(session, mail)
    link_id = int(mail.message_id.strip("<>").removeprefix("cancelled-countersign-").split("-")[0])
    link = session.get_one(CountersignLink, link_id)
    count = session.scalar(
        select(func.count())
        .select_from(Party)
        .join(SigningRequest, SigningRequest.id == Party.request_id)
        .where(
            Party.batch_id == link.batch_id,
            func.lower(Party.email) == link.email,
            Party.role != RECIPIENT_ROLE,
            Party.invited_at.is_not(None),
            SigningRequest.status == Status.CANCELLED,
            SigningRequest.status_changed_at == first.status_changed_at,
        )
    )
    return notice_message(
        mail,
        app,
        batch=first.batch,
        template="emails/countersign_cancelled.txt",
        count=count,
        reason=first.cancel_reason or "",
    )

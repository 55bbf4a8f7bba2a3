"""The staff side's mails about a batch: who hears of expiries, declines and the end of a batch.

A batch names its notice address (``Batch.notify_email``: a team manager or any address); without
one, its owner hears of expiries and declines (without an active owner, its reply-to address).
The completion notice goes only to a named address.
"""
from __future__ import annotations

import logging
from datetime import datetime

from flask import Flask
from flask_babel import force_locale, gettext as _
from flask_mail import Message
from sqlalchemy.orm import Session

from .logs import log
from .mailer import queue_mail
from .models import Batch, OutgoingMail, User

logger = logging.getLogger(__name__)

COMPLETION = "completion_notice"


def notice_recipient(batch: Batch, *, owner: User | None) -> str | None:
    """Who hears of the batch's expiries, declines and completion: its notice address, else its active owner
    (``batch.created_by``, passed in by the caller that loaded it), else its reply-to address."""
    if batch.notify_email:
        return batch.notify_email
    if owner is not None and not owner.disabled:
        return owner.email
    return batch.reply_to


def notice_locale(batch: Batch) -> str:
    """The language of the batch's notices: its owner's, else English."""
    owner = batch.created_by
    return owner.locale if owner is not None and owner.locale else "en"


def queue_completion_notice(session: Session, *, batch: Batch, now: datetime) -> OutgoingMail | None:
    """Record the one mail saying the batch is done, for a batch that names a notice address; the caller commits.

    Only then: an owner follows their batch on its page, and a mail per finished batch to every owner would
    be noise. The reconciler sends mails left queued, so no job needs enqueuing here.
    """
    if not batch.notify_email:
        return None
    to_email = batch.notify_email
    with force_locale(notice_locale(batch)):
        subject = _("Batch \"%(batch)s\" is done", batch=batch.name)
    return queue_mail(session, key=f"completion-notice-{batch.id}", kind=COMPLETION, to_email=to_email,
                      subject=subject, now=now, batch_id=batch.id)


def build_completion_notice(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """How the batch ended: its counts by outcome and a link to its page."""
    from .batches import counts_for
    from .states import Status

    batch = session.get(Batch, mail.batch_id)
    if batch is None:
        raise LookupError(f"batch {mail.batch_id} no longer exists")
    counts = counts_for(session, [batch.id])[batch.id].by_status
    with force_locale(notice_locale(batch)):
        lines = [_("Every request of \"%(batch)s\" has been dispatched.", batch=batch.name), "",
                 _("Signed: %(n)s", n=counts[Status.SIGNED.value]),
                 _("Waiting for the recipient: %(n)s", n=counts[Status.SENT.value] + counts[Status.OPENED.value]),
                 _("Declined: %(n)s", n=counts[Status.DECLINED.value]),
                 _("Failed or bounced: %(n)s", n=counts[Status.FAILED.value] + counts[Status.BOUNCED.value]),
                 "", _("The batch page:"), f"{app.config['APP_URL']}/batches/{batch.id}"]
    message = Message(subject=mail.subject, recipients=[mail.to_email], body="\n".join(lines) + "\n",
                      sender=app.config["MAIL_DEFAULT_SENDER"])
    message.msgId = mail.message_id
    return message

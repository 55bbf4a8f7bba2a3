"""The staff side's mails about a batch: its expiry summaries, decline notices and completion notice.

A batch names who gets all three (``Batch.notify_email``): nobody named means its owner (the default),
else a team manager's or any address; without an active owner, the batch's reply-to address. They
speak the owner's interface language, whoever reads them. This module is the one place that decides
both, and records and builds every such mail.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime

from flask import Flask
from flask_babel import force_locale
from flask_babel import gettext as _
from flask_mail import Message
from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.batches.counts import counters
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.mail.email_checks import check_email
from bulksign.mail.mailer import builder, queue_mail
from bulksign.models import Batch, OutgoingMail, User
from bulksign.models.status import Status

logger = logging.getLogger(__name__)

COMPLETION = "completion_notice"
#: The choices of a new-batch form or API call (``notify_to``) besides a team manager's address.
OWNER, OTHER = "owner", "other"


class NoticeAddressError(ValueError):
    """The chosen notice address cannot be used; ``args[0]`` says why (an ``N_`` message)."""


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


def chosen_notice_address(*, choice: str | None, email: str | None) -> str | None:
    """The notice address a form or API call chose, checked; None for the owner.

    ``choice`` is ``owner``, ``other`` (then ``email`` is the address) or a team manager's address;
    without a choice, ``email`` if given, else the owner.
    """
    choice = (choice or "").strip()
    if choice == OWNER:
        return None
    address = (email or "").strip() if choice in ("", OTHER) else choice
    if not address:
        if choice == OTHER:
            raise NoticeAddressError(N_("Give the address the notices go to, or choose who gets them."))
        return None
    address, problem = check_email(address)
    if problem:
        raise NoticeAddressError(problem)
    return address


def queue_notice(
    session: Session, *, batch: Batch, kind: str, key: str, subject: N_, now: datetime, request_id: int | None = None
) -> OutgoingMail | None:
    """Record one notice about ``batch`` for whoever it names, the subject in the owner's language; None when
    there is nobody to tell. The caller commits, then enqueues the send (or leaves it to the reconciler)."""
    to_email = notice_recipient(batch, owner=batch.created_by)
    if to_email is None:
        log(logger, logging.WARNING, "notice not sent: nobody to tell", batch_id=batch.id, kind=kind)
        return None
    with force_locale(notice_locale(batch)):
        text = str(subject)
    return queue_mail(
        session, key=key, kind=kind, to_email=to_email, subject=text, now=now, batch_id=batch.id, request_id=request_id
    )


def notice_message(mail: OutgoingMail, app: Flask, *, body: str) -> Message:
    """A notice as it goes out: the recorded subject and address, ``body``, the row's Message-ID."""
    message = Message(
        subject=mail.subject, recipients=[mail.to_email], body=body, sender=app.config["MAIL_DEFAULT_SENDER"]
    )
    message.msgId = mail.message_id
    return message


def queue_completion_notice(session: Session, *, batch: Batch, now: datetime) -> OutgoingMail | None:
    """Record the one mail saying the batch is done; the caller commits, then enqueues it
    (``queued_completion_notices``), or leaves it to the reconciler, which sends mails left queued."""
    return queue_notice(
        session,
        batch=batch,
        kind=COMPLETION,
        key=f"completion-notice-{batch.id}",
        subject=N_('Batch "%(batch)s" is done', batch=batch.name),
        now=now,
    )


def queued_completion_notices(session: Session, *, batch_ids: Collection[int]) -> list[int]:
    """The completion notices of these batches still to go out: a job that closed them enqueues these once it
    has committed, so the end is told now rather than at the reconciler's next pass."""
    if not batch_ids:
        return []
    return list(
        session.scalars(
            select(OutgoingMail.id).where(
                OutgoingMail.batch_id.in_(list(batch_ids)),
                OutgoingMail.kind == COMPLETION,
                OutgoingMail.status == "queued",
            )
        )
    )


@builder(COMPLETION)
def build_completion_notice(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """How the batch ended: its counts by outcome and a link to its page."""
    batch = session.get(Batch, mail.batch_id)
    if batch is None:
        raise LookupError(f"batch {mail.batch_id} no longer exists")
    counts = counters(session, [batch.id])[batch.id]
    with force_locale(notice_locale(batch)):
        lines = [
            _('Every request of "%(batch)s" has been dispatched.', batch=batch.name),
            "",
            _("Signed: %(n)s", n=counts[Status.SIGNED.value]),
            _("Waiting for the recipient: %(n)s", n=counts[Status.SENT.value] + counts[Status.OPENED.value]),
            _("Declined: %(n)s", n=counts[Status.DECLINED.value]),
            _("Failed or bounced: %(n)s", n=counts[Status.FAILED.value] + counts[Status.BOUNCED.value]),
            "",
            _("The batch page:"),
            f"{app.config['APP_URL']}/batches/{batch.id}",
        ]
    return notice_message(mail, app, body="\n".join(lines) + "\n")

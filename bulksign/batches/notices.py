"""The staff side's mails about a batch (expiry summaries, decline notices, the notice of its end): who gets them
(``Batch.notify_email``, else its owner) and in which language, recorded and built here."""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime

from flask import Flask
from flask_babel import force_locale
from flask_babel import gettext as _
from flask_mail import Message
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from bulksign.batches.counts import counters
from bulksign.core.errors import BulksignError
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.mail.email_checks import check_email
from bulksign.mail.mailer import builder, queue_mail
from bulksign.models import Batch, OutgoingMail, SigningRequest, User
from bulksign.models.mail import MailKind, MailStatus
from bulksign.models.status import Status

logger = logging.getLogger(__name__)

#: The batch closed: nobody can sign any more and some did not (the kind keeps its name of before).
COMPLETION = MailKind.COMPLETION_NOTICE
#: Every recipient of the batch signed.
ALL_SIGNED = MailKind.ALL_SIGNED_NOTICE
#: The kind of ``expiry``'s summary, named here because a completion notice folds into it (``folded_completion``).
EXPIRY_SUMMARY = MailKind.EXPIRY_SUMMARY
#: The choices of a new-batch form or API call (``notify_to``) besides a team manager's address.
OWNER, OTHER = "owner", "other"


class NoticeAddressError(BulksignError):
    """The chosen notice address cannot be used; ``message`` says why."""


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
    checked, problem = check_email(address)
    if problem:
        raise NoticeAddressError(problem)
    return checked


def queue_notice(
    session: Session,
    *,
    batch: Batch,
    kind: MailKind,
    key: str,
    subject: N_ | str,
    now: datetime,
    request_id: int | None = None,
) -> OutgoingMail | None:
    """Record one notice about ``batch`` for whoever it names, the subject in the owner's language (a message, or a
    text the caller put in it: a count's plural form); None when there is nobody to tell. The caller commits, then enqueues the send (or leaves it to the reconciler)."""
    to_email = notice_recipient(batch, owner=batch.created_by)
    if to_email is None:
        log(logger, logging.WARNING, "notice not sent: nobody to tell", batch_id=batch.id, kind=kind)
        return None
    with force_locale(notice_locale(batch)):
        text = str(subject)
    return queue_mail(
        session, key=key, kind=kind, to_email=to_email, subject=text, now=now, batch_id=batch.id, request_id=request_id
    )


def notice_batch(session: Session, mail: OutgoingMail) -> Batch:
    """The batch a notice is about, read when the notice is built; LookupError once the batch is deleted (the mail
    then fails for good: there is nothing left to tell)."""
    batch = session.get(Batch, mail.batch_id)
    if batch is None:
        raise LookupError(f"batch {mail.batch_id} no longer exists")
    return batch


def notice_message(mail: OutgoingMail, app: Flask, *, body: str) -> Message:
    """A notice as it goes out: the recorded subject and address, ``body``, the row's Message-ID."""
    message = Message(
        subject=mail.subject, recipients=[mail.to_email], body=body, sender=app.config["MAIL_DEFAULT_SENDER"]
    )
    message.msgId = mail.message_id
    return message


def queue_completion_notice(session: Session, *, batch: Batch, now: datetime) -> OutgoingMail | None:
    """Record the one mail saying the batch closed with some unsigned; the caller commits, then enqueues it. When an
    expiry summary of the batch is still to go out, the notice is recorded cancelled and the summary says the batch
    closed (``folded_completion``): it names who did not sign."""
    mail = queue_notice(
        session,
        batch=batch,
        kind=COMPLETION,
        key=f"completion-notice-{batch.id}",
        subject=N_(
            'Batch "%(batch)s" is closed: %(signed)s of %(total)s signed',
            batch=batch.name,
            signed=_signed_now(session, batch_id=batch.id),
            total=batch.total_count,
        ),
        now=now,
    )
    if mail is not None and mail.status == MailStatus.QUEUED and _expiry_summary_due(session, batch_id=batch.id):
        # Cancelled, not left unrecorded: the batch's one completion notice has been told (by the summary),
        # so a later close of the batch (after a retry) does not tell it again.
        session.execute(update(OutgoingMail).where(OutgoingMail.id == mail.id).values(status=MailStatus.CANCELLED))
        session.expire(mail)
        log(logger, logging.INFO, "completion notice folded into the expiry summary", batch_id=batch.id)
    return mail


def queue_all_signed_notice(session: Session, *, batch: Batch, now: datetime) -> OutgoingMail | None:
    """Record the one mail saying every recipient of the batch signed; the caller commits, then enqueues it."""
    return queue_notice(
        session,
        batch=batch,
        kind=ALL_SIGNED,
        key=f"all-signed-notice-{batch.id}",
        subject=N_('Everyone signed "%(batch)s"', batch=batch.name),
        now=now,
    )


def _signed_now(session: Session, *, batch_id: int) -> int:
    # The move that closed the batch may sit in this transaction, not yet in the counters: count the rows.
    return (
        session.scalar(
            select(func.count())
            .select_from(SigningRequest)
            .where(SigningRequest.batch_id == batch_id, SigningRequest.status == Status.SIGNED.value)
        )
        or 0
    )


def _expiry_summary_due(session: Session, *, batch_id: int) -> bool:
    # Read from the database, not the loaded Batch: the expiry marks its wave with a bulk UPDATE in this transaction.
    pending = session.scalar(select(Batch.expiry_pending_since).where(Batch.id == batch_id))
    queued = session.scalar(
        select(OutgoingMail.id)
        .where(
            OutgoingMail.batch_id == batch_id,
            OutgoingMail.kind == EXPIRY_SUMMARY,
            OutgoingMail.status == MailStatus.QUEUED,
        )
        .limit(1)
    )
    return pending is not None or queued is not None


def folded_completion(session: Session, *, batch_id: int, after: datetime | None, until: datetime) -> bool:
    """Whether the expiry summary recorded at ``until`` (the previous one at ``after``) also tells that the batch
    is done: its completion notice was cancelled for it by ``queue_completion_notice``."""
    query = select(OutgoingMail.id).where(
        OutgoingMail.batch_id == batch_id,
        OutgoingMail.kind == COMPLETION,
        OutgoingMail.status == MailStatus.CANCELLED,
        OutgoingMail.created_at <= until,
    )
    if after is not None:
        query = query.where(OutgoingMail.created_at > after)
    return session.scalar(query.limit(1)) is not None


def outcome_lines(session: Session, *, batch: Batch) -> list[str]:
    """How the batch ended, a line per outcome, in the current locale: the completion notice's facts, which a
    summary that stands in for it repeats."""
    counts = counters(session, [batch.id])[batch.id]
    return [
        _('"%(batch)s" is closed: nobody can sign it any more.', batch=batch.name),
        "",
        _("Signed: %(n)s of %(total)s", n=counts[Status.SIGNED.value], total=sum(counts.values())),
        _("Did not sign before the deadline: %(n)s", n=counts[Status.EXPIRED.value]),
        _("Declined: %(n)s", n=counts[Status.DECLINED.value]),
        _("Failed or bounced: %(n)s", n=counts[Status.FAILED.value] + counts[Status.BOUNCED.value]),
        _("Cancelled: %(n)s", n=counts[Status.CANCELLED.value]),
    ]


def queued_completion_notices(session: Session, *, batch_ids: Collection[int]) -> list[int]:
    """The notices of these batches' end still to go out: a job that settled them enqueues these once it has
    committed, so the end is told now rather than at the reconciler's next pass."""
    if not batch_ids:
        return []
    return list(
        session.scalars(
            select(OutgoingMail.id).where(
                OutgoingMail.batch_id.in_(list(batch_ids)),
                OutgoingMail.kind.in_([COMPLETION, ALL_SIGNED]),
                OutgoingMail.status == MailStatus.QUEUED,
            )
        )
    )


@builder(COMPLETION)
def build_completion_notice(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """How the batch closed: its counts by outcome and a link to its page."""
    batch = notice_batch(session, mail)
    with force_locale(notice_locale(batch)):
        lines = [
            *outcome_lines(session, batch=batch),
            "",
            _("The batch page:"),
            f"{app.config['APP_URL']}/batches/{batch.id}",
        ]
    return notice_message(mail, app, body="\n".join(lines) + "\n")


@builder(ALL_SIGNED)
def build_all_signed_notice(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """Everyone signed: how many, and where the signed documents are (the batch page and its ZIP export)."""
    batch = notice_batch(session, mail)
    with force_locale(notice_locale(batch)):
        lines = [
            _(
                'Every recipient of "%(batch)s" has signed: %(n)s of %(n)s.',
                batch=batch.name,
                n=counters(session, [batch.id])[batch.id][Status.SIGNED.value],
            ),
            "",
            _("The signed documents are on the batch page, also as one ZIP file:"),
            f"{app.config['APP_URL']}/batches/{batch.id}",
        ]
    return notice_message(mail, app, body="\n".join(lines) + "\n")

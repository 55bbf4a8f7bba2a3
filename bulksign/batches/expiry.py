"""Expiry: requests unsigned at their deadline become ``expired``; whoever the batch names for its notices gets
one summary per wave of expiries, sent once (a compare-and-set). docs/architecture/batches.md."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from flask import Flask
from flask_babel import force_locale, ngettext
from flask_babel import gettext as _
from flask_mail import Message
from sqlalchemy import Select, func, select, update
from sqlalchemy.orm import Session

from bulksign.batches.notices import (
    EXPIRY_SUMMARY,
    folded_completion,
    notice_batch,
    notice_locale,
    notice_message,
    outcome_lines,
    queue_notice,
)
from bulksign.batches.progress import counts_for, refresh_batch_statuses
from bulksign.batches.reminder_mails import KIND as REMINDER
from bulksign.batches.states import transition
from bulksign.core.logs import log
from bulksign.mail.mailer import builder, cancel_queued
from bulksign.models import Batch, OutgoingMail, SigningRequest
from bulksign.models.status import WAITING_FOR_RECIPIENT, Status

logger = logging.getLogger(__name__)

KIND = EXPIRY_SUMMARY
#: More expiries due this soon belong to the same wave: wait for them.
SETTLE = timedelta(hours=1)
#: A summary is never held back longer than this after the first expiry it reports.
MAX_WAIT = timedelta(hours=24)
#: Recipients listed in one summary mail; the rest are counted, the batch page has them all.
LISTED_MAX = 500


@dataclass(frozen=True)
class ExpiryResult:
    expired: int
    summaries: int
    #: False when the time budget ran out; the next tick continues.
    complete: bool = True
    mail_ids: tuple[int, ...] = field(default=(), repr=False)

    def __str__(self) -> str:
        return f"{self.expired} requests expired, {self.summaries} summaries queued"


def expire_due(
    session: Session,
    *,
    now: datetime,
    page_size: int = 1000,
    on_page: Callable[[list[int]], None] | None = None,
    time_budget_seconds: float = 300.0,
) -> ExpiryResult:
    """Expire every waiting request whose deadline has passed, then queue the summaries that are due.

    ``on_page`` runs after each page (the periodic job commits there); the caller commits at the end.
    """
    started = time.monotonic()
    expired, after = 0, 0
    complete = True
    while True:
        if time.monotonic() - started > time_budget_seconds:
            complete = False
            log(logger, logging.WARNING, "expiry tick stopped at its time budget", expired=expired)
            break
        ids = session.scalars(
            select(SigningRequest.id)
            .where(
                SigningRequest.status.in_(WAITING_FOR_RECIPIENT),
                SigningRequest.expires_at <= now,
                SigningRequest.id > after,
            )
            .order_by(SigningRequest.id)
            .limit(page_size)
        ).all()
        if not ids:
            break
        after = ids[-1]
        won = transition(session, ids, frm=WAITING_FOR_RECIPIENT, to=Status.EXPIRED, now=now).won
        if won:
            cancel_queued(session, request_ids=list(won), kinds=[REMINDER])
            batch_ids = session.scalars(
                select(SigningRequest.batch_id).where(SigningRequest.id.in_(won)).distinct()
            ).all()
            session.execute(
                update(Batch)
                .where(Batch.id.in_(batch_ids), Batch.expiry_pending_since.is_(None))
                .values(expiry_pending_since=now)
            )
            # An expired request is an outcome: a batch with nothing else left closes with this wave, after its
            # wave is marked, so its completion notice folds into the wave's summary (``queue_completion_notice``).
            refresh_batch_statuses(session, now=now, batch_ids=batch_ids)
        expired += len(won)
        if on_page:
            on_page([])
    mail_ids = queue_due_summaries(session, now=now)
    if on_page and mail_ids:
        on_page(mail_ids)
    if expired or mail_ids:
        log(logger, logging.INFO, "requests expired", expired=expired, summaries=len(mail_ids))
    return ExpiryResult(expired, len(mail_ids), complete, tuple(mail_ids))


def _wave_settled(session: Session, *, batch_id: int, since: datetime, now: datetime) -> bool:
    if since <= now - MAX_WAIT:
        return True
    more_soon = session.scalar(
        select(SigningRequest.id)
        .where(
            SigningRequest.batch_id == batch_id,
            SigningRequest.status.in_(WAITING_FOR_RECIPIENT),
            SigningRequest.expires_at <= now + SETTLE,
        )
        .limit(1)
    )
    return more_soon is None


def queue_due_summaries(session: Session, *, now: datetime) -> list[int]:
    """One summary mail per batch whose expiry wave has settled; returns the mail ids. The caller commits."""
    mail_ids = []
    pending = session.execute(
        select(Batch.id, Batch.expiry_pending_since).where(Batch.expiry_pending_since.is_not(None)).order_by(Batch.id)
    ).all()
    for batch_id, since in pending:
        if not _wave_settled(session, batch_id=batch_id, since=since, now=now):
            continue
        claimed = session.execute(
            update(Batch)
            .where(Batch.id == batch_id, Batch.expiry_pending_since == since)
            .values(expiry_pending_since=None, expiry_summary_sent_at=now)
            .returning(Batch.id)
        ).first()
        if claimed is None:
            continue  # another scheduler claimed this wave
        mail = _queue_summary(session, batch=session.get_one(Batch, batch_id), now=now)
        if mail is not None:
            mail_ids.append(mail.id)
    return mail_ids


def _wave_start(session: Session, *, batch_id: int, before: datetime) -> datetime | None:
    """When the previous summary of the batch went out: its expiries are not repeated."""
    return session.scalar(
        select(func.max(OutgoingMail.created_at)).where(
            OutgoingMail.batch_id == batch_id, OutgoingMail.kind == KIND, OutgoingMail.created_at < before
        )
    )


def _wave_query(session: Session, *, batch_id: int, until: datetime) -> Select[tuple[SigningRequest]]:
    start = _wave_start(session, batch_id=batch_id, before=until)
    query = select(SigningRequest).where(
        SigningRequest.batch_id == batch_id,
        SigningRequest.status == Status.EXPIRED.value,
        SigningRequest.status_changed_at <= until,
    )
    return query.where(SigningRequest.status_changed_at > start) if start else query


def _queue_summary(session: Session, *, batch: Batch, now: datetime) -> OutgoingMail | None:
    count = session.scalar(_wave_query(session, batch_id=batch.id, until=now).with_only_columns(func.count()))
    if not count:
        log(logger, logging.WARNING, "expiry summary not sent: nothing expired", batch_id=batch.id)
        return None
    number = 1 + (
        session.scalar(
            select(func.count())
            .select_from(OutgoingMail)
            .where(OutgoingMail.batch_id == batch.id, OutgoingMail.kind == KIND)
        )
        or 0
    )
    with force_locale(notice_locale(batch)):
        subject = ngettext(
            '%(num)s recipient did not sign "%(batch)s" before the deadline',
            '%(num)s recipients did not sign "%(batch)s" before the deadline',
            count,
            batch=batch.name,
        )
    return queue_notice(
        session, batch=batch, kind=KIND, key=f"expiry-summary-{batch.id}-{number}", now=now, subject=subject
    )


@builder(KIND)
def build_expiry_summary(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """The summary (to whoever the batch names): who did not sign in this wave, the batch's totals, a link to the batch page."""
    batch = notice_batch(session, mail)
    query = _wave_query(session, batch_id=batch.id, until=mail.created_at)
    total = session.scalar(query.with_only_columns(func.count())) or 0
    listed = session.scalars(query.order_by(SigningRequest.row_number, SigningRequest.id).limit(LISTED_MAX)).all()
    counts = counts_for(session, [batch.id])[batch.id]
    done = folded_completion(
        session,
        batch_id=batch.id,
        after=_wave_start(session, batch_id=batch.id, before=mail.created_at),
        until=mail.created_at,
    )
    with force_locale(notice_locale(batch)):
        lines = [
            _(
                'These recipients did not sign "%(batch)s" before the deadline; their links have expired:',
                batch=batch.name,
            ),
            "",
        ]
        lines += [f"- {r.name} <{r.email}>" if r.name else f"- {r.email}" for r in listed]
        if total > len(listed):
            lines.append(_("… and %(n)s more.", n=total - len(listed)))
        lines.append("")
        if done:
            # This wave closed the batch: the summary is also its completion notice (none went out on its own).
            lines += [*outcome_lines(session, batch=batch), ""]
        else:
            lines.append(
                _(
                    "Signed so far: %(signed)s of %(total)s.",
                    signed=counts.by_status[Status.SIGNED.value],
                    total=counts.total,
                )
            )
        lines += [
            _("You can resend with a new link from the batch page:"),
            f"{app.config['APP_URL']}/batches/{batch.id}",
        ]
    return notice_message(mail, app, body="\n".join(lines) + "\n")

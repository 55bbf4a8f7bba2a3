"""Creating a batch: the batch, its retention periods and all its requests in one transaction, then their render
jobs in bulk; an idempotency key makes a repeat return the first batch. docs/architecture/batches.md."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from redis.exceptions import RedisError
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bulksign.batches import approval, approval_requests
from bulksign.batches import counts as batch_counts
from bulksign.batches.batch_settings import BatchError, BatchSettings, PartySettings
from bulksign.batches.progress import close_if_done
from bulksign.batches.retention.periods import set_batch_retention
from bulksign.batches.skipped_rows import keep_skipped_rows
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.core.slicing import slices
from bulksign.doc_templates.roles import template_roles
from bulksign.models import Batch, Event, SigningRequest, Suppression, TemplateVersion, User
from bulksign.models.parties import RECIPIENT_ROLE
from bulksign.models.status import BatchStatus, Status
from bulksign.people import access
from bulksign.recipients.row_checks import RowError
from bulksign.recipients.suppressions import in_force_among, not_sent_reason
from bulksign.recipients.validation import Recipient
from bulksign.signing import parties
from bulksign.work import pipeline
from bulksign.work.queues import BATCH_RENDERS

logger = logging.getLogger(__name__)

#: Up to this many render jobs are queued inside the creating request (~2 s for 10,000); a bigger batch
#: gets one fan-out job instead, so a 100,000-row upload does not hold a web worker for half a minute.
INLINE_ENQUEUE_MAX = 10_000
#: Rows per INSERT statement where COPY is not available (SQLite).
INSERT_CHUNK = 2000


@dataclass(frozen=True)
class CreatedBatch:
    batch: Batch
    #: False when the idempotency key matched a batch created before.
    created: bool
    total_count: int
    #: Render jobs queued now; 0 on a repeat, for a batch left to the fan-out job, or when Redis was down
    #: (the reconciler queues them later).
    enqueued: int = 0
    #: Rows whose address is on the suppression list: created ``failed`` with the reason, not mailed.
    suppressed: int = 0


def find_by_key(session: Session, *, user_id: int, idempotency_key: str) -> Batch | None:
    """The batch this user created with this key, if any."""
    return session.scalar(select(Batch).where(Batch.created_by_id == user_id, Batch.idempotency_key == idempotency_key))


_COPY_COLUMNS = (
    "batch_id",
    "row_number",
    "email",
    "name",
    "phone",
    "data",
    "status",
    "status_changed_at",
    "created_at",
    "attempts",
    "reminder_count",
    "error_message",
)


def _insert_requests(
    session: Session, *, batch_id: int, rows: Sequence[Recipient], now: datetime, barred: Mapping[str, Suppression]
) -> list[int]:
    """Insert one request per row inside the session's transaction, in row order; returns their ids.

    Rows whose address is in ``barred`` (the suppression list) are ``failed`` at once with the reason: no
    document is rendered nor mail sent for them until an admin lifts the entry and staff retry them.
    """
    values = []
    for r in rows:
        entry = barred.get(r.email.lower())
        status, error = (Status.FAILED.value, not_sent_reason(entry)) if entry else (Status.PENDING.value, None)
        values.append((batch_id, r.row_number, r.email, r.name[:300], r.phone, r.data, status, now, now, 0, 0, error))
    if session.get_bind().dialect.name == "postgresql":
        # COPY is ~10x faster than multi-row INSERTs for 10,000+ rows (bench/bench_batch_creation.py).
        driver = session.connection().connection.driver_connection
        assert driver is not None  # a live connection has its driver's
        cursor = driver.cursor()
        with cursor.copy(f"COPY signing_requests ({', '.join(_COPY_COLUMNS)}) FROM STDIN") as copy:
            for row in values:
                copy.write_row(row[:5] + (json.dumps(row[5]),) + row[6:])
        return list(
            session.scalars(
                select(SigningRequest.id).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
            )
        )
    ids: list[int] = []
    for chunk in slices(values, INSERT_CHUNK):
        ids.extend(
            session.scalars(
                insert(SigningRequest).returning(SigningRequest.id),
                [dict(zip(_COPY_COLUMNS, row)) for row in chunk],
            )
        )
    return ids


def create_batch(
    session: Session,
    *,
    user: User,
    template_version: TemplateVersion,
    rows: Sequence[Recipient],
    settings: BatchSettings,
    now: datetime,
    idempotency_key: str | None = None,
    skipped: Sequence[RowError] = (),
    party_settings: PartySettings | None = None,
    upload_id: str | None = None,
) -> CreatedBatch:
    """Insert the batch, its retention periods and all its requests in one transaction (commits), then queue their
    renders. ``skipped``: the file's row errors, kept for the rows left out; ``party_settings``: fixed parties and
    routing (default routing when None); ``upload_id``: the stored file. Viewers get ``access.Refused``."""
    access.require_creator(user)
    try:
        team_id = access.team_for_new(
            session, user=user, team_id=settings.team_id, preferred=template_version.template.team_id
        )
    except access.Refused as exc:
        raise BatchError(exc.message, "team_id") from None
    if idempotency_key is not None:
        idempotency_key = idempotency_key.strip()[:200] or None
        existing = idempotency_key and find_by_key(session, user_id=user.id, idempotency_key=idempotency_key)
        if existing:
            return CreatedBatch(existing, created=False, total_count=existing.total_count)
    if not rows:
        raise BatchError(N_("There are no valid rows to create a batch from."))
    roles = template_roles(template_version)
    steps = party_settings.steps if party_settings is not None else parties.routing_steps(None, roles=roles)
    fixed = party_settings.fixed if party_settings is not None else {}
    for role in (r for r in roles if r != RECIPIENT_ROLE):
        if role not in fixed and any(role not in r.parties for r in rows):
            # The file check refuses this; a caller that did not give it the roles must not mail half a routing.
            raise BatchError(
                N_(
                    "No one signs as %(role)s on some rows: give the file %(role)s_email (and %(role)s_name) "
                    "columns, or one person for the whole batch in the parties field.",
                    role=role,
                ),
                "parties",
            )
    # Its team asks for a second pair of eyes: the batch waits, its requests pending with no job (``approval``).
    held = approval.required_for(session, team_id=team_id)
    batch = Batch(
        name=settings.name.strip()[:200],
        template_version_id=template_version.id,
        created_by_id=user.id,
        status=BatchStatus.AWAITING_APPROVAL if held else BatchStatus.PROCESSING,
        approval=approval.Approval.WAITING if held else None,
        language=settings.language,
        reminder_days=list(settings.reminder_days),
        max_reminders=settings.max_reminders,
        deadline_days=settings.deadline_days,
        reply_to=settings.reply_to,
        quiet_hours_start=settings.quiet_hours_start,
        quiet_hours_end=settings.quiet_hours_end,
        timezone=settings.timezone,
        total_count=len(rows),
        team_id=team_id,
        notify_email=settings.notify_email,
        one_time_code=settings.one_time_code,
        channel=settings.reach.value,
        # Every person with a phone may be texted: the row's recipient and its other parties.
        text_cap=settings.texts_allowed(
            phone_rows=sum(bool(r.phone) + sum(bool(p.phone) for p in {**fixed, **r.parties}.values()) for r in rows)
        ),
        idempotency_key=idempotency_key,
        upload_id=upload_id,
        created_at=now,
        started_at=None if held else now,
    )
    session.add(batch)
    try:
        session.flush()
    except IntegrityError:
        # Another request with the same key committed first (a double click): answer with its batch.
        session.rollback()
        existing = idempotency_key and find_by_key(session, user_id=user.id, idempotency_key=idempotency_key)
        if existing:
            return CreatedBatch(existing, created=False, total_count=existing.total_count)
        raise
    # Checked here, not only in the upload's preview: an address may have bounced since.
    barred = in_force_among(session, [r.email for r in rows])
    ids = _insert_requests(session, batch_id=batch.id, rows=rows, now=now, barred=barred)
    if len(roles) > 1:
        parties.add_parties(
            session,
            batch_id=batch.id,
            request_ids=ids,
            per_row=[r.parties for r in rows],
            fixed=fixed,
            steps=steps,
            now=now,
        )
    else:
        parties.add_recipients(session, batch_id=batch.id, now=now)
    batch.skipped_count = keep_skipped_rows(
        session, batch_id=batch.id, errors=skipped, kept_rows={r.row_number for r in rows}
    )
    suppressed = {i: barred[r.email.lower()] for i, r in zip(ids, rows) if r.email.lower() in barred}
    pending = [i for i in ids if i not in suppressed]
    batch_counts.seed(
        session, batch_id=batch.id, counts={Status.PENDING.value: len(pending), Status.FAILED.value: len(suppressed)}
    )
    session.add(
        Event(
            batch_id=batch.id,
            type="batch.created",
            created_at=now,
            actor=f"user:{user.id}",
            details={
                "total_count": len(rows),
                "template_version_id": template_version.id,
                "suppressed": len(suppressed),
                "skipped_rows": batch.skipped_count,
            },
        )
    )
    session.add_all(
        [
            Event(
                request_id=i,
                batch_id=batch.id,
                type="status.failed",
                created_at=now,
                actor="system",
                details={"suppressed": entry.source},
            )
            for i, entry in suppressed.items()
        ]
    )
    set_batch_retention(
        session,
        batch_id=batch.id,
        keep_signed_days=settings.keep_signed_days,
        keep_unsigned_days=settings.keep_unsigned_days,
    )
    if not pending and not held:
        close_if_done(session, batch_id=batch.id, now=now)
    if held:
        approval_requests.ask_approvers(session, batch=batch, now=now)
    session.commit()
    log(
        logger,
        logging.INFO,
        "batch created",
        batch_id=batch.id,
        total_count=len(rows),
        user_id=user.id,
        suppressed=len(suppressed),
    )
    enqueued = 0
    if held:
        try:
            pipeline.enqueue_sends(approval_requests.requested_mails(session, batch_id=batch.id))
        except RedisError as exc:
            # The mails are committed queued: the reconciler sends them when Redis is back.
            log(logger, logging.ERROR, "could not queue approval requests", batch_id=batch.id, error=str(exc))
        return CreatedBatch(batch, created=True, total_count=len(rows), suppressed=len(suppressed))
    try:
        if len(pending) <= INLINE_ENQUEUE_MAX:
            enqueued = pipeline.enqueue_renders(pending)
        else:
            BATCH_RENDERS.enqueue_unique([batch.id])
    except RedisError as exc:
        # The requests are committed in ``pending``: the reconciler queues them when Redis is back.
        log(logger, logging.ERROR, "could not queue renders", batch_id=batch.id, error=str(exc))
    return CreatedBatch(batch, created=True, total_count=len(rows), enqueued=enqueued, suppressed=len(suppressed))


def enqueue_pending_renders(session: Session, *, batch_id: int) -> int:
    """Queue the render job of each pending request of the batch (existing jobs are skipped)."""
    ids = list(
        session.scalars(
            select(SigningRequest.id)
            .where(SigningRequest.batch_id == batch_id, SigningRequest.status == Status.PENDING.value)
            .order_by(SigningRequest.id)
        )
    )
    enqueued = pipeline.enqueue_renders(ids)
    log(logger, logging.INFO, "renders queued", batch_id=batch_id, enqueued=enqueued, pending=len(ids))
    return enqueued

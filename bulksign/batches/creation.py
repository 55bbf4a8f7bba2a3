"""Creating a batch: all its requests in one transaction, then their render jobs in bulk.

The rows come from ``recipients.validate_recipients`` (valid rows only). An idempotency key
(the API's ``Idempotency-Key`` header, or the form's one-time token for a double click) makes a
repeat return the batch the first call created: the unique constraint on
``batches(created_by_id, idempotency_key)`` settles a race between two concurrent requests.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import available_timezones

from redis.exceptions import RedisError
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bulksign.batches import approval
from bulksign.batches import counts as batch_counts
from bulksign.batches.notices import NoticeAddressError, chosen_notice_address
from bulksign.batches.progress import close_if_done
from bulksign.batches.skipped_rows import keep_skipped_rows
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.doc_templates.roles import template_roles
from bulksign.mail.email_checks import check_email
from bulksign.mail.mail_headers import CONTROL_CHARACTERS
from bulksign.models import Batch, Event, SigningRequest, Suppression, TemplateVersion, User
from bulksign.models.parties import RECIPIENT_ROLE
from bulksign.models.status import BatchStatus, Status
from bulksign.people import access
from bulksign.recipients.parties import PartyError, PartyPerson, fixed_parties
from bulksign.recipients.row_checks import RowError
from bulksign.recipients.suppressions import in_force_among, not_sent_reason
from bulksign.recipients.validation import Recipient
from bulksign.signing import parties
from bulksign.work import pipeline
from bulksign.work.queues import BATCH_RENDERS

logger = logging.getLogger(__name__)

LANGUAGES = ("en", "ru")
MAX_REMINDERS = 5
MAX_DEADLINE_DAYS = 365
#: Up to this many render jobs are queued inside the creating request (~2 s for 10,000); a bigger batch
#: gets one fan-out job instead, so a 100,000-row upload does not hold a web worker for half a minute.
INLINE_ENQUEUE_MAX = 10_000
#: Rows per INSERT statement where COPY is not available (SQLite).
INSERT_CHUNK = 2000


class BatchError(ValueError):
    """A setting or the rows cannot make a batch; ``field`` names the form field when there is one."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field


@dataclass(frozen=True)
class BatchSettings:
    name: str
    deadline_days: int = 7
    reminder_days: tuple[int, ...] = (2, 4)
    max_reminders: int = 3
    reply_to: str | None = None
    language: str = "en"
    quiet_hours_start: int | None = None
    quiet_hours_end: int | None = None
    timezone: str = "UTC"
    #: Who gets the expiry summary, decline notices and the completion notice (a team manager or any
    #: address); None: the owner.
    notify_email: str | None = None
    #: The team the batch belongs to; None: the template's team if the user is in it, else the user's first.
    team_id: int | None = None
    #: Recipients confirm a one-time code (SMS when the row has a phone, else mail) before they can sign.
    one_time_code: bool = False

    def as_kwargs(self) -> dict:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


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


def _whole_number(raw, field: str, label: N_, low: int, high: int) -> int:
    try:
        value = int(str(raw).strip())
    except (TypeError, ValueError):
        raise BatchError(N_("%(label)s must be a whole number.", label=label), field) from None
    if not low <= value <= high:
        raise BatchError(N_("%(label)s must be between %(low)s and %(high)s.", label=label, low=low, high=high), field)
    return value


def settings_from_form(form: Mapping[str, str], *, default_name: str) -> BatchSettings:
    """Batch settings from form or multipart fields (all strings), with the defaults for what is blank."""

    def given(key: str) -> str:
        return (form.get(key) or "").strip()

    name = given("name") or default_name
    if len(name) > 200:
        raise BatchError(N_("The batch name is longer than 200 characters."), "name")
    if CONTROL_CHARACTERS.search(name):  # the name goes into the subject of the owner's notices
        raise BatchError(N_("The batch name may not contain line breaks or other control characters."), "name")
    deadline = _whole_number(given("deadline_days") or 7, "deadline_days", N_("Deadline (days)"), 1, MAX_DEADLINE_DAYS)
    raw_days = given("reminder_days") if form.get("reminder_days") is not None else "2,4"
    days: list[int] = []
    for part in raw_days.replace(";", ",").replace(" ", ",").split(","):
        if part:
            days.append(_whole_number(part, "reminder_days", N_("Each reminder day"), 1, MAX_DEADLINE_DAYS))
    if len(days) > MAX_REMINDERS:
        raise BatchError(N_("Give at most %(n)s reminder days.", n=MAX_REMINDERS), "reminder_days")
    late = sorted(d for d in days if d >= deadline)
    if late:
        raise BatchError(
            N_(
                "Reminder days must come before the deadline (day %(deadline)s); day %(day)s is not.",
                deadline=deadline,
                day=late[0],
            ),
            "reminder_days",
        )
    # Blank: one reminder for each day given; 0: none. A maximum between would leave the last days without one.
    max_reminders = _whole_number(
        given("max_reminders") or len(set(days)), "max_reminders", N_("Maximum reminders"), 0, MAX_REMINDERS
    )
    if 0 < max_reminders < len(set(days)):
        raise BatchError(
            N_(
                "Reminders on days %(days)s need a maximum of at least %(n)s; raise it, or remove days.",
                days=", ".join(map(str, sorted(set(days)))),
                n=len(set(days)),
            ),
            "max_reminders",
        )
    reply_to = given("reply_to") or None
    if reply_to:
        reply_to, problem = check_email(reply_to)
        if problem:
            raise BatchError(N_("Reply-to: %(problem)s", problem=problem), "reply_to")
    try:
        notify_email = chosen_notice_address(choice=given("notify_to"), email=given("notify_email"))
    except NoticeAddressError as exc:
        raise BatchError(N_("Notices to: %(problem)s", problem=exc.args[0]), "notify_email") from None
    team_id = _whole_number(given("team_id"), "team_id", N_("Team"), 1, 2**31 - 1) if given("team_id") else None
    language = given("language") or "en"
    if language not in LANGUAGES:
        raise BatchError(
            N_("The recipients' language must be one of %(known)s.", known=", ".join(LANGUAGES)), "language"
        )
    start, end = given("quiet_hours_start"), given("quiet_hours_end")
    if bool(start) != bool(end):
        raise BatchError(N_("Give both the start and the end of the quiet hours, or neither."), "quiet_hours_start")
    quiet = (None, None)
    if start:
        quiet = (
            _whole_number(start, "quiet_hours_start", N_("Quiet hours start"), 0, 23),
            _whole_number(end, "quiet_hours_end", N_("Quiet hours end"), 0, 23),
        )
        if quiet[0] == quiet[1]:
            raise BatchError(N_("Quiet hours must start and end at different hours."), "quiet_hours_end")
    timezone = given("timezone") or "UTC"
    # By name from the list, not by trying ZoneInfo: "America" is a folder of the zone database (an OSError).
    if timezone not in _time_zones():
        raise BatchError(
            N_("Unknown time zone %(value)r; use a name such as Europe/Berlin.", value=timezone[:60]), "timezone"
        )
    one_time_code = given("one_time_code").lower()
    if one_time_code not in ("", "0", "false", "no", "off", "1", "true", "yes", "on"):
        raise BatchError(N_("“Ask for a one-time code” must be true or false."), "one_time_code")
    return BatchSettings(
        name=name,
        deadline_days=deadline,
        reminder_days=tuple(sorted(set(days))),
        max_reminders=max_reminders,
        reply_to=reply_to,
        language=language,
        quiet_hours_start=quiet[0],
        quiet_hours_end=quiet[1],
        timezone=timezone,
        notify_email=notify_email,
        team_id=team_id,
        one_time_code=one_time_code in ("1", "true", "yes", "on"),
    )


@dataclass(frozen=True)
class PartySettings:
    """Who signs a template's other roles for the whole batch, and in which order every role signs."""

    #: Every role of the template, the recipient among them (``roles.template_roles``).
    roles: tuple[str, ...]
    #: Role → the batch's fixed party (``recipients.parties.fixed_parties``); a role not here is named per row.
    fixed: Mapping[str, PartyPerson]
    #: Role → its step from 0 (``signing.parties.routing_steps``).
    steps: Mapping[str, int]

    @property
    def file_check(self) -> dict:
        """What ``validate_recipients`` takes of them: the roles each row names, or the batch does once."""
        return {"roles": self.roles, "fixed_roles": tuple(self.fixed)}


def party_settings_from_form(form: Mapping[str, str], *, version: TemplateVersion) -> PartySettings:
    """The fixed parties and routing of a new batch from its form or API fields: ``parties`` (JSON role →
    ``{"email", "name", "phone"}``) or the web form's ``party_<role>_email`` (``_name``, ``_phone``) fields, and
    ``routing`` (JSON list of steps). BatchError naming the field for what cannot be used."""
    roles = template_roles(version)
    given: str | dict = (form.get("parties") or "").strip()
    if not given:
        given = {
            role: {
                part: (form.get(f"party_{role}_{part}") or "").strip() or None for part in ("email", "name", "phone")
            }
            for role in roles
            if role != RECIPIENT_ROLE and (form.get(f"party_{role}_email") or "").strip()
        }
    try:
        fixed = fixed_parties(given, roles=roles)
        steps = parties.routing_steps((form.get("routing") or "").strip() or None, roles=roles)
    except PartyError as exc:
        raise BatchError(exc.message, "parties") from None
    except parties.RoutingError as exc:
        raise BatchError(exc.message, "routing") from None
    return PartySettings(roles=tuple(roles), fixed=fixed, steps=steps)


@functools.cache
def _time_zones() -> frozenset[str]:
    return frozenset(available_timezones())


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
        cursor = session.connection().connection.driver_connection.cursor()
        with cursor.copy(f"COPY signing_requests ({', '.join(_COPY_COLUMNS)}) FROM STDIN") as copy:
            for row in values:
                copy.write_row(row[:5] + (json.dumps(row[5]),) + row[6:])
        return list(
            session.scalars(
                select(SigningRequest.id).where(SigningRequest.batch_id == batch_id).order_by(SigningRequest.id)
            )
        )
    ids: list[int] = []
    for start in range(0, len(values), INSERT_CHUNK):
        ids.extend(
            session.scalars(
                insert(SigningRequest).returning(SigningRequest.id),
                [dict(zip(_COPY_COLUMNS, row)) for row in values[start : start + INSERT_CHUNK]],
            )
        )
    return ids


def create_batch(
    session: Session,
    *,
    user: User,
    template_version: TemplateVersion,
    rows: Sequence[Recipient],
    name: str,
    now: datetime,
    deadline_days: int = 7,
    reminder_days: Sequence[int] = (2, 4),
    max_reminders: int = 3,
    reply_to: str | None = None,
    language: str = "en",
    quiet_hours_start: int | None = None,
    quiet_hours_end: int | None = None,
    timezone: str = "UTC",
    notify_email: str | None = None,
    team_id: int | None = None,
    one_time_code: bool = False,
    idempotency_key: str | None = None,
    skipped: Sequence[RowError] = (),
    party_settings: PartySettings | None = None,
) -> CreatedBatch:
    """Insert the batch and all its requests in one transaction (commits), then queue their renders.

    ``skipped``: the file's row errors; the rows they name that are not among ``rows`` are kept with the batch
    (``skipped_rows``), for its page and the API to tell what was left out and why.

    ``party_settings``: for a template several parties sign (``party_settings_from_form``), the batch's fixed
    parties and its routing; each request gets a party per role, waiting at its step (default routing when None).

    The batch belongs to ``team_id`` (one of the user's teams), else to the template's team when the
    user is in it, else to the user's first team. Viewers are refused (``access.Refused``, 403).
    """
    access.require_creator(user)
    try:
        team_id = access.team_for_new(session, user=user, team_id=team_id, preferred=template_version.template.team_id)
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
        name=name.strip()[:200],
        template_version_id=template_version.id,
        created_by_id=user.id,
        status=BatchStatus.AWAITING_APPROVAL if held else BatchStatus.PROCESSING,
        approval=approval.WAITING if held else None,
        language=language,
        reminder_days=list(reminder_days),
        max_reminders=max_reminders,
        deadline_days=deadline_days,
        reply_to=reply_to,
        quiet_hours_start=quiet_hours_start,
        quiet_hours_end=quiet_hours_end,
        timezone=timezone,
        total_count=len(rows),
        team_id=team_id,
        notify_email=notify_email,
        one_time_code=one_time_code,
        idempotency_key=idempotency_key,
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
    if not pending and not held:
        close_if_done(session, batch_id=batch.id, now=now)
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

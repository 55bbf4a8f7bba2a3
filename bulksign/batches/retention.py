"""Retention: how long a batch keeps its documents and the personal data of its rows, legal holds that stop it,
what the next purge removes, and the purge itself.

A signed request is kept ``keep_signed_days`` after signing (default: for ever); an unsigned one that ended
(declined, expired, cancelled, failed, bounced) ``keep_unsigned_days`` after it ended (default 90). The team sets
both (``TeamRetention``), a batch may set its own (``BatchRetention``); a batch on legal hold is never purged.

A purge deletes the request's files from storage (its documents and their page images) and empties its personal
fields, those of its parties, events, outgoing mails and one-time codes. What stays is the proof: the ids, times, status
and event types, and the ``documents`` rows with the sha256 of the original and signed PDFs and the seal's
fingerprint, so ``/verify`` of a kept copy still answers and the batch's counts stay true. Files go first, the rows
after, one chunk per commit: a purge killed midway leaves each request either untouched or purged, and a run
again deletes what is left (a missing file is no error) and marks nothing twice (``purged_at IS NULL``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, delete, func, insert, or_, select, update
from sqlalchemy.orm import Session

from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.core.slicing import slices
from bulksign.documents.document_pages import pages_folder
from bulksign.documents.storage import Storage
from bulksign.models import (
    Batch,
    Document,
    Event,
    Export,
    OneTimeCode,
    OutgoingMail,
    Party,
    SigningRequest,
    Team,
    User,
)
from bulksign.models.batches import BatchRetention, BatchSkippedRow, TeamRetention
from bulksign.models.status import Status

logger = logging.getLogger(__name__)

#: Days an unsigned request is kept after it ended when neither its team nor its batch says otherwise.
DEFAULT_KEEP_UNSIGNED_DAYS = 90
#: The longest period that can be set (about a century): "for ever" is said by no number.
MAX_DAYS = 36500
#: How an unsigned request can end: nobody will sign it unless staff send it again.
UNSIGNED_ENDED = frozenset({Status.DECLINED, Status.EXPIRED, Status.CANCELLED, Status.FAILED, Status.BOUNCED})
#: Requests purged per transaction: their files are deleted, then their rows emptied and committed.
CHUNK = 100
#: Requests one run purges at most; the next run (an hour later) goes on.
MAX_PER_RUN = 20_000
MAX_REASON = 500
#: ``Event.type`` of a purged request, and of a batch's hold placed and lifted.
PURGED_EVENT = "data.purged"
HOLD_PLACED = "batch.hold_placed"
HOLD_LIFTED = "batch.hold_lifted"
#: What an export deleted with its batch's purged requests says on the batch page.
EXPORT_PURGED = "Deleted under the retention rules: build it again from what is kept."


class RetentionError(ValueError):
    """Input a person can correct; the message (a ``N_`` message id) says how."""


@dataclass(frozen=True)
class Policy:
    #: None: signed documents are kept for ever.
    keep_signed_days: int | None
    keep_unsigned_days: int
    #: When the batch went on legal hold; None: no hold.
    held_at: datetime | None = None
    hold_reason: str | None = None

    def signed_until(self, signed_at: datetime) -> datetime | None:
        """Until when a request signed at ``signed_at`` is kept; None: for ever."""
        return None if self.keep_signed_days is None else signed_at + timedelta(days=self.keep_signed_days)


def check_days(value, *, name: str, allow_forever: bool = False) -> int | None:
    """``value`` as a number of days (1 to ``MAX_DAYS``); None or "" (or "forever") is None where ``allow_forever``."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "forever")):
        if allow_forever:
            return None
        raise RetentionError(N_("Give %(name)s as a number of days from 1 to %(n)s.", name=name, n=MAX_DAYS))
    try:
        days = int(value)
    except (TypeError, ValueError):
        days = 0
    if isinstance(value, bool) or not 1 <= days <= MAX_DAYS:
        raise RetentionError(N_("Give %(name)s as a number of days from 1 to %(n)s.", name=name, n=MAX_DAYS))
    return days


def batch_days_from_form(form: Mapping[str, str]) -> tuple[int | None, int | None]:
    """A new batch's own ``keep_signed_days`` and ``keep_unsigned_days`` from form or multipart fields; blank: the
    team's. RetentionError (its ``args[1]`` the field) for anything but 1 to ``MAX_DAYS``."""
    days: list[int | None] = []
    for field, label in (
        ("keep_signed_days", N_("Keep signed documents")),
        ("keep_unsigned_days", N_("Keep unsigned requests")),
    ):
        raw = (form.get(field) or "").strip()
        try:
            days.append(check_days(raw, name=label) if raw else None)
        except RetentionError as exc:
            raise RetentionError(exc.args[0], field) from None
    return days[0], days[1]


def team_policy(session: Session, *, team_id: int | None) -> Policy:
    row = session.get(TeamRetention, team_id) if team_id is not None else None
    if row is None:
        return Policy(keep_signed_days=None, keep_unsigned_days=DEFAULT_KEEP_UNSIGNED_DAYS)
    return Policy(keep_signed_days=row.keep_signed_days, keep_unsigned_days=row.keep_unsigned_days)


def team_policies(session: Session) -> list[tuple[Team, Policy]]:
    """Every team by name with its periods (the defaults where it set none), for the admins' page."""
    rows = session.execute(
        select(Team, TeamRetention).outerjoin(TeamRetention, TeamRetention.team_id == Team.id).order_by(Team.name)
    ).all()
    default = Policy(keep_signed_days=None, keep_unsigned_days=DEFAULT_KEEP_UNSIGNED_DAYS)
    return [
        (team, default if row is None else Policy(row.keep_signed_days, row.keep_unsigned_days)) for team, row in rows
    ]


def set_team_retention(
    session: Session, *, team: Team, keep_signed_days: int | None, keep_unsigned_days: int, now: datetime
) -> Policy:
    """The team's periods (checked by ``check_days``), for its batches that set none of their own."""
    row = session.get(TeamRetention, team.id) or TeamRetention(team_id=team.id)
    row.keep_signed_days, row.keep_unsigned_days, row.updated_at = keep_signed_days, keep_unsigned_days, now
    session.add(row)
    session.flush()
    log(
        logger,
        logging.INFO,
        "team retention set",
        team_id=team.id,
        signed=keep_signed_days,
        unsigned=keep_unsigned_days,
    )
    return team_policy(session, team_id=team.id)


def set_batch_retention(
    session: Session, *, batch_id: int, keep_signed_days: int | None, keep_unsigned_days: int | None
) -> None:
    """A batch's own periods (None: the team's); nothing is written when it sets neither."""
    row = session.get(BatchRetention, batch_id)
    if row is None and keep_signed_days is None and keep_unsigned_days is None:
        return
    row = row or BatchRetention(batch_id=batch_id)
    row.keep_signed_days, row.keep_unsigned_days = keep_signed_days, keep_unsigned_days
    session.add(row)
    session.flush()


def policies(session: Session, batch_ids: Iterable[int] | None = None) -> dict[int, Policy]:
    """Every batch's policy (or those of ``batch_ids``) in one query: its own periods over its team's, its hold."""
    query = (
        select(
            Batch.id,
            BatchRetention.keep_signed_days,
            BatchRetention.keep_unsigned_days,
            BatchRetention.held_at,
            BatchRetention.hold_reason,
            TeamRetention.team_id,
            TeamRetention.keep_signed_days,
            TeamRetention.keep_unsigned_days,
        )
        .outerjoin(BatchRetention, BatchRetention.batch_id == Batch.id)
        .outerjoin(TeamRetention, TeamRetention.team_id == Batch.team_id)
    )
    if batch_ids is not None:
        query = query.where(Batch.id.in_(list(batch_ids)))
    found = {}
    for batch_id, own_signed, own_unsigned, held_at, reason, team_row, team_signed, team_unsigned in session.execute(
        query
    ):
        signed = own_signed if own_signed is not None else (team_signed if team_row is not None else None)
        unsigned = own_unsigned or (team_unsigned if team_row is not None else DEFAULT_KEEP_UNSIGNED_DAYS)
        found[batch_id] = Policy(signed, unsigned, held_at=held_at, hold_reason=reason)
    return found


def _due_condition(policy: Policy, *, now: datetime):
    """The requests of a batch under ``policy`` whose time has passed at ``now`` (not yet purged)."""
    unsigned = and_(
        SigningRequest.status.in_([s.value for s in UNSIGNED_ENDED]),
        SigningRequest.status_changed_at <= now - timedelta(days=policy.keep_unsigned_days),
    )
    if policy.keep_signed_days is not None:
        signed = and_(
            SigningRequest.status == Status.SIGNED.value,
            SigningRequest.signed_at <= now - timedelta(days=policy.keep_signed_days),
        )
        unsigned = or_(unsigned, signed)
    return and_(SigningRequest.purged_at.is_(None), unsigned)


def _by_policy(session: Session) -> dict[Policy, list[int]]:
    """Batch ids not on hold, grouped by their periods: one query per group finds what is due."""
    groups: dict[Policy, list[int]] = {}
    for batch_id, policy in policies(session).items():
        if policy.held_at is None:
            groups.setdefault(Policy(policy.keep_signed_days, policy.keep_unsigned_days), []).append(batch_id)
    return groups


def due_ids(session: Session, *, now: datetime, limit: int) -> list[int]:
    """Up to ``limit`` ids of requests whose time has passed, by id."""
    found: list[int] = []
    for policy, batch_ids in _by_policy(session).items():
        for chunk in slices(batch_ids):
            found.extend(
                session.scalars(
                    select(SigningRequest.id)
                    .where(SigningRequest.batch_id.in_(chunk), _due_condition(policy, now=now))
                    .order_by(SigningRequest.id)
                    .limit(limit)
                )
            )
    return sorted(found)[:limit]


@dataclass(frozen=True)
class BatchDue:
    """What the next purge removes of one batch."""

    batch_id: int
    batch_name: str
    signed: int
    unsigned: int


def preview(session: Session, *, now: datetime) -> list[BatchDue]:
    """Per batch, how many signed and unsigned requests a purge at ``now`` would remove, biggest first."""
    counts: dict[int, list[int]] = {}
    for policy, batch_ids in _by_policy(session).items():
        for chunk in slices(batch_ids):
            for batch_id, status, n in session.execute(
                select(SigningRequest.batch_id, SigningRequest.status, func.count())
                .where(SigningRequest.batch_id.in_(chunk), _due_condition(policy, now=now))
                .group_by(SigningRequest.batch_id, SigningRequest.status)
            ):
                counts.setdefault(batch_id, [0, 0])[0 if status == Status.SIGNED.value else 1] += n
    names = dict(session.execute(select(Batch.id, Batch.name).where(Batch.id.in_(list(counts)))).tuples().all())
    return sorted(
        (BatchDue(batch_id=b, batch_name=names[b], signed=s, unsigned=u) for b, (s, u) in counts.items()),
        key=lambda d: (-(d.signed + d.unsigned), d.batch_id),
    )


@dataclass(frozen=True)
class PurgeResult:
    requests: int = 0
    documents: int = 0
    #: Files deleted from storage (documents and page images; a file already gone counts too).
    files: int = 0
    #: Rows of recipients files left out at creation (``batch_skipped_rows``), deleted with their cells.
    skipped_rows: int = 0


def _delete_files(storage: Storage, document: Document) -> int:
    """Delete a document's page images, their manifest, then the document: a rerun after a kill finds the rest."""
    folder = pages_folder(document)
    deleted = 0
    manifest = f"{folder}/pages.json"
    if storage.exists(manifest):
        pages = len(json.loads(storage.get(manifest)).get("pages", ()))
        for number in range(1, pages + 1):
            storage.delete(f"{folder}/{number}.webp")
            deleted += 1
        storage.delete(manifest)
        deleted += 1
    storage.delete(document.storage_key)
    return deleted + 1


def purge_requests(
    session: Session, *, storage: Storage, request_ids: list[int], now: datetime, reason: str, actor: str = "system"
) -> PurgeResult:
    """Purge these requests now (those not purged yet): files first, then the personal data of their rows.

    ``reason``: ``retention`` or ``erasure``, kept in each request's ``data.purged`` event. The caller commits.
    Field values and signers' attachments are purged here too once requests have them.
    """
    ids = sorted(
        session.scalars(
            select(SigningRequest.id).where(SigningRequest.id.in_(request_ids), SigningRequest.purged_at.is_(None))
        )
    )
    if not ids:
        return PurgeResult()
    documents = session.scalars(select(Document).where(Document.request_id.in_(ids))).all()
    files = sum(_delete_files(storage, document) for document in documents)
    # A signed ZIP or evidence package of the batch holds copies of these documents and names their people: it goes
    # too (staff build it again from what is left).
    batch_ids = set(session.scalars(select(SigningRequest.batch_id).where(SigningRequest.id.in_(ids))))
    exports = session.scalars(
        select(Export).where(Export.batch_id.in_(batch_ids), Export.storage_key.is_not(None), Export.created_at <= now)
    ).all()
    for export in exports:
        storage.delete(export.storage_key)
        export.storage_key, export.status, export.error = None, "failed", EXPORT_PURGED
    files += len(exports)
    # The rows' stored mail attachments are the documents above: their list goes with the addresses.
    session.execute(
        update(OutgoingMail)
        .where(OutgoingMail.request_id.in_(ids))
        .values(to_email="", subject="", error=None, attachments=[])
    )
    session.execute(update(OneTimeCode).where(OneTimeCode.request_id.in_(ids)).values(destination=""))
    # Every party who signs the document (the row's recipient and the other roles): who they are and how they signed.
    session.execute(
        update(Party)
        .where(Party.request_id.in_(ids))
        .values(
            email=None,
            name=None,
            phone=None,
            decline_reason=None,
            signer_name=None,
            signer_ip=None,
            signature_image=None,
            token_nonce=None,
        )
    )
    # What an event says beyond its type, time and actor may name a person (an old address, a typed reason).
    session.execute(update(Event).where(Event.request_id.in_(ids)).values(ip=None, user_agent=None, details={}))
    purged = session.execute(
        update(SigningRequest)
        .where(SigningRequest.id.in_(ids), SigningRequest.purged_at.is_(None))
        .values(
            email="",
            name="",
            phone=None,
            data={},
            decline_reason=None,
            signer_name=None,
            signer_ip=None,
            signature_image=None,
            error_message=None,
            token_nonce=None,
            purged_at=now,
        )
        .returning(SigningRequest.id, SigningRequest.batch_id)
    ).all()
    if purged:
        session.execute(
            insert(Event),
            [
                {
                    "request_id": rid,
                    "batch_id": bid,
                    "type": PURGED_EVENT,
                    "created_at": now,
                    "actor": actor,
                    "details": {"reason": reason},
                }
                for rid, bid in purged
            ],
        )
    return PurgeResult(requests=len(purged), documents=len(documents), files=files)


def purge_due(
    session: Session, *, storage: Storage, now: datetime, on_page: Callable[[], None], max_requests: int = MAX_PER_RUN
) -> PurgeResult:
    """Purge every request whose time has passed (at most ``max_requests``), ``on_page`` (a commit) after each chunk."""
    total = PurgeResult()
    while total.requests < max_requests:
        ids = due_ids(session, now=now, limit=min(CHUNK, max_requests - total.requests))
        if not ids:
            break
        done = purge_requests(session, storage=storage, request_ids=ids, now=now, reason="retention")
        on_page()
        total = PurgeResult(
            requests=total.requests + done.requests,
            documents=total.documents + done.documents,
            files=total.files + done.files,
        )
        if not done.requests:  # every id found was purged by a parallel run meanwhile
            break
    # Rows left out at creation were never sent: they end with the batch's creation. Its count of them stays.
    skipped = 0
    for policy, batch_ids in _by_policy(session).items():
        old = select(Batch.id).where(Batch.created_at <= now - timedelta(days=policy.keep_unsigned_days))
        for chunk in slices(batch_ids):
            gone = delete(BatchSkippedRow).where(BatchSkippedRow.batch_id.in_(old.where(Batch.id.in_(chunk))))
            skipped += session.execute(gone).rowcount
    on_page()
    total = PurgeResult(total.requests, total.documents, total.files, skipped_rows=skipped)
    if total.requests or skipped:
        log(
            logger,
            logging.INFO,
            "retention purge",
            requests=total.requests,
            documents=total.documents,
            files=total.files,
            skipped_rows=skipped,
        )
    return total


def place_hold(session: Session, *, batch_id: int, reason: str, by: User | None, now: datetime) -> None:
    """Put the batch on legal hold: no purge and no erasure touches it until ``lift_hold``. The caller commits."""
    reason = " ".join((reason or "").split())
    if not reason or len(reason) > MAX_REASON:
        raise RetentionError(N_("Say why the batch is held (1 to %(n)s characters).", n=MAX_REASON))
    row = session.get(BatchRetention, batch_id) or BatchRetention(batch_id=batch_id)
    if row.held_at is not None:
        raise RetentionError(N_("The batch is on legal hold already."))
    row.held_at, row.hold_reason, row.held_by_id = now, reason, by.id if by else None
    session.add(row)
    _batch_event(session, batch_id=batch_id, type=HOLD_PLACED, by=by, now=now, details={"reason": reason})
    log(logger, logging.INFO, "legal hold placed", batch_id=batch_id)


def lift_hold(session: Session, *, batch_id: int, reason: str, by: User | None, now: datetime) -> None:
    """End the batch's legal hold: the next purge takes what has passed its time. The caller commits."""
    reason = " ".join((reason or "").split())
    if not reason or len(reason) > MAX_REASON:
        raise RetentionError(N_("Say why the hold is lifted (1 to %(n)s characters).", n=MAX_REASON))
    row = session.get(BatchRetention, batch_id)
    if row is None or row.held_at is None:
        raise RetentionError(N_("The batch is not on legal hold."))
    row.held_at, row.hold_reason, row.held_by_id = None, None, None
    _batch_event(session, batch_id=batch_id, type=HOLD_LIFTED, by=by, now=now, details={"reason": reason})
    log(logger, logging.INFO, "legal hold lifted", batch_id=batch_id)


def _batch_event(session: Session, *, batch_id: int, type: str, by: User | None, now: datetime, details: dict) -> None:
    actor = f"user:{by.id}" if by else "cli"
    session.add(Event(batch_id=batch_id, request_id=None, type=type, created_at=now, actor=actor, details=details))
    session.flush()


@dataclass(frozen=True)
class HeldBatch:
    batch_id: int
    batch_name: str
    held_at: datetime
    reason: str


def holds(session: Session) -> list[HeldBatch]:
    """Batches on legal hold, latest first."""
    return [
        HeldBatch(batch_id=b, batch_name=n, held_at=t, reason=r or "")
        for b, n, t, r in session.execute(
            select(Batch.id, Batch.name, BatchRetention.held_at, BatchRetention.hold_reason)
            .join(BatchRetention, BatchRetention.batch_id == Batch.id)
            .where(BatchRetention.held_at.is_not(None))
            .order_by(BatchRetention.held_at.desc())
        )
    ]

"""What the staff dashboard shows: batch lists, the recipients table (keyset pages), timelines, progress.

Counts come from the per-batch counters (one query on their key per page, ``batches.counts_for``). The
recipients table is paged by keyset (``WHERE (sort, id) > (:last_sort, :last_id)``) with an
opaque cursor, never OFFSET: page 2,000 of a 100,000-row batch costs what page 1 costs.
"""
from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from flask_babel import lazy_gettext as _l
from sqlalchemy import func, literal, or_, select, tuple_
from sqlalchemy.orm import Session, defer

from bulksign.people import access
from bulksign.batches.progress import BatchCounts, counts_for
from bulksign.models import Batch, DocumentTemplate, Event, OutgoingMail, SigningRequest, TemplateVersion, User
from bulksign.core.slicing import slices
from bulksign.batches.status import BATCH_FINAL, WORKING, BatchStatus, Status
from bulksign.core.messages import N_

#: Words for request and batch states, and for the table's extra filters.
STATUS_LABELS = {
    "pending": _l("pending"), "generating": _l("generating"), "generated": _l("generated"),
    "sending": _l("sending"), "sent": _l("sent"), "opened": _l("opened"), "signed": _l("signed"),
    "declined": _l("declined"), "expired": _l("expired"), "failed": _l("failed"), "bounced": _l("bounced"),
    "cancelled": _l("cancelled"), "processing": _l("processing"), "completed": _l("completed"),
    "partially_failed": _l("partially failed"), "not_opened": _l("sent, not opened"),
    "waiting": _l("being prepared or sent"), "problems": _l("failed or bounced"),
}

#: Words for timeline entries (event types and mail kinds); unknown ones show as they are.
EVENT_LABELS = {
    **{f"status.{k}": v for k, v in STATUS_LABELS.items()},
    "email.opened": _l("invitation mail opened"), "page.opened": _l("signing page opened"),
    "email.changed": _l("email address changed"), "link.issued": _l("new signing link issued"),
    "mail.invitation": _l("invitation mail"), "mail.reminder": _l("reminder mail"),
    "mail.confirmation": _l("confirmation mail"), "mail.decline_notice": _l("decline notice mail"),
}

#: Segments of the progress bar, in order; ``waiting`` is every state the pipeline still works on.
PROGRESS_SEGMENTS: tuple[tuple[str, object, tuple[str, ...]], ...] = (
    ("signed", STATUS_LABELS["signed"], (Status.SIGNED,)),
    ("opened", STATUS_LABELS["opened"], (Status.OPENED,)),
    ("sent", STATUS_LABELS["sent"], (Status.SENT,)),
    ("declined", STATUS_LABELS["declined"], (Status.DECLINED,)),
    ("expired", STATUS_LABELS["expired"], (Status.EXPIRED,)),
    ("failed", STATUS_LABELS["failed"], (Status.FAILED,)),
    ("bounced", STATUS_LABELS["bounced"], (Status.BOUNCED,)),
    ("cancelled", STATUS_LABELS["cancelled"], (Status.CANCELLED,)),
    ("waiting", _l("waiting"), tuple(sorted(WORKING))),
)

#: Filters of the recipients table beyond the plain statuses.
NOT_OPENED, WAITING, PROBLEMS = "not_opened", "waiting", "problems"
FILTERS = (NOT_OPENED, WAITING, PROBLEMS) + tuple(s.value for s in Status)

#: Sortable columns (all NOT NULL, so the keyset comparison is total) → model column.
SORTS = {
    "row": SigningRequest.id,
    "email": SigningRequest.email,
    "name": SigningRequest.name,
    "status": SigningRequest.status,
    "updated": SigningRequest.status_changed_at,
}
PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
BATCH_PAGE_SIZE = 25
#: Throughput is measured over this recent window (at most; never before the batch started) ...
RATE_WINDOW = timedelta(minutes=2)
#: ... and only once it has this many dispatches over this many seconds.
MIN_RATE_BASIS = 5
MIN_RATE_SECONDS = 15


class DashboardError(ValueError):
    """Input a person can correct (a bad filter, sort or cursor); the message says what is wrong."""


@dataclass(frozen=True)
class Segment:
    key: str
    label: object
    count: int
    percent: float


#: A batch's phase, in the words staff use → what it means (the page colours by meaning: CSS ``tone-<tone>``).
PHASE_TONES = {
    "sending": "progress",            # documents are being prepared or invitations sent
    "waiting": "waiting",             # all sent; some recipients have yet to sign
    "all_signed": "success",
    "closed_unsigned": "warning",     # nothing more will happen: some expired or declined
    "partly_failed": "danger",        # some could not be prepared or delivered
    "cancelled": "neutral",
}


@dataclass(frozen=True)
class Phase:
    """Where a batch stands for staff: ``key`` of ``PHASE_TONES``, its tone, and the count its words need."""

    key: str
    tone: str
    #: Unsigned requests of a closed batch, failed ones of a partly failed batch; 0 otherwise.
    count: int = 0


def batch_phase(batch: Batch, counts: BatchCounts) -> Phase:
    """The batch's state as staff read it: "completed" with nobody signed is not done."""
    def phase(key: str, count: int = 0) -> Phase:
        return Phase(key=key, tone=PHASE_TONES[key], count=count)

    if batch.status == BatchStatus.CANCELLED:
        return phase("cancelled")
    if batch.status not in BATCH_FINAL or counts.working:
        return phase("sending")
    if counts.failed:
        return phase("partly_failed", counts.failed)
    signed = counts.by_status.get(Status.SIGNED, 0)
    if signed == counts.total:
        return phase("all_signed")
    if any(counts.by_status.get(s, 0) for s in (Status.SENT, Status.OPENED)):
        return phase("waiting")
    return phase("closed_unsigned", counts.total - signed)


@dataclass(frozen=True)
class Progress:
    total: int
    segments: tuple[Segment, ...]
    #: Requests the pipeline still owes work.
    working: int
    #: The batch can change without staff acting (the page keeps polling).
    active: bool
    #: The batch is completed, partially failed or cancelled (``BATCH_FINAL``): nothing left to cancel.
    final: bool = False
    phase: Phase = Phase("sending", "progress")
    #: Documents rendered so far while some are still waiting for theirs (for "preparing documents n/N").
    rendered: int = 0
    #: Requests still waiting for their document (pending or being rendered).
    rendering: int = 0
    #: Requests whose invitation the recipient's mail server accepted, and those it bounced.
    delivered: int = 0
    bounced: int = 0

    @property
    def attempted(self) -> int:
        """Invitations whose delivery has an answer: accepted or bounced."""
        return self.delivered + self.bounced

    @property
    def delivery_rate(self) -> float | None:
        """delivered / attempted (0–1), or None before any answer."""
        return self.delivered / self.attempted if self.attempted else None

    @property
    def delivery_poor(self) -> bool:
        """More than 5% bounced of at least 20 answers: what fires the ``BulksignBatchBounceRate`` alert."""
        return self.attempted >= 20 and self.bounced > 0.05 * self.attempted


#: Statuses whose invitation was accepted: the same split as the ``BulksignBatchBounceRate`` alert, so the
#: page and the alert agree. ``failed`` is left out: it mixes documents that never rendered with mails that
#: never got an answer.
DELIVERED = (Status.SENT, Status.OPENED, Status.SIGNED, Status.DECLINED, Status.EXPIRED)


def progress_for(batch: Batch, counts: BatchCounts) -> Progress:
    """The stacked bar of one batch from its counts."""
    total = counts.total
    segments = []
    for key, label, statuses in PROGRESS_SEGMENTS:
        n = sum(counts.by_status.get(s, 0) for s in statuses)
        segments.append(Segment(key=key, label=label, count=n, percent=(100.0 * n / total) if total else 0.0))
    final = batch.status in BATCH_FINAL
    active = not final and (counts.working > 0 or batch.status == BatchStatus.PENDING)
    rendering = sum(counts.by_status.get(s, 0) for s in (Status.PENDING, Status.GENERATING))
    return Progress(total=total, segments=tuple(segments), working=counts.working, active=active, final=final,
                    phase=batch_phase(batch, counts), rendered=total - rendering, rendering=rendering,
                    delivered=sum(counts.by_status.get(s, 0) for s in DELIVERED),
                    bounced=counts.by_status.get(Status.BOUNCED, 0))


@dataclass(frozen=True)
class BatchRow:
    batch: Batch
    template_name: str | None
    started_by: str | None
    progress: Progress
    counts: BatchCounts


@dataclass(frozen=True)
class BatchPage:
    rows: tuple[BatchRow, ...]
    page: int
    has_next: bool


def _batches_with_template_and_owner():
    """(batch, template name, owner's email) rows: one query for what the list and the batch page show."""
    return (select(Batch, DocumentTemplate.name, User.email)
            .join(TemplateVersion, TemplateVersion.id == Batch.template_version_id)
            .join(DocumentTemplate, DocumentTemplate.id == TemplateVersion.template_id)
            .outerjoin(User, User.id == Batch.created_by_id))


def list_batches(session: Session, *, user: User, q: str = "", page: int = 1,
                 per_page: int = BATCH_PAGE_SIZE, after: tuple[datetime, int] | None = None) -> BatchPage:
    """The batches ``user`` may see, newest first, searched by name, with owner, template and counts (3 queries).

    Pages by number (the staff list), or by keyset after the (created_at, id) of a previous row (the API).
    """
    page = max(1, page)
    query = (
        _batches_with_template_and_owner()
        .where(access.batch_filter(user))
        .order_by(Batch.created_at.desc(), Batch.id.desc())
        .limit(per_page + 1)
    )
    if after is not None:
        query = query.where(tuple_(Batch.created_at, Batch.id) < tuple_(*after))
    else:
        query = query.offset((page - 1) * per_page)
    if q.strip():
        query = query.where(Batch.name.ilike(f"%{_escape_like(q.strip())}%", escape="\\"))
    found = session.execute(query).all()
    has_next = len(found) > per_page
    found = found[:per_page]
    counts = counts_for(session, [b.id for b, _, _ in found])
    rows = tuple(
        BatchRow(batch=b, template_name=tname, started_by=email, progress=progress_for(b, counts[b.id]),
                 counts=counts[b.id])
        for b, tname, email in found
    )
    return BatchPage(rows=rows, page=page, has_next=has_next)


@dataclass(frozen=True)
class BatchView:
    batch: Batch
    template_name: str | None
    started_by: str | None
    progress: Progress
    counts: BatchCounts


def batch_view(session: Session, *, batch_id: int) -> BatchView | None:
    """One batch with its template, owner and counts (2 queries), or None."""
    found = session.execute(_batches_with_template_and_owner().where(Batch.id == batch_id)).first()
    if found is None:
        return None
    batch, tname, email = found
    counts = counts_for(session, [batch.id])[batch.id]
    return BatchView(batch=batch, template_name=tname, started_by=email, progress=progress_for(batch, counts),
                     counts=counts)


def batch_progress(session: Session, *, batch_id: int) -> tuple[Batch, Progress] | None:
    """Just the batch and its bar, for the polled fragment (2 light queries), or None."""
    batch = session.get(Batch, batch_id)
    if batch is None:
        return None
    return batch, progress_for(batch, counts_for(session, [batch_id])[batch_id])


# --- The recipients table -------------------------------------------------------------------

@dataclass(frozen=True)
class RecipientFilter:
    """What the table shows: a status filter, a search text, a sort; the same for exports and select-all."""

    status: str = ""
    q: str = ""
    sort: str = "row"
    desc: bool = False

    @classmethod
    def parse(cls, *, status: str | None, q: str | None, sort: str | None, direction: str | None) -> "RecipientFilter":
        """From query-string values; unknown values raise ``DashboardError``."""
        status = (status or "").strip()
        if status and status not in FILTERS:
            raise DashboardError(N_("Unknown status filter %(value)r.", value=status))
        sort = (sort or "row").strip()
        if sort not in SORTS:
            raise DashboardError(N_("Unknown sort column %(value)r; use one of: %(known)s.", value=sort, known=", ".join(SORTS)))
        if direction not in (None, "", "asc", "desc"):
            raise DashboardError(N_("The sort direction must be asc or desc."))
        q = (q or "").strip()
        if len(q) > 200:
            raise DashboardError(N_("The search text is too long (at most 200 characters)."))
        # PostgreSQL text cannot hold NUL: on the streamed CSV its error came after the 200 and cut the download.
        if "\x00" in q:
            raise DashboardError(N_("The search text contains a character that is not allowed."))
        return cls(status=status, q=q, sort=sort, desc=direction == "desc")

    def as_args(self) -> dict[str, str]:
        """Query-string values that reproduce this filter (empty ones left out)."""
        args = {"status": self.status, "q": self.q, "sort": "" if self.sort == "row" else self.sort,
                "dir": "desc" if self.desc else ""}
        return {k: v for k, v in args.items() if v}


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _conditions(batch_id: int, flt: RecipientFilter) -> list:
    where = [SigningRequest.batch_id == batch_id]
    if flt.status == NOT_OPENED:
        where += [SigningRequest.status == Status.SENT, SigningRequest.opened_at.is_(None)]
    elif flt.status == WAITING:
        where.append(SigningRequest.status.in_(sorted(WORKING)))
    elif flt.status == PROBLEMS:
        where.append(SigningRequest.status.in_([Status.FAILED, Status.BOUNCED]))
    elif flt.status:
        where.append(SigningRequest.status == flt.status)
    if flt.q:
        pattern = f"%{_escape_like(flt.q)}%"
        where.append(or_(SigningRequest.email.ilike(pattern, escape="\\"),
                         SigningRequest.name.ilike(pattern, escape="\\")))
    return where


def encode_cursor(flt: RecipientFilter, last_value, last_id: int) -> str:
    """An opaque cursor for the row after (``last_value``, ``last_id``) in this sort."""
    if isinstance(last_value, datetime):
        last_value = last_value.isoformat()
    raw = json.dumps([flt.sort, int(flt.desc), last_value, last_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(flt: RecipientFilter, cursor: str) -> tuple[object, int]:
    """(last value, last id) from a cursor made for this sort; anything else raises ``DashboardError``."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        sort, desc, value, last_id = json.loads(raw)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError, RecursionError):
        raise DashboardError(N_("The page cursor is not valid; start again from the first page.")) from None
    if sort != flt.sort or bool(desc) != flt.desc or not isinstance(last_id, int):
        raise DashboardError(N_("The page cursor belongs to another sort order; start again from the first page."))
    if flt.sort == "updated":
        try:
            value = datetime.fromisoformat(value)
        except (TypeError, ValueError):
            raise DashboardError(N_("The page cursor is not valid; start again from the first page.")) from None
        if value.tzinfo is None:
            raise DashboardError(N_("The page cursor is not valid; start again from the first page."))
    elif flt.sort == "row":
        if not isinstance(value, int):
            raise DashboardError(N_("The page cursor is not valid; start again from the first page."))
    elif not isinstance(value, str):
        raise DashboardError(N_("The page cursor is not valid; start again from the first page."))
    return value, last_id


@dataclass(frozen=True)
class RecipientPage:
    items: tuple[SigningRequest, ...]
    next_cursor: str | None
    filter: RecipientFilter


def recipients_page(session: Session, *, batch_id: int, flt: RecipientFilter, cursor: str | None = None,
                    limit: int = PAGE_SIZE) -> RecipientPage:
    """One keyset page of a batch's recipients (one query)."""
    limit = max(1, min(limit, MAX_PAGE_SIZE))
    column = SORTS[flt.sort]
    key = (column, SigningRequest.id) if flt.sort != "row" else (SigningRequest.id,)
    # The drawn signature and the row's data are not shown in tables: leave them in the database.
    query = (select(SigningRequest).where(*_conditions(batch_id, flt))
             .options(defer(SigningRequest.signature_image), defer(SigningRequest.data)))
    if cursor:
        value, last_id = decode_cursor(flt, cursor)
        after = tuple_(*key) if len(key) > 1 else key[0]
        bound = tuple_(literal(value, column.type), literal(last_id, SigningRequest.id.type)) if len(key) > 1 else last_id
        query = query.where(after < bound if flt.desc else after > bound)
    query = query.order_by(*[k.desc() if flt.desc else k.asc() for k in key]).limit(limit + 1)
    rows = session.scalars(query).all()
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        last = rows[-1]
        next_cursor = encode_cursor(flt, getattr(last, column.key) if flt.sort != "row" else last.id, last.id)
    return RecipientPage(items=tuple(rows), next_cursor=next_cursor, filter=flt)


def rows_by_id(session: Session, *, batch_id: int, request_ids: list[int]) -> tuple[SigningRequest, ...]:
    """The batch's requests among ``request_ids`` (one query), for refreshing the table's rows on screen."""
    if not request_ids:
        return ()
    return tuple(session.scalars(
        select(SigningRequest).where(SigningRequest.batch_id == batch_id, SigningRequest.id.in_(request_ids))
        .options(defer(SigningRequest.signature_image), defer(SigningRequest.data))
        .order_by(SigningRequest.id)))


def count_matching(session: Session, *, batch_id: int, flt: RecipientFilter, counts: BatchCounts | None = None) -> int:
    """How many recipients match the filter (for "select all N"); from ``counts`` when a status filter allows."""
    if counts is not None and not flt.q and flt.status != NOT_OPENED:
        group = {"": list(counts.by_status), WAITING: sorted(WORKING), PROBLEMS: [Status.FAILED, Status.BOUNCED]}
        return sum(counts.by_status.get(s, 0) for s in group.get(flt.status, [flt.status]))
    return session.scalar(select(func.count()).select_from(SigningRequest).where(*_conditions(batch_id, flt)))


def matching_id_pages(session: Session, *, batch_id: int, flt: RecipientFilter, page_size: int = 1000) -> Iterator[list[int]]:
    """Ids of every recipient matching the filter, in keyset pages of ``page_size`` (by id)."""
    last_id = 0
    where = _conditions(batch_id, flt)
    for _ in range(10_000):  # a million rows at most; a batch is far smaller
        ids = session.scalars(
            select(SigningRequest.id).where(*where, SigningRequest.id > last_id)
            .order_by(SigningRequest.id).limit(page_size)
        ).all()
        if not ids:
            return
        yield list(ids)
        last_id = ids[-1]


@dataclass(frozen=True)
class Selection:
    """Requests chosen for a bulk action, resolved on the server."""

    request_ids: tuple[int, ...]


def resolve_selection(session: Session, *, batch_id: int, request_ids: list[int], select_all: bool,
                      flt: RecipientFilter) -> Selection:
    """The chosen rows (only this batch's), or with ``select_all`` every row matching the filter."""
    if select_all:
        ids: list[int] = []
        for page in matching_id_pages(session, batch_id=batch_id, flt=flt):
            ids.extend(page)
        return Selection(request_ids=tuple(ids))
    if not request_ids:
        return Selection(request_ids=())
    mine = [i for part in slices(sorted(set(request_ids))) for i in session.scalars(
        select(SigningRequest.id).where(SigningRequest.batch_id == batch_id, SigningRequest.id.in_(part))
        .order_by(SigningRequest.id))]
    return Selection(request_ids=tuple(mine))


# --- Timeline -------------------------------------------------------------------------------

#: What went wrong and what to do, per state that needs a person.
ADVICE = {
    Status.FAILED: _l("The document could not be prepared or the invitation could not be sent. "
                      "Retry it; if it fails again, check the recipient's data and the template."),
    Status.BOUNCED: _l("The invitation could not be delivered to this address. "
                       "Fix the email address, then resend with a new link."),
    Status.EXPIRED: _l("The deadline passed before the recipient signed. Resend with a new link to give more time."),
    Status.DECLINED: _l("The recipient declined to sign. Contact them; when their concern is settled, "
                        "resend with a new link to invite them again."),
}


@dataclass(frozen=True)
class TimelineEntry:
    at: datetime
    kind: str  # "event" or "mail"
    title: str
    actor: str = ""
    detail: str = ""


@dataclass(frozen=True)
class Timeline:
    request: SigningRequest
    entries: tuple[TimelineEntry, ...]
    #: The error in plain words, when the request is stuck; None otherwise.
    problem: str | None
    #: What the user can do about it.
    advice: object | None
    mails: tuple[OutgoingMail, ...] = field(default_factory=tuple)


def timeline(session: Session, *, batch_id: int, request_id: int) -> Timeline | None:
    """A request's events and mails, oldest first, with the error and advice (3 queries), or None."""
    req = session.scalar(select(SigningRequest).where(SigningRequest.id == request_id,
                                                     SigningRequest.batch_id == batch_id))
    if req is None:
        return None
    events = session.scalars(select(Event).where(Event.request_id == request_id)
                             .order_by(Event.created_at, Event.id).limit(500)).all()
    mails = session.scalars(select(OutgoingMail).where(OutgoingMail.request_id == request_id)
                            .order_by(OutgoingMail.created_at, OutgoingMail.id).limit(200)).all()
    entries = [TimelineEntry(at=e.created_at, kind="event", title=e.type, actor=e.actor,
                             detail=_event_detail(e.details)) for e in events]
    entries += [TimelineEntry(at=m.created_at, kind="mail", title=f"mail.{m.kind}",
                              detail=f"{m.status}" + (f": {m.error}" if m.error else "")) for m in mails]
    entries.sort(key=lambda entry: entry.at)
    problem = None
    if req.status in ADVICE:
        failed_mail = next((m for m in reversed(mails) if m.error), None)
        problem = req.error_message or (failed_mail.error if failed_mail else None) or req.decline_reason
    return Timeline(request=req, entries=tuple(entries), problem=problem, advice=ADVICE.get(req.status),
                    mails=tuple(mails))


def _event_detail(details: dict | None) -> str:
    # Details are written by the app, never secrets; still, anything that looks like a link or token stays out.
    if not details:
        return ""
    secret_words = ("token", "nonce", "link", "url", "secret")
    return ", ".join(f"{k}: {v}" for k, v in details.items()
                     if not any(word in k.lower() for word in secret_words))[:500]


# --- Throughput and ETA -------------------------------------------------------------------------

@dataclass(frozen=True)
class Throughput:
    #: Invitations dispatched per minute over the recent window; None until there is a basis for a rate.
    per_minute: float | None
    #: Estimated time until the pipeline is done at that rate; None without a rate or with nothing left.
    eta: timedelta | None


def throughput(session: Session, *, batch: Batch, working: int, now: datetime) -> Throughput:
    """Dispatch rate over the last ``RATE_WINDOW`` (or since the batch started, if later), and the time left.

    A window that began before the batch would dilute the rate (a 2-minute batch read "1 per minute"),
    so the window starts no earlier than the batch; and a rate needs ``MIN_RATE_BASIS`` dispatches over
    at least ``MIN_RATE_SECONDS``, otherwise the page shows no estimate rather than a wrong one.
    """
    started = batch.started_at or batch.created_at
    since = max(now - RATE_WINDOW, started) if started else now - RATE_WINDOW
    seconds = (now - since).total_seconds()
    if seconds < MIN_RATE_SECONDS:
        return Throughput(per_minute=None, eta=None)
    done = session.scalar(
        select(func.count()).select_from(SigningRequest).where(
            SigningRequest.batch_id == batch.id, SigningRequest.sent_at >= since)) or 0
    if done < MIN_RATE_BASIS:
        return Throughput(per_minute=None, eta=None)
    per_minute = done / (seconds / 60)
    return Throughput(per_minute=per_minute, eta=timedelta(seconds=round(working / per_minute * 60)) if working else None)

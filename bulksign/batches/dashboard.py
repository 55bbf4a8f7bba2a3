"""What the staff dashboard shows of batches: the lists, one batch, its progress bar and phase, its throughput
and ETA, and the words for request and batch states; counts from the per-batch counters."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from flask_babel import lazy_gettext as _l
from sqlalchemy import Select, func, literal, select, tuple_
from sqlalchemy.orm import Session, contains_eager, joinedload

from bulksign.batches.approval import Approval
from bulksign.batches.progress import BatchCounts, counts_for
from bulksign.batches.recipients_table import escape_like
from bulksign.models import Batch, DocumentTemplate, SigningRequest, TemplateVersion, User
from bulksign.models.status import BATCH_DISPATCHED, BATCH_FINAL, WORKING, BatchStatus, Status
from bulksign.people import access

#: Words for request and batch states, and for the table's extra filters.
STATUS_LABELS = {
    "pending": _l("pending"),
    "generating": _l("generating"),
    "generated": _l("generated"),
    "sending": _l("sending"),
    "sent": _l("sent"),
    "opened": _l("opened"),
    "signed": _l("signed"),
    "declined": _l("declined"),
    "expired": _l("expired"),
    "failed": _l("failed"),
    "bounced": _l("bounced"),
    "cancelled": _l("cancelled"),
    "processing": _l("sending"),
    "awaiting_signatures": _l("waiting for signatures"),
    "partially_failed": _l("partially failed"),
    "all_signed": _l("all signed"),
    "closed": _l("batch closed"),
    "not_opened": _l("sent, not opened"),
    "waiting": _l("being prepared or sent"),
    "problems": _l("failed or bounced"),
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

BATCH_PAGE_SIZE = 25
#: Throughput is measured over this recent window (at most; never before the batch started) ...
RATE_WINDOW = timedelta(minutes=2)
#: ... and only once it has this many dispatches over this many seconds.
MIN_RATE_BASIS = 5
MIN_RATE_SECONDS = 15


@dataclass(frozen=True)
class Segment:
    key: str
    label: object
    count: int
    percent: float


#: A batch's phase, in the words staff use → what it means (the page colours by meaning: CSS ``tone-<tone>``).
PHASE_TONES = {
    "sending": "progress",  # documents are being prepared or invitations sent
    "waiting": "waiting",  # all sent; some recipients have yet to sign
    "all_signed": "success",
    "closed_unsigned": "warning",  # nothing more will happen: some expired or declined
    "partly_failed": "danger",  # some could not be prepared or delivered
    "cancelled": "neutral",
    "awaiting_approval": "warning",  # nothing is sent until someone else approves it
    "rejected": "neutral",
}


@dataclass(frozen=True)
class Phase:
    """Where a batch stands for staff: ``key`` of ``PHASE_TONES``, its tone, and the count its words need."""

    key: str
    tone: str
    #: Unsigned requests of a closed batch, failed ones of a partly failed batch; 0 otherwise.
    count: int = 0


def batch_phase(batch: Batch, counts: BatchCounts) -> Phase:
    """The batch's state as staff read it, from its status (``progress.refresh_batch_statuses``) and counts."""

    def phase(key: str, count: int = 0) -> Phase:
        return Phase(key=key, tone=PHASE_TONES[key], count=count)

    status = BatchStatus(batch.status)
    if status == BatchStatus.AWAITING_APPROVAL:
        return phase("awaiting_approval")
    if status == BatchStatus.CANCELLED:
        return phase("rejected" if batch.approval == Approval.REJECTED else "cancelled")
    if status not in BATCH_DISPATCHED or counts.working:
        return phase("sending")
    if status == BatchStatus.ALL_SIGNED:
        return phase("all_signed")
    if counts.failed:
        # Failures first, closed or not: staff can retry them.
        return phase("partly_failed", counts.failed)
    if status == BatchStatus.CLOSED:
        return phase("closed_unsigned", counts.total - counts.by_status.get(Status.SIGNED, 0))
    return phase("waiting")


@dataclass(frozen=True)
class Progress:
    total: int
    segments: tuple[Segment, ...]
    #: Requests the pipeline still owes work.
    working: int
    #: The batch can change without staff acting (the page keeps polling).
    active: bool
    #: The batch is all signed, closed or cancelled (``BATCH_FINAL``): nothing left to cancel.
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
    return Progress(
        total=total,
        segments=tuple(segments),
        working=counts.working,
        active=active,
        final=final,
        phase=batch_phase(batch, counts),
        rendered=total - rendering,
        rendering=rendering,
        delivered=sum(counts.by_status.get(s, 0) for s in DELIVERED),
        bounced=counts.by_status.get(Status.BOUNCED, 0),
    )


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


def _batches_with_template_and_owner() -> Select[tuple[Batch, str, str]]:
    """(batch, template name, owner's email) rows: one query for what the list and the batch page show.

    The batch comes with its template version's kind (``batch.template_version.kind``, nothing else of the
    version: its HTML can be long), which the progress bar reads for the Word converter's start.
    """
    return (
        select(Batch, DocumentTemplate.name, User.email)
        .join(TemplateVersion, TemplateVersion.id == Batch.template_version_id)
        .join(DocumentTemplate, DocumentTemplate.id == TemplateVersion.template_id)
        .outerjoin(User, User.id == Batch.created_by_id)
        .options(contains_eager(Batch.template_version).load_only(TemplateVersion.kind))
    )


def list_batches(
    session: Session,
    *,
    user: User,
    q: str = "",
    page: int = 1,
    per_page: int = BATCH_PAGE_SIZE,
    after: tuple[datetime, int] | None = None,
) -> BatchPage:
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
        query = query.where(tuple_(Batch.created_at, Batch.id) < tuple_(literal(after[0]), literal(after[1])))
    else:
        query = query.offset((page - 1) * per_page)
    if q.strip():
        query = query.where(Batch.name.ilike(f"%{escape_like(q.strip())}%", escape="\\"))
    found = session.execute(query).all()
    has_next = len(found) > per_page
    found = found[:per_page]
    counts = counts_for(session, [b.id for b, _, _ in found])
    rows = tuple(
        BatchRow(
            batch=b, template_name=tname, started_by=email, progress=progress_for(b, counts[b.id]), counts=counts[b.id]
        )
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
    return BatchView(
        batch=batch, template_name=tname, started_by=email, progress=progress_for(batch, counts), counts=counts
    )


def batch_progress(session: Session, *, batch_id: int) -> tuple[Batch, Progress] | None:
    """Just the batch (with its template version's kind) and its bar, for the polled fragment (2 light queries),
    or None."""
    batch = session.get(Batch, batch_id, options=[joinedload(Batch.template_version).load_only(TemplateVersion.kind)])
    if batch is None:
        return None
    return batch, progress_for(batch, counts_for(session, [batch_id])[batch_id])


# --- Throughput and ETA -------------------------------------------------------------------------


@dataclass(frozen=True)
class Throughput:
    #: Invitations dispatched per minute over the recent window; None until there is a basis for a rate.
    per_minute: float | None
    #: Estimated time until the pipeline is done at that rate; None without a rate or with nothing left.
    eta: timedelta | None


def throughput(session: Session, *, batch: Batch, working: int, now: datetime) -> Throughput:
    """Dispatch rate over the last ``RATE_WINDOW`` (starting no earlier than the batch, which would dilute it) and
    the time left; no estimate without ``MIN_RATE_BASIS`` dispatches over ``MIN_RATE_SECONDS``."""
    started = batch.started_at or batch.created_at
    since = max(now - RATE_WINDOW, started) if started else now - RATE_WINDOW
    seconds = (now - since).total_seconds()
    if seconds < MIN_RATE_SECONDS:
        return Throughput(per_minute=None, eta=None)
    done = (
        session.scalar(
            select(func.count())
            .select_from(SigningRequest)
            .where(SigningRequest.batch_id == batch.id, SigningRequest.sent_at >= since)
        )
        or 0
    )
    if done < MIN_RATE_BASIS:
        return Throughput(per_minute=None, eta=None)
    per_minute = done / (seconds / 60)
    return Throughput(
        per_minute=per_minute, eta=timedelta(seconds=round(working / per_minute * 60)) if working else None
    )

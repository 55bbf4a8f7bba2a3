"""The dashboard's recipients table: filters and sorts, keyset pages (never OFFSET), the rows refreshed on
screen, how many match, and the selection a bulk action acts on."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, exists, func, literal, or_, select, tuple_
from sqlalchemy.orm import Session, defer

from bulksign.batches.progress import BatchCounts
from bulksign.core.errors import BulksignError
from bulksign.core.messages import N_
from bulksign.core.slicing import slices
from bulksign.models import Party, SigningRequest
from bulksign.models.parties import PartyStatus
from bulksign.models.status import FINAL, WORKING, Status

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
#: A role as templates name it (``signature_<role>``), for the "waiting for <role>" filter.
ROLE_PATTERN = re.compile(r"[a-z0-9_]{1,40}")


class DashboardError(BulksignError):
    """Input a person can correct (a bad filter, sort or cursor); the message says what is wrong."""


@dataclass(frozen=True)
class RecipientFilter:
    """What the table shows: a status filter, a search text, a sort; the same for exports and select-all."""

    status: str = ""
    q: str = ""
    sort: str = "row"
    desc: bool = False
    #: A role: only the open requests whose party of that role has not signed yet.
    waiting_for: str = ""

    @classmethod
    def parse(
        cls,
        *,
        status: str | None,
        q: str | None,
        sort: str | None,
        direction: str | None,
        waiting_for: str | None = None,
    ) -> RecipientFilter:
        """From query-string values; unknown values raise ``DashboardError``."""
        status = (status or "").strip()
        if status and status not in FILTERS:
            raise DashboardError(N_("Unknown status filter %(value)r.", value=status))
        waiting_for = (waiting_for or "").strip()
        if waiting_for and not ROLE_PATTERN.fullmatch(waiting_for):
            raise DashboardError(
                N_("A role is lower-case letters, digits and _ (at most 40), not %(value)r.", value=waiting_for[:40])
            )
        sort = (sort or "row").strip()
        if sort not in SORTS:
            raise DashboardError(
                N_("Unknown sort column %(value)r; use one of: %(known)s.", value=sort, known=", ".join(SORTS))
            )
        if direction not in (None, "", "asc", "desc"):
            raise DashboardError(N_("The sort direction must be asc or desc."))
        q = (q or "").strip()
        if len(q) > 200:
            raise DashboardError(N_("The search text is too long (at most 200 characters)."))
        # PostgreSQL text cannot hold NUL: on the streamed CSV its error came after the 200 and cut the download.
        if "\x00" in q:
            raise DashboardError(N_("The search text contains a character that is not allowed."))
        return cls(status=status, q=q, sort=sort, desc=direction == "desc", waiting_for=waiting_for)

    def as_args(self) -> dict[str, str]:
        """Query-string values that reproduce this filter (empty ones left out)."""
        args = {
            "status": self.status,
            "q": self.q,
            "sort": "" if self.sort == "row" else self.sort,
            "dir": "desc" if self.desc else "",
            "waiting_for": self.waiting_for,
        }
        return {k: v for k, v in args.items() if v}


def escape_like(text: str) -> str:
    """``text`` as the literal part of a LIKE pattern (``\\`` escapes): ``%`` and ``_`` match only themselves."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _conditions(batch_id: int, flt: RecipientFilter) -> list[ColumnElement[bool]]:
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
        pattern = f"%{escape_like(flt.q)}%"
        where.append(
            or_(SigningRequest.email.ilike(pattern, escape="\\"), SigningRequest.name.ilike(pattern, escape="\\"))
        )
    if flt.waiting_for:
        where += [
            SigningRequest.status.not_in(sorted(FINAL)),
            exists().where(
                Party.request_id == SigningRequest.id,
                Party.role == flt.waiting_for,
                Party.status != PartyStatus.SIGNED,
            ),
        ]
    return where


def encode_cursor(flt: RecipientFilter, last_value: object, last_id: int) -> str:
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


def recipients_page(
    session: Session, *, batch_id: int, flt: RecipientFilter, cursor: str | None = None, limit: int = PAGE_SIZE
) -> RecipientPage:
    """One keyset page of a batch's recipients (one query)."""
    limit = max(1, min(limit, MAX_PAGE_SIZE))
    column = SORTS[flt.sort]
    key = (column, SigningRequest.id) if flt.sort != "row" else (SigningRequest.id,)
    # The drawn signature and the row's data are not shown in tables: leave them in the database.
    query = (
        select(SigningRequest)
        .where(*_conditions(batch_id, flt))
        .options(defer(SigningRequest.signature_image), defer(SigningRequest.data))
    )
    if cursor:
        value, last_id = decode_cursor(flt, cursor)
        after = tuple_(*key) if len(key) > 1 else key[0]
        bound = (
            tuple_(literal(value, column.type), literal(last_id, SigningRequest.id.type)) if len(key) > 1 else last_id
        )
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
    return tuple(
        session.scalars(
            select(SigningRequest)
            .where(SigningRequest.batch_id == batch_id, SigningRequest.id.in_(request_ids))
            .options(defer(SigningRequest.signature_image), defer(SigningRequest.data))
            .order_by(SigningRequest.id)
        )
    )


def count_matching(session: Session, *, batch_id: int, flt: RecipientFilter, counts: BatchCounts | None = None) -> int:
    """How many recipients match the filter (for "select all N"); from ``counts`` when a status filter allows."""
    if counts is not None and not flt.q and not flt.waiting_for and flt.status != NOT_OPENED:
        group: dict[str, list[str]] = {
            "": list(counts.by_status),
            WAITING: sorted(WORKING),
            PROBLEMS: [Status.FAILED, Status.BOUNCED],
        }
        return sum(counts.by_status.get(s, 0) for s in group.get(flt.status, [flt.status]))
    return session.scalar(select(func.count()).select_from(SigningRequest).where(*_conditions(batch_id, flt))) or 0


def matching_id_pages(
    session: Session, *, batch_id: int, flt: RecipientFilter, page_size: int = 1000
) -> Iterator[list[int]]:
    """Ids of every recipient matching the filter, in keyset pages of ``page_size`` (by id)."""
    last_id = 0
    where = _conditions(batch_id, flt)
    for _ in range(10_000):  # a million rows at most; a batch is far smaller
        ids = session.scalars(
            select(SigningRequest.id)
            .where(*where, SigningRequest.id > last_id)
            .order_by(SigningRequest.id)
            .limit(page_size)
        ).all()
        if not ids:
            return
        yield list(ids)
        last_id = ids[-1]


@dataclass(frozen=True)
class Selection:
    """Requests chosen for a bulk action, resolved on the server."""

    request_ids: tuple[int, ...]


def resolve_selection(
    session: Session, *, batch_id: int, request_ids: list[int], select_all: bool, flt: RecipientFilter
) -> Selection:
    """The chosen rows (only this batch's), or with ``select_all`` every row matching the filter."""
    if select_all:
        ids: list[int] = []
        for page in matching_id_pages(session, batch_id=batch_id, flt=flt):
            ids.extend(page)
        return Selection(request_ids=tuple(ids))
    if not request_ids:
        return Selection(request_ids=())
    mine = [
        i
        for part in slices(sorted(set(request_ids)))
        for i in session.scalars(
            select(SigningRequest.id)
            .where(SigningRequest.batch_id == batch_id, SigningRequest.id.in_(part))
            .order_by(SigningRequest.id)
        )
    ]
    return Selection(request_ids=tuple(mine))

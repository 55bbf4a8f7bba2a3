"""The suppression list: addresses that hard-bounced or complained get no more mail, in any batch."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, or_, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from bulksign.core.errors import BulksignError
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.core.slicing import slices
from bulksign.models import Suppression, User

logger = logging.getLogger(__name__)

#: Where an entry came from.
SOURCES = ("bounce", "smtp", "complaint", "manual")
#: Page size of the admin list and the API.
PAGE_SIZE = 50


#: RFC 3463 ``5.1.x``: the address itself is bad (no such user, no such domain). Other refusals (``5.7.1``
#: relay or policy, ``5.2.2`` mailbox full) say nothing about the address for other senders' mail.
_DEAD_ADDRESS = re.compile(r"(?<![\d.])5\.1\.\d{1,3}(?![\d.])")


def address_is_dead(smtp_reply: str) -> bool:
    """Whether an SMTP refusal says the address does not exist (then it is suppressed)."""
    return bool(_DEAD_ADDRESS.search(smtp_reply))


class SuppressionNotFound(BulksignError, LookupError):
    """No entry in force with this id or address."""

    status = 404


@dataclass(frozen=True)
class SuppressionPage:
    items: tuple[Suppression, ...]
    #: Pass back as ``after`` for the next page; None on the last page.
    next_cursor: int | None


def suppress(
    session: Session,
    *,
    email: str,
    source: str,
    reason: str,
    now: datetime,
    batch_id: int | None = None,
    request_id: int | None = None,
) -> None:
    """Put ``email`` on the list (or renew its entry with the newest reason). The caller commits."""
    if source not in SOURCES:
        raise ValueError(f"unknown suppression source {source!r}")
    values = dict(
        email=email.strip().lower()[:254],
        source=source,
        reason=reason[:2000],
        batch_id=batch_id,
        request_id=request_id,
        created_at=now,
        lifted_at=None,
        lifted_by_id=None,
    )
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    stmt = insert(Suppression).values(**values)
    session.execute(
        stmt.on_conflict_do_update(index_elements=["email"], set_={k: stmt.excluded[k] for k in values if k != "email"})
    )
    log(logger, logging.INFO, "address suppressed", source=source, batch_id=batch_id, request_id=request_id)


def lookup(session: Session) -> Callable[[Iterable[str]], dict[str, Suppression]]:
    """The list as ``validate_recipients`` asks it (addresses in, entries in force out): previews warn of them."""
    return functools.partial(in_force_among, session)


def in_force_among(session: Session, emails: Iterable[str]) -> dict[str, Suppression]:
    """The entries in force for these addresses, by lower-cased address."""
    wanted = sorted({e.strip().lower() for e in emails if e})
    found: dict[str, Suppression] = {}
    for chunk in slices(wanted):
        found.update(
            (s.email, s)
            for s in session.scalars(
                select(Suppression).where(Suppression.email.in_(chunk), Suppression.lifted_at.is_(None))
            )
        )
    return found


#: Why an address is on the list, by the entry's source (translated where it is shown).
WHY = {
    "bounce": N_("its mail server reported it does not exist (hard bounce)"),
    "smtp": N_("its mail server refused it"),
    "complaint": N_("the recipient marked our mail as spam"),
    "manual": N_("an admin listed it"),
}


def describe(entry: Suppression) -> str:
    """Why the address gets no mail, in words staff understand (English: it is stored on requests and mails)."""
    text = f"{entry.email} is on the suppression list since {entry.created_at:%Y-%m-%d}: {WHY[entry.source].english}"
    return f"{text} ({entry.reason})." if entry.reason else f"{text}."


def not_sent_reason(entry: Suppression) -> str:
    """What a request or mail kept from the address says: why, and how it can still go out."""
    return f"Not sent: {describe(entry)} An admin can lift the entry; then retry."


def lift(session: Session, *, email: str, user: User, now: datetime) -> Suppression:
    """Take the address off the list, so mail goes to it again. The caller commits."""
    entry = session.scalar(
        select(Suppression).where(Suppression.email == email.strip().lower(), Suppression.lifted_at.is_(None))
    )
    if entry is None:
        raise SuppressionNotFound(f"{email} is not on the suppression list.")
    entry.lifted_at, entry.lifted_by_id = now, user.id
    log(logger, logging.INFO, "suppression lifted", suppression_id=entry.id, user_id=user.id)
    return entry


def list_in_force(
    session: Session, *, q: str = "", after: int | None = None, limit: int = PAGE_SIZE
) -> SuppressionPage:
    """Entries in force, newest first, optionally those whose address or reason contains ``q``; keyset pages."""
    query = select(Suppression).where(Suppression.lifted_at.is_(None))
    if q:
        pattern = "%" + q.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        query = query.where(
            or_(Suppression.email.like(pattern, escape="\\"), func.lower(Suppression.reason).like(pattern, escape="\\"))
        )
    if after is not None:
        query = query.where(Suppression.id < after)
    rows = list(session.scalars(query.order_by(Suppression.id.desc()).limit(limit + 1)))
    return SuppressionPage(items=tuple(rows[:limit]), next_cursor=rows[limit - 1].id if len(rows) > limit else None)

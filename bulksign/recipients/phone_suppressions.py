"""Phone numbers no text goes to: their owners replied STOP (or an admin barred them), across all batches, as a
complaint suppresses an address."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from bulksign.core.slicing import slices
from bulksign.models import PhoneSuppression

#: Why a number is on the list.
OPT_OUT = "opt_out"


def suppress_phone(session: Session, *, phone: str, source: str, reason: str, now: datetime) -> None:
    """Put ``phone`` (E.164) on the list, once. The caller commits."""
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    session.execute(
        insert(PhoneSuppression)
        .values(phone=phone, source=source, reason=reason[:500], created_at=now)
        .on_conflict_do_nothing(index_elements=["phone"])
    )


def barred_among(session: Session, phones: Iterable[str]) -> set[str]:
    """The numbers among ``phones`` no text may go to."""
    wanted = sorted({p for p in phones if p})
    found: set[str] = set()
    for part in slices(wanted):
        found.update(session.scalars(select(PhoneSuppression.phone).where(PhoneSuppression.phone.in_(part))))
    return found


def not_texted_reason(phone: str) -> str:
    """What a request or text kept from a barred number says (English, as every stored error)."""
    return f"Not sent: {phone} replied STOP to our text messages; no text goes to it."

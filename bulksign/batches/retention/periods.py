"""How long a batch keeps what it holds: the periods a team sets, those a batch sets for itself, and each
batch's policy (its own over its team's, over the defaults); None says "for ever"."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.core.errors import BulksignError, Message
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.models import Batch, Team
from bulksign.models.batches import BatchRetention, TeamRetention

logger = logging.getLogger(__name__)

#: Days an unsigned request is kept after it ended when neither its team nor its batch says otherwise.
DEFAULT_KEEP_UNSIGNED_DAYS = 90
#: The longest period that can be set (about a century): "for ever" is said by no number.
MAX_DAYS = 36500


class RetentionError(BulksignError):
    """Input a person can correct; ``message`` says how, ``field`` names the form field when there is one."""

    status = 422

    def __init__(self, message: Message, field: str | None = None):
        super().__init__(message, field=field)


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


def check_days(value: str | float | None, *, name: Message, allow_forever: bool = False) -> int | None:
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

"""What staff see of a batch's parties: its roles, how many of each role signed, and each row's parties in their
states; a single-signer batch costs one probe of the parties' index."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from flask_babel import LazyString, get_locale
from flask_babel import lazy_gettext as _l
from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from bulksign.core.slicing import slices
from bulksign.doc_templates.template_parties import party_label
from bulksign.models import RECIPIENT_ROLE, Party, TemplateVersion
from bulksign.models.parties import PartyStatus

#: A party's state in staff words. Worded apart from the request's states ("signed" is the document's word).
PARTY_STATUS_LABELS = {
    PartyStatus.WAITING: _l("waiting for their turn"),
    PartyStatus.INVITED: _l("invited"),
    PartyStatus.OPENED: _l("opened the document"),
    PartyStatus.SIGNED: _l("has signed"),
    PartyStatus.DECLINED: _l("has declined"),
}


def role_label(role: str, *, version: TemplateVersion | None) -> LazyString:
    """A party as staff read it: its label on ``version`` in the page's language (``party_label``), never its key."""
    return LazyString(lambda: party_label(version, role=role, language=str(get_locale() or "en")))


@dataclass(frozen=True)
class RoleCount:
    """How far one role of a batch is: its parties per state."""

    role: str
    #: state → parties of this role in it (states without any left out).
    by_status: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.by_status.values())

    @property
    def signed(self) -> int:
        return self.by_status.get(PartyStatus.SIGNED, 0)


@dataclass(frozen=True)
class BatchParties:
    """A batch's roles, the recipient first, and their counts; both empty for a single-signer batch."""

    roles: tuple[str, ...] = ()
    counts: tuple[RoleCount, ...] = ()

    def __bool__(self) -> bool:
        """True for a batch with parties besides the recipient: only then do its pages show parties."""
        return bool(self.roles)


@dataclass(frozen=True)
class RowParty:
    """One party of a row, as the table and the CSV show it."""

    role: str
    status: str
    signed_at: datetime | None
    #: The party's own address (None for the recipient: the row's is theirs), when it was invited, opened its link
    #: and declined.
    email: str | None = None
    invited_at: datetime | None = None
    opened_at: datetime | None = None
    declined_at: datetime | None = None


def batch_roles(session: Session, *, batch_id: int) -> tuple[str, ...]:
    """The batch's roles, the recipient first and the others by name; () for a single-signer batch.

    One query that skips from role to role on the index (each step the next role after the last), so it reads a
    few index entries whatever the batch's size, not every party.
    """
    later = aliased(Party)
    found = select(func.min(Party.role).label("role")).where(Party.batch_id == batch_id).cte("roles", recursive=True)
    step = select(func.min(later.role)).where(later.batch_id == batch_id, later.role > found.c.role).scalar_subquery()
    found = found.union_all(select(step).where(found.c.role.is_not(None)))
    roles = [role for role in session.scalars(select(found.c.role)) if role is not None]
    if roles in ([], [RECIPIENT_ROLE]):
        return ()
    return tuple(sorted(roles, key=lambda role: (role != RECIPIENT_ROLE, role)))


def batch_parties(session: Session, *, batch_id: int, roles: Sequence[str] | None = None) -> BatchParties:
    """The batch's roles and, for a batch with several, its parties per role and state (one grouped query).
    ``roles`` when the caller read them already (``batch_roles``)."""
    roles = tuple(batch_roles(session, batch_id=batch_id) if roles is None else roles)
    if not roles:
        return BatchParties()
    counts: dict[str, dict[str, int]] = {role: {} for role in roles}
    for role, status, n in session.execute(
        select(Party.role, Party.status, func.count())
        .where(Party.batch_id == batch_id)
        .group_by(Party.role, Party.status)
    ):
        counts.setdefault(role, {})[status] = n
    return BatchParties(
        roles=roles, counts=tuple(RoleCount(role=role, by_status=by_status) for role, by_status in counts.items())
    )


def row_parties(session: Session, *, batch_id: int, request_ids: Sequence[int]) -> dict[int, tuple[RowParty, ...]]:
    """Each of the rows' parties by step, then role (one query per thousand rows), for a batch with several."""
    found: dict[int, list[RowParty]] = {}
    for part in slices(sorted(set(request_ids))):
        for request_id, role, status, signed_at, email, invited_at, opened_at, declined_at in session.execute(
            select(
                Party.request_id,
                Party.role,
                Party.status,
                Party.signed_at,
                Party.email,
                Party.invited_at,
                Party.opened_at,
                Party.declined_at,
            )
            .where(Party.batch_id == batch_id, Party.request_id.in_(part))
            .order_by(Party.request_id, Party.step, Party.role)
        ):
            found.setdefault(request_id, []).append(
                RowParty(
                    role=role,
                    status=status,
                    signed_at=signed_at,
                    email=email,
                    invited_at=invited_at,
                    opened_at=opened_at,
                    declined_at=declined_at,
                )
            )
    return {request_id: tuple(parties) for request_id, parties in found.items()}

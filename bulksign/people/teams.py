"""Teams and their members; every membership change is recorded (who, whom, when) by ``access_audit``."""

from __future__ import annotations

import logging
import unicodedata
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bulksign.core.errors import BulksignError
from bulksign.core.logs import log
from bulksign.core.messages import N_, N_plural
from bulksign.mail.mail_headers import CONTROL_CHARACTERS
from bulksign.models import Team, TeamMember, User
from bulksign.models.base import rows_changed
from bulksign.people.access_audit import record_membership

logger = logging.getLogger(__name__)

MAX_NAME = 100


class TeamError(BulksignError):
    """Input a person can correct; the message says how."""


def normal_name(name: str) -> str:
    """A team name as stored: its runs of spaces one space, its letters composed (NFC)."""
    return unicodedata.normalize("NFC", " ".join(name.split()))


def name_key(name: str) -> str:
    """What two names that mean the same team share, in every database: the stored name folded by Python
    (``str.casefold``: "Отдел кадров" and "ОТДЕЛ  КАДРОВ", "Straße" and "STRASSE")."""
    return unicodedata.normalize("NFC", normal_name(name).casefold())


def create_team(session: Session, *, name: str, now: datetime, require_approval: bool = False) -> Team:
    """A new team with a unique name (by ``name_key``); ``require_approval``: its staff's batches wait for
    approval."""
    if CONTROL_CHARACTERS.search(name.strip()):  # refused, not folded like spaces: a mistake, or aimed at what shows it
        raise TeamError(N_("The team name may not contain line breaks or other control characters."))
    name = normal_name(name)
    if not name or len(name) > MAX_NAME:
        raise TeamError(
            N_plural(
                "Give the team a name of 1 to %(num)s character.",
                "Give the team a name of 1 to %(num)s characters.",
                MAX_NAME,
            )
        )
    exists_already = TeamError(N_("A team named %(name)s already exists.", name=name))
    key = name_key(name)
    if session.scalar(select(Team.id).where(Team.name_key == key)):
        raise exists_already
    team = Team(name=name, name_key=key, created_at=now, require_approval=require_approval)
    try:
        with session.begin_nested():  # another admin's create of the same name in between: theirs stands
            session.add(team)
    except IntegrityError:
        raise exists_already from None
    log(logger, logging.INFO, "team created", team_id=team.id)
    return team


def set_require_approval(session: Session, *, team: Team, required: bool) -> bool:
    """Turn approval before sending on or off for the team's new batches (those waiting stay waiting); False when
    it already was so. The caller commits."""
    if team.require_approval == required:
        return False
    team.require_approval = required
    log(logger, logging.INFO, "team approval changed", team_id=team.id, require_approval=required)
    return True


def team_by_name(session: Session, *, name: str) -> Team:
    """The team with this name (any case, by ``name_key``); TeamError when there is none."""
    team = session.scalar(select(Team).where(Team.name_key == name_key(name)))
    if team is None:
        raise TeamError(f"No team named {name}. Create it first (flask teams create NAME).")
    return team


def add_member(session: Session, *, team: Team, user: User, by: User | None, now: datetime) -> bool:
    """Put ``user`` in ``team`` (recorded); False when they were in it already."""
    if session.get(TeamMember, (team.id, user.id)) is not None:
        return False
    session.add(TeamMember(team_id=team.id, user_id=user.id, added_at=now))
    record_membership(session, team=team, user=user, action="added", by=by, now=now)
    session.flush()
    return True


def remove_member(session: Session, *, team: Team, user: User, by: User | None, now: datetime) -> bool:
    """Take ``user`` out of ``team`` (recorded); False when they were not in it."""
    removed = rows_changed(
        session, delete(TeamMember).where(TeamMember.team_id == team.id, TeamMember.user_id == user.id)
    )
    if removed:
        record_membership(session, team=team, user=user, action="removed", by=by, now=now)
    return bool(removed)


@dataclass(frozen=True)
class TeamRow:
    team: Team
    members: tuple[User, ...]


def teams_with_members(session: Session) -> list[TeamRow]:
    """Every team by name with its members by email (2 queries), for the admin page."""
    teams = session.scalars(select(Team).order_by(Team.name)).all()
    members: dict[int, list[User]] = {t.id: [] for t in teams}
    for team_id, user in session.execute(
        select(TeamMember.team_id, User).join(User, User.id == TeamMember.user_id).order_by(User.email)
    ):
        members[team_id].append(user)
    return [TeamRow(team=t, members=tuple(members[t.id])) for t in teams]

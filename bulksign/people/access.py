"""Who may see and change which batch and template: the one place rights are decided.
More in docs/architecture/people.md."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Select, delete, or_, select, true
from sqlalchemy.orm import Session

from bulksign.core.errors import BulksignError
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.models import Batch, BatchShare, DocumentTemplate, SigningRequest, Team, TeamMember, User
from bulksign.models.base import rows_changed

ADMIN, MANAGER, STAFF, VIEWER = "admin", "manager", "staff", "viewer"
ROLES = (ADMIN, MANAGER, STAFF, VIEWER)
#: Roles that may create batches and templates, and build exports of the batches they see.
CREATORS = frozenset({ADMIN, MANAGER, STAFF})

logger = logging.getLogger(__name__)


class Refused(BulksignError):
    """Out of reach: ``status`` 404 (not the user's to see) or 403 (seen, not theirs to change)."""

    message: N_

    def __init__(self, message: N_, status: int):
        super().__init__(message, status=status)


#: What is not found, as a whole sentence each (languages inflect the noun).
_NOT_FOUND = {
    "batch": N_("No batch with this id."),
    "request": N_("No request with this id."),
    "template": N_("No template with this id."),
}


def _not_found(what: str) -> Refused:
    return Refused(_NOT_FOUND[what], 404)


def user_team_ids(user: User) -> Select:
    """The ids of the user's teams, as a subquery."""
    return select(TeamMember.team_id).where(TeamMember.user_id == user.id)


def team_ids_of(session: Session, *, user: User) -> set[int]:
    """The ids of the user's teams."""
    return set(session.scalars(user_team_ids(user)))


def teams_of(session: Session, *, user: User) -> list[Team]:
    """The user's teams, by name."""
    return list(session.scalars(select(Team).where(Team.id.in_(user_team_ids(user))).order_by(Team.name)))


def batch_filter(user: User) -> ColumnElement[bool]:
    """A condition on ``Batch`` that holds for the batches ``user`` may see."""
    if user.is_admin:
        return true()
    return or_(
        Batch.created_by_id == user.id,
        Batch.team_id.in_(user_team_ids(user)),
        Batch.id.in_(select(BatchShare.batch_id).where(BatchShare.user_id == user.id)),
    )


def template_filter(user: User) -> ColumnElement[bool]:
    """A condition on ``DocumentTemplate`` that holds for the templates ``user`` may see and use."""
    if user.is_admin:
        return true()
    return or_(DocumentTemplate.created_by_id == user.id, DocumentTemplate.team_id.in_(user_team_ids(user)))


def _may_change(session: Session, user: User, *, owner_id: int | None, team_id: int | None) -> bool:
    if user.is_admin:
        return True
    if user.role == VIEWER:
        return False
    if owner_id == user.id:
        return True
    return user.role == MANAGER and team_id is not None and team_id in team_ids_of(session, user=user)


def batch_for_read(session: Session, *, batch_id: int, user: User) -> Batch:
    """The batch if ``user`` may see it; Refused(404) otherwise."""
    batch = session.scalar(select(Batch).where(Batch.id == batch_id, batch_filter(user)))
    if batch is None:
        raise _not_found("batch")
    return batch


def batch_for_action(session: Session, *, batch_id: int, user: User) -> Batch:
    """The batch if ``user`` may act on it (cancel, remind, resend...); Refused 404 when unseen, 403 when read only."""
    batch = batch_for_read(session, batch_id=batch_id, user=user)
    if not _may_change(session, user, owner_id=batch.created_by_id, team_id=batch.team_id):
        raise Refused(N_("Only the batch's owner, a manager of its team or an admin can do this."), 403)
    return batch


def batch_for_export(session: Session, *, batch_id: int, user: User) -> Batch:
    """The batch if ``user`` may build an export of it: whoever sees it, but for read-only roles (an export is made,
    a row and a job, not read); Refused 404 when unseen, 403 for a viewer. Downloading one is a read."""
    batch = batch_for_read(session, batch_id=batch_id, user=user)
    if user.role not in CREATORS:
        raise Refused(N_("Your account can download this batch's exports but not build new ones."), 403)
    return batch


def may_act_on_batch(session: Session, *, batch: Batch, user: User) -> bool:
    """Whether ``user`` may act on a batch they see (for showing or hiding its action buttons)."""
    return _may_change(session, user, owner_id=batch.created_by_id, team_id=batch.team_id)


def request_for_read(session: Session, *, request_id: int, user: User) -> SigningRequest:
    """The signing request if ``user`` may see its batch; Refused(404) otherwise."""
    row = session.scalar(
        select(SigningRequest)
        .join(Batch, Batch.id == SigningRequest.batch_id)
        .where(SigningRequest.id == request_id, batch_filter(user))
    )
    if row is None:
        raise _not_found("request")
    return row


def template_for_use(session: Session, *, template_id: int, user: User) -> DocumentTemplate:
    """The template if ``user`` may see and use it; Refused(404) otherwise."""
    template = session.scalar(select(DocumentTemplate).where(DocumentTemplate.id == template_id, template_filter(user)))
    if template is None:
        raise _not_found("template")
    return template


def template_for_edit(session: Session, *, template_id: int, user: User) -> DocumentTemplate:
    """The template if ``user`` may change it (owner, a manager of its team, admin); 404 unseen, 403 use only."""
    template = template_for_use(session, template_id=template_id, user=user)
    if not may_edit_template(session, template=template, user=user):
        raise Refused(
            N_(
                "Only the template's owner, a manager of its team or an admin can change it; "
                "you may use it for a batch."
            ),
            403,
        )
    return template


def may_edit_template(session: Session, *, template: DocumentTemplate, user: User) -> bool:
    """Whether ``user`` may save new versions of a template they see."""
    return _may_change(session, user, owner_id=template.created_by_id, team_id=template.team_id)


def require_creator(user: User) -> None:
    """Refused(403) for roles that may not create batches or templates (viewers)."""
    if user.role not in CREATORS:
        raise Refused(N_("Your account can read its teams' batches and templates but not create any."), 403)


def team_for_new(session: Session, *, user: User, team_id: int | None, preferred: int | None = None) -> int | None:
    """The team a new batch or template of ``user`` belongs to.

    ``team_id`` when given (one of the user's teams; an admin may name any); else ``preferred``
    (e.g. the template's team) when the user is in it (an admin: whenever it exists); else the user's
    first team; None for a user in no team (then only they and admins see it).
    """
    mine = team_ids_of(session, user=user)

    def allowed(candidate: int) -> bool:
        return candidate in mine or (user.is_admin and session.get(Team, candidate) is not None)

    if team_id is not None:
        if allowed(team_id):
            return team_id
        raise Refused(N_("Choose one of your teams."), 422)
    if preferred is not None and allowed(preferred):
        return preferred
    return min(mine) if mine else None


@dataclass(frozen=True)
class TeamChoice:
    """The teams a new batch or template of a user may go to, for a form's team field."""

    #: By name: an admin's are all teams, a creator's their own, a viewer's none.
    teams: tuple[Team, ...]
    #: Where it goes when none is chosen (``team_for_new``).
    default_id: int | None

    @property
    def offered(self) -> bool:
        """Whether the form asks: several teams, or one the work would not go to unasked (an admin in no team)."""
        return len(self.teams) > 1 or any(team.id != self.default_id for team in self.teams)


def team_choice(session: Session, *, user: User) -> TeamChoice:
    """Where ``user`` may put new work, and where it goes by default."""
    if user.role not in CREATORS:
        return TeamChoice(teams=(), default_id=None)
    query = select(Team).order_by(Team.name)
    if not user.is_admin:
        query = query.where(Team.id.in_(user_team_ids(user)))
    return TeamChoice(teams=tuple(session.scalars(query)), default_id=team_for_new(session, user=user, team_id=None))


def shared_with(session: Session, *, batch_id: int) -> list[User]:
    """The users a batch is shared with, by email."""
    return list(
        session.scalars(
            select(User)
            .join(BatchShare, BatchShare.user_id == User.id)
            .where(BatchShare.batch_id == batch_id)
            .order_by(User.email)
        )
    )


def share_batch(session: Session, *, batch_id: int, email: str, user: User, now: datetime) -> User:
    """Let the user with ``email`` see the batch (read only); only who may act on the batch may share it."""
    batch = batch_for_action(session, batch_id=batch_id, user=user)
    target = session.scalar(select(User).where(User.email == email.strip().lower()))
    if target is None or target.disabled:
        raise Refused(N_("No active user with the email %(email)s.", email=email.strip()[:254]), 422)
    if session.get(BatchShare, (batch.id, target.id)) is None:
        session.add(BatchShare(batch_id=batch.id, user_id=target.id, created_by_id=user.id, created_at=now))
        session.flush()
        log(logger, logging.INFO, "batch shared", batch_id=batch.id, with_user_id=target.id, user_id=user.id)
    return target


def unshare_batch(session: Session, *, batch_id: int, user_id: int, user: User) -> bool:
    """Stop showing the batch to ``user_id``; False when it was not shared with them."""
    batch = batch_for_action(session, batch_id=batch_id, user=user)
    gone = rows_changed(
        session, delete(BatchShare).where(BatchShare.batch_id == batch.id, BatchShare.user_id == user_id)
    )
    if gone:
        log(logger, logging.INFO, "batch unshared", batch_id=batch.id, with_user_id=user_id, user_id=user.id)
    return bool(gone)


@dataclass(frozen=True)
class Manager:
    """A team manager a batch's notices may go to."""

    email: str
    team_name: str


def managers_of(session: Session, *, team_ids: Iterable[int]) -> list[Manager]:
    """The active managers of these teams, by team and email (whom a batch's notices may go to)."""
    return [
        Manager(email=email, team_name=team_name)
        for email, team_name in session.execute(
            select(User.email, Team.name)
            .join(TeamMember, TeamMember.user_id == User.id)
            .join(Team, Team.id == TeamMember.team_id)
            .where(TeamMember.team_id.in_(list(team_ids)), User.role == MANAGER, User.disabled.is_(False))
            .order_by(Team.name, User.email)
        )
    ]

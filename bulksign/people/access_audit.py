"""Who changed who may see what, and when: team memberships and roles, kept in ``membership_changes``."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.core.logs import log
from bulksign.models import MembershipChange, Team, User

logger = logging.getLogger(__name__)

MEMBERSHIP_ACTIONS = ("added", "removed")


def actor_of(user: User | None) -> str:
    """How a change names who made it: ``user:<id> <email>``, or ``cli`` for the command line."""
    return f"user:{user.id} {user.email}" if user is not None else "cli"


def record_membership(session: Session, *, team: Team, user: User, action: str, by: User | None, now: datetime) -> None:
    """Record that ``by`` put ``user`` in ``team`` (``added``) or took them out (``removed``)."""
    if action not in MEMBERSHIP_ACTIONS:
        raise ValueError(f"unknown membership action {action!r}")
    session.add(
        MembershipChange(team_name=team.name, user_email=user.email, action=action, actor=actor_of(by), created_at=now)
    )
    log(
        logger,
        logging.INFO,
        f"team member {action}",
        team_id=team.id,
        user_id=user.id,
        by_user_id=by.id if by else None,
    )


def record_role(session: Session, *, user: User, old_role: str | None, by: User | None, now: datetime) -> None:
    """Record that ``by`` gave ``user`` their current role (``old_role`` None: at the account's creation)."""
    session.add(
        MembershipChange(
            user_email=user.email,
            action="role",
            old_role=old_role,
            new_role=user.role,
            actor=actor_of(by),
            created_at=now,
        )
    )
    log(
        logger,
        logging.INFO,
        "role changed" if old_role else "role given",
        user_id=user.id,
        role=user.role,
        old_role=old_role,
        by_user_id=by.id if by else None,
    )


def recent_changes(
    session: Session, *, user_email: str | None = None, team_name: str | None = None, limit: int = 200
) -> list[MembershipChange]:
    """The newest changes first, only those about ``user_email`` and/or ``team_name`` when given."""
    query = select(MembershipChange).order_by(MembershipChange.id.desc()).limit(limit)
    if user_email:
        query = query.where(MembershipChange.user_email == user_email)
    if team_name:
        query = query.where(MembershipChange.team_name == team_name)
    return list(session.scalars(query))

"""Who is told about a batch, and who sees it besides its team: the notice address, set by those who may act on
the batch, and the batch page's panel of both."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.batches.notices import NoticeAddressError, chosen_notice_address, notice_recipient
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.models import Batch, Team, User
from bulksign.people.access import Manager, Refused, batch_for_action, managers_of, may_act_on_batch, shared_with

logger = logging.getLogger(__name__)


def set_notice_address(session: Session, *, batch_id: int, choice: str | None, email: str | None, user: User) -> Batch:
    """Name who gets the batch's expiry summary, decline notices and completion notice: the owner, a team
    manager or any address (``notices.chosen_notice_address``)."""
    batch = batch_for_action(session, batch_id=batch_id, user=user)
    try:
        address = chosen_notice_address(choice=choice, email=email)
    except NoticeAddressError as exc:
        raise Refused(N_("Notices to: %(problem)s", problem=exc.message), 422) from None
    batch.notify_email = address
    log(logger, logging.INFO, "notice address set", batch_id=batch.id, user_id=user.id, owner=address is None)
    return batch


@dataclass(frozen=True)
class BatchAccess:
    """Who sees a batch and who is told about it, as its page shows."""

    team_name: str | None
    #: Where the notices go (the notice address, else the owner's address).
    notices_to: str | None
    notify_email: str | None
    shared_with: tuple[User, ...]
    managers: tuple[Manager, ...]
    #: Whether the viewing user may share the batch and change its notice address.
    can_act: bool


def access_panel(session: Session, *, batch: Batch, user: User) -> BatchAccess:
    """The batch's team, notice address and shares, for a user who sees it."""
    team = session.get(Team, batch.team_id) if batch.team_id is not None else None
    # Always one query for the owner (the notice address may be theirs), whether or not it is the viewing user.
    owner = session.scalar(select(User).where(User.id == batch.created_by_id))
    return BatchAccess(
        team_name=team.name if team else None,
        notices_to=notice_recipient(batch, owner=owner),
        notify_email=batch.notify_email,
        shared_with=tuple(shared_with(session, batch_id=batch.id)),
        managers=tuple(managers_of(session, team_ids=[batch.team_id] if batch.team_id else [])),
        can_act=may_act_on_batch(session, batch=batch, user=user),
    )

"""Approval as a task: the team's managers are mailed once when a batch waits for them, the waiting batch comes
first on their home page, and its page names who approves and shows everything that will go out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from flask import Flask
from flask_babel import force_locale
from flask_babel import gettext as _
from flask_mail import Message
from sqlalchemy import false, func, select
from sqlalchemy.orm import Session

from bulksign.batches.notices import notice_batch, notice_message
from bulksign.batches.party_progress import role_label
from bulksign.mail.mailer import builder, queue_mail
from bulksign.models import RECIPIENT_ROLE, Batch, OutgoingMail, Party, TeamMember, User
from bulksign.models.mail import MailKind, MailStatus
from bulksign.models.status import BatchStatus
from bulksign.people import access

#: The mail that tells an approver a batch waits for them.
REQUESTED = MailKind.APPROVAL_REQUESTED


def approvers(session: Session, *, batch: Batch) -> list[User]:
    """Who approves ``batch`` and is told: its team's active managers, its creator never (admins may approve too,
    but are not mailed for every team)."""
    if batch.team_id is None:
        return []
    return list(
        session.scalars(
            select(User)
            .join(TeamMember, TeamMember.user_id == User.id)
            .where(
                TeamMember.team_id == batch.team_id,
                User.role == access.MANAGER,
                User.disabled.is_(False),
                User.id != (batch.created_by_id or 0),
            )
            .order_by(User.email)
        )
    )


def ask_approvers(session: Session, *, batch: Batch, now: datetime) -> None:
    """Record one mail to each approver of a batch that waits (once per batch and approver); the caller commits,
    then enqueues ``requested_mails``."""
    for user in approvers(session, batch=batch):
        with force_locale(user.locale or batch.language or "en"):
            subject = _('Batch "%(batch)s" waits for your approval', batch=batch.name)
        queue_mail(
            session,
            key=f"approval-requested-{batch.id}-{user.id}",
            kind=REQUESTED,
            to_email=user.email,
            subject=subject,
            now=now,
            batch_id=batch.id,
        )


def requested_mails(session: Session, *, batch_id: int) -> list[int]:
    """The batch's approval requests still to go out."""
    return list(
        session.scalars(
            select(OutgoingMail.id).where(
                OutgoingMail.batch_id == batch_id,
                OutgoingMail.kind == REQUESTED,
                OutgoingMail.status == MailStatus.QUEUED,
            )
        )
    )


@builder(REQUESTED)
def build_approval_request(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """Who asks, what and how many, and the link to the batch's page where it is approved; in the approver's
    language."""
    batch = notice_batch(session, mail)
    approver = session.scalar(select(User).where(func.lower(User.email) == mail.to_email.lower()))
    creator = batch.created_by
    with force_locale((approver.locale if approver else None) or batch.language or "en"):
        lines = [
            _(
                '%(who)s created the batch "%(batch)s" of %(num)s documents. Nothing of it is sent until you or '
                "another approver approves it.",
                who=creator.shown_name if creator is not None else _("Someone"),
                batch=batch.name,
                num=batch.total_count,
            ),
            "",
            _("Check it and approve or reject it on its page:"),
            f"{app.config['APP_URL']}/batches/{batch.id}#approval",
        ]
    return notice_message(mail, app, body="\n".join(lines) + "\n")


@dataclass(frozen=True)
class Waiting:
    """A batch waiting for the viewer's approval, for the home page."""

    batch_id: int
    batch_name: str
    #: Its documents.
    count: int


def waiting_for(session: Session, *, user: User) -> list[Waiting]:
    """The batches ``user`` may approve that wait, oldest first: any team's for an admin, a manager's teams', never
    their own."""
    query = select(Batch.id, Batch.name, Batch.total_count).where(
        Batch.status == BatchStatus.AWAITING_APPROVAL,
        (Batch.created_by_id != user.id) | Batch.created_by_id.is_(None),
    )
    if not user.is_admin:
        query = (
            query.where(Batch.team_id.in_(access.user_team_ids(user)))
            if user.role == access.MANAGER
            else query.where(false())
        )
    found = session.execute(query.order_by(Batch.created_at, Batch.id)).all()
    return [Waiting(batch_id=i, batch_name=name, count=n) for i, name, n in found]


@dataclass(frozen=True)
class PartyLine:
    """Who signs as one role: a fixed person, or each row's own."""

    role: str
    label: str
    #: "Name <email>" of the batch's one person in this role; None when each row names its own.
    person: str | None
    #: How many different people sign in this role.
    people: int


def party_lines(session: Session, *, batch_id: int) -> tuple[PartyLine, ...]:
    """The batch's roles and who they are, the recipient first (none for a single-signer batch)."""
    rows = session.execute(
        select(Party.role, func.count(func.distinct(Party.email)), func.min(Party.email), func.min(Party.name))
        .where(Party.batch_id == batch_id)
        .group_by(Party.role)
    ).all()
    if not rows or [r[0] for r in rows] == [RECIPIENT_ROLE]:
        return ()
    version = session.get_one(Batch, batch_id).template_version
    lines = [
        PartyLine(
            role=role,
            label=str(role_label(role, version=version)),
            person=(f"{name} <{email}>" if name else email) if people == 1 and role != RECIPIENT_ROLE else None,
            people=people,
        )
        for role, people, email, name in rows
    ]
    return tuple(sorted(lines, key=lambda line: (line.role != RECIPIENT_ROLE, line.role)))

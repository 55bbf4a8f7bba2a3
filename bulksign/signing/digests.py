"""A countersigner's digest: one mail and one link for every document of a batch that waits on one address."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from flask import Flask, render_template
from flask_babel import force_locale, ngettext
from flask_mail import Message
from sqlalchemy import (
    ColumnElement,
    Exists,
    Interval,
    Select,
    SQLColumnExpression,
    and_,
    exists,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bulksign.core.tokens import hash_token, new_nonce, signing_token
from bulksign.documents.audit_record import document_title
from bulksign.mail.mailer import MailNotNeeded, builder, queue_mail
from bulksign.models import RECIPIENT_ROLE, Batch, CountersignLink, OutgoingMail, Party, SigningRequest
from bulksign.models.mail import MailKind
from bulksign.models.parties import PartyStatus
from bulksign.models.status import Status

DIGEST = MailKind.COUNTERSIGN_DIGEST
#: Links looked at per tick; the rest wait for the next one (a minute later).
DIGESTS_PER_TICK = 500
#: A party that can still act on its documents: its step started and it has not signed or declined.
WAITING = (PartyStatus.INVITED.value, PartyStatus.OPENED.value)


def digest_addresses(session: Session, *, batch_id: int, emails: Iterable[str]) -> set[str]:
    """The addresses among ``emails`` (lower-cased) served by the digest in this batch: those of two parties or
    more other than the recipient (the module's rule)."""
    wanted = sorted({e.lower() for e in emails if e})
    if not wanted:
        return set()
    address = func.lower(Party.email)
    return set(
        session.scalars(
            select(address)
            .where(Party.batch_id == batch_id, Party.role != RECIPIENT_ROLE, address.in_(wanted))
            .group_by(address)
            .having(func.count() >= 2)
        )
    )


def _ready(
    batch_id: int | SQLColumnExpression[int], email: str | SQLColumnExpression[str], *, now: datetime
) -> tuple[ColumnElement[bool], ...]:
    """Conditions of a party whose document is ready for the countersigner of ``batch_id`` and ``email`` (values,
    or a link's columns in a correlated query): its step started (invited or opened), not signed or declined, the
    request (joined by the caller) out and not ended nor past its deadline."""
    return (
        Party.batch_id == batch_id,
        func.lower(Party.email) == email,
        Party.role != RECIPIENT_ROLE,
        Party.status.in_(WAITING),
        SigningRequest.status.in_([Status.SENT.value, Status.OPENED.value]),
        or_(SigningRequest.expires_at.is_(None), SigningRequest.expires_at > now),
    )


def ready_parties(link: CountersignLink, *, now: datetime) -> Select[tuple[Party]]:
    """The parties of the link's batch and address whose document is ready for them (``_ready``)."""
    return (
        select(Party)
        .join(SigningRequest, SigningRequest.id == Party.request_id)
        .where(*_ready(link.batch_id, link.email, now=now))
    )


def served_by_digest() -> Exists:
    """Of a query of parties: the party's batch and address have a countersigner's link, so the digest serves it
    (``ready_parties`` finds its documents by that link), never a mail per document, even after it was given a
    link of its own to open one document's own page (``countersign.own_link``)."""
    return exists().where(CountersignLink.batch_id == Party.batch_id, CountersignLink.email == func.lower(Party.email))


def ready_count(session: Session, link: CountersignLink, *, now: datetime) -> int:
    return session.scalar(select(func.count()).select_from(ready_parties(link, now=now).subquery())) or 0


def link_token(link: CountersignLink, *, secret: str) -> str:
    """The link's token, re-derived from its nonce (every digest of the link carries the same one)."""
    return signing_token(secret=secret, request_id=0, nonce=f"countersign:{link.id}:{link.token_nonce}")


def countersign_url(*, app_url: str, token: str) -> str:
    return f"{app_url.rstrip('/')}/countersign/{token}"


def find_link(session: Session, token: str) -> CountersignLink | None:
    """The link whose token is ``token``; compares hashes."""
    if not token or len(token) > 128:
        return None
    return session.scalar(select(CountersignLink).where(CountersignLink.token_hash == hash_token(token)))


def ensure_links(session: Session, *, batch_id: int, emails: Iterable[str], secret: str, now: datetime) -> None:
    """Give each (batch, address) its link, once (a concurrent invitation's insert wins, this one does nothing).
    The caller commits."""
    for email in sorted({e.lower() for e in emails}):
        exists_already = session.scalar(
            select(CountersignLink.id).where(CountersignLink.batch_id == batch_id, CountersignLink.email == email)
        )
        if exists_already is not None:
            continue
        link = CountersignLink(
            batch_id=batch_id, email=email, token_hash=new_nonce(), token_nonce=new_nonce(), created_at=now
        )
        try:
            with session.begin_nested():  # a concurrent invitation may insert it first: then its link stands
                session.add(link)
                session.flush()
                # Bound to the link's id, which the insert gave: the placeholder hash above is never a token's.
                link.token_hash = hash_token(link_token(link, secret=secret))
                session.flush()
        except IntegrityError:
            continue


def _links(session: Session, *, batch_id: int, emails: Iterable[str]) -> list[CountersignLink]:
    return list(
        session.scalars(
            select(CountersignLink)
            .where(CountersignLink.batch_id == batch_id, CountersignLink.email.in_(sorted(set(emails))))
            .order_by(CountersignLink.id)
        )
    )


def queue_digest(session: Session, *, link: CountersignLink, now: datetime, seen: int | None = None) -> int | None:
    """Queue the link's next digest if documents are ready: its number moves from ``seen`` (default: the link's
    as loaded) by compare-and-set, and only the winner writes the mail row; its id, or None. The caller commits
    and sends."""
    count = ready_count(session, link, now=now)
    if count == 0:
        return None
    seen = link.digest_count if seen is None else seen
    number = session.scalar(
        update(CountersignLink)
        .where(CountersignLink.id == link.id, CountersignLink.digest_count == seen)
        .values(digest_count=seen + 1, last_digest_at=now)
        .returning(CountersignLink.digest_count)
        .execution_options(synchronize_session=False)
    )
    if number is None:
        return None  # another tick or invitation queued it
    session.expire(link)
    return queue_mail(
        session,
        key=f"countersign-digest-{link.id}-{number}",
        kind=DIGEST,
        to_email=link.email,
        subject=_subject(session.get_one(Batch, link.batch_id), count),
        now=now,
        batch_id=link.batch_id,
    ).id


def invited(session: Session, *, batch_id: int, emails: Iterable[str], secret: str, now: datetime) -> list[int]:
    """Parties served by the digest were just invited: their links, and the first digest of each link that has
    had none (as soon as a document is ready: a request not out yet waits for the tick). The caller commits."""
    emails = {e.lower() for e in emails}
    if not emails:
        return []
    ensure_links(session, batch_id=batch_id, emails=emails, secret=secret, now=now)
    mail_ids = []
    for link in _links(session, batch_id=batch_id, emails=emails):
        if link.digest_count == 0:
            mail_id = queue_digest(session, link=link, now=now, seen=0)
            if mail_id is not None:
                mail_ids.append(mail_id)
    return mail_ids


def due_digests(session: Session, *, now: datetime, every: timedelta) -> list[int]:
    """The tick: a digest for each link with a document ready that arrived since its last digest, the last one at
    least ``every`` ago (or none yet); the mail ids. Commits each one (short locks)."""
    since = func.coalesce(CountersignLink.last_digest_at, datetime(1970, 1, 1, tzinfo=now.tzinfo))
    newer = exists().where(
        Party.batch_id == CountersignLink.batch_id,
        func.lower(Party.email) == CountersignLink.email,
        Party.role != RECIPIENT_ROLE,
        Party.status.in_(WAITING),
        Party.invited_at > since,
    )
    links = session.scalars(
        select(CountersignLink)
        .where(
            or_(CountersignLink.last_digest_at.is_(None), CountersignLink.last_digest_at <= now - every),
            newer,
        )
        .order_by(CountersignLink.id)
        .limit(DIGESTS_PER_TICK)
    ).all()
    mail_ids = []
    for link in links:
        mail_id = queue_digest(session, link=link, now=now)
        session.commit()
        if mail_id is not None:
            mail_ids.append(mail_id)
    return mail_ids


def due_reminders(
    session: Session, *, batch_id: int, schedule: Sequence[float], now: datetime, every: timedelta
) -> list[int]:
    """Remind the parties the digest serves by a digest, on the batch's reminder ``schedule``: a link with a ready
    document whose reminder came due since its last digest gets one again, at most one per ``every``. The mail
    ids; the caller keeps quiet hours and commits."""
    since = func.coalesce(CountersignLink.last_digest_at, datetime(1970, 1, 1, tzinfo=now.tzinfo))
    # A document's reminder ``days`` after its invitation came in (since, now].
    came = [
        and_(
            Party.invited_at <= now - timedelta(days=days),
            Party.invited_at + literal(timedelta(days=days), Interval) > since,
        )
        for days in schedule
    ]
    reminder_came = exists().where(
        SigningRequest.id == Party.request_id,
        *_ready(CountersignLink.batch_id, CountersignLink.email, now=now),
        or_(*came),
    )
    links = session.scalars(
        select(CountersignLink)
        .where(
            CountersignLink.batch_id == batch_id,
            or_(CountersignLink.last_digest_at.is_(None), CountersignLink.last_digest_at <= now - every),
            reminder_came,
        )
        .order_by(CountersignLink.id)
        .limit(DIGESTS_PER_TICK)
    ).all()
    return [mail_id for link in links if (mail_id := queue_digest(session, link=link, now=now)) is not None]


def queue_digests_now(session: Session, *, batch_id: int, now: datetime) -> list[int]:
    """Staff's "send now": a digest to each countersigner of the batch with documents ready, whatever the
    interval; the mail ids. The caller commits and sends."""
    links = session.scalars(
        select(CountersignLink).where(CountersignLink.batch_id == batch_id).order_by(CountersignLink.id)
    ).all()
    return [mail_id for link in links if (mail_id := queue_digest(session, link=link, now=now)) is not None]


@dataclass(frozen=True)
class StaffReminder:
    mail_ids: tuple[int, ...]
    #: The addresses whose digest went out after ``not_since``, or was queued meanwhile by a tick: none again now.
    recent: frozenset[str]


def remind_now(
    session: Session, *, batch_id: int, emails: Iterable[str], now: datetime, not_since: datetime
) -> StaffReminder:
    """Staff remind parties the digest serves (by role, from a request's panel or the API): each of these addresses
    gets its digest now, one for all its documents, unless its last one went out after ``not_since`` (the manual
    reminder's cooldown). The caller commits and sends."""
    mail_ids, recent = [], set()
    for link in _links(session, batch_id=batch_id, emails={e.lower() for e in emails}):
        mail_id = None
        if link.last_digest_at is None or link.last_digest_at <= not_since:
            mail_id = queue_digest(session, link=link, now=now)
        if mail_id is None:
            recent.add(link.email)
        else:
            mail_ids.append(mail_id)
    return StaffReminder(tuple(mail_ids), frozenset(recent))


def _subject(batch: Batch, count: int) -> str:
    with force_locale(batch.language):
        return cast(
            str,
            ngettext(
                "%(num)s document of “%(title)s” waits for your signature",
                "%(num)s documents of “%(title)s” wait for your signature",
                count,
                title=document_title(batch),
            ),
        )


def countersigner_name(session: Session, *, link: CountersignLink) -> str | None:
    """The name staff gave the link's person (their party's in the batch), for the greeting and the name field."""
    return session.scalar(
        select(Party.name)
        .where(Party.batch_id == link.batch_id, func.lower(Party.email) == link.email, Party.name.is_not(None))
        .order_by(Party.id)
        .limit(1)
    )


@builder(DIGEST)
def build_digest(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """The digest: how many documents wait, and the one personal link to the page of all of them. Subject and text
    say the one count of documents ready when it leaves (more may have come since it was queued), and the mail's
    row records that subject; none left (signed, declined, cancelled meanwhile): not sent."""
    link = session.scalars(
        select(CountersignLink).where(CountersignLink.batch_id == mail.batch_id, CountersignLink.email == mail.to_email)
    ).one()
    batch = link.batch
    count = ready_count(session, link, now=mail.created_at)
    if count == 0:
        raise MailNotNeeded("no document waits for the countersigner any more")
    mail.subject = _subject(batch, count)
    url = countersign_url(app_url=app.config["APP_URL"], token=link_token(link, secret=app.config["SECRET_KEY"]))
    with force_locale(batch.language):
        body = render_template(
            "emails/countersign_digest.txt",
            count=count,
            document_name=document_title(batch),
            link=url,
            name=countersigner_name(session, link=link),
        )
    message = Message(
        subject=mail.subject,
        recipients=[mail.to_email],
        body=body,
        sender=app.config["MAIL_DEFAULT_SENDER"],
        reply_to=batch.reply_to or (batch.created_by.email if batch.created_by else None),
    )
    message.msgId = mail.message_id
    return message

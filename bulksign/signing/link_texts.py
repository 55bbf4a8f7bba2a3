"""The signing link as a text message: a short text in the batch's language with the sender's name, the document's
title and the personal link, and no personal data beyond the first name. It stays within two SMS segments: the
title (then the sender's name) is shortened, never the link."""

from __future__ import annotations

from collections.abc import Iterator

from flask import Flask
from flask_babel import force_locale, gettext
from sqlalchemy.orm import Session

from bulksign.documents.audit_record import document_title
from bulksign.mail.mailer import MailNotNeeded, text_builder
from bulksign.mail.text_segments import segments
from bulksign.models import OutgoingMail, SigningRequest
from bulksign.models.mail import MailKind
from bulksign.models.status import WAITING_FOR_RECIPIENT, Status
from bulksign.signing.links import current_token, short_signing_url

#: A text may cost this many segments at most.
MAX_SEGMENTS = 2


def first_name(name: str) -> str:
    """The first word of the row's name: all a text says of the person."""
    return (name or "").split(maxsplit=1)[0] if (name or "").strip() else ""


def link_text(*, language: str, name: str, sender: str, title: str, link: str, reminder: bool) -> str:
    """The text, fitted into ``MAX_SEGMENTS``: the title shortened first, then the sender; the link kept whole."""
    for shown_sender, shown_title in _shortenings(sender, title):
        text = _words(
            language=language, name=name, sender=shown_sender, title=shown_title, link=link, reminder=reminder
        )
        if segments(text).count <= MAX_SEGMENTS:
            return text
    return text  # an APP_URL too long for any text: the link is never cut


def _shortenings(sender: str, title: str) -> Iterator[tuple[str, str]]:
    """(sender, title) pairs, longest first: the whole title, shorter and shorter ones, then a shorter sender."""
    yield sender, title
    for cut in range(len(title) - 1, 0, -1):
        yield sender, _cut(title, cut)
    for cut in range(len(sender) - 1, 0, -1):
        yield _cut(sender, cut), _cut(title, 1) if title else ""


def _cut(value: str, keep: int) -> str:
    """The first ``keep`` characters and a mark that more followed (three dots: "…" is not in GSM-7)."""
    return value[:keep].rstrip() + "..."


def _words(*, language: str, name: str, sender: str, title: str, link: str, reminder: bool) -> str:
    with force_locale(language):
        if reminder:
            words = gettext(
                'Reminder: %(sender)s asks you to sign "%(title)s": %(link)s', sender=sender, title=title, link=link
            )
        elif name:
            words = gettext(
                '%(name)s, %(sender)s asks you to sign "%(title)s": %(link)s',
                name=name,
                sender=sender,
                title=title,
                link=link,
            )
        else:
            words = gettext('%(sender)s asks you to sign "%(title)s": %(link)s', sender=sender, title=title, link=link)
        return str(words)


def request_link_text(request: SigningRequest, *, token: str, app: Flask, reminder: bool) -> str:
    """The text carrying ``request``'s link: its batch's language, its owner (else the organisation) as sender."""
    batch = request.batch
    owner = batch.created_by
    sender = (owner.display_name if owner else "") or app.config["ORG_NAME"] or "Bulksign"
    return link_text(
        language=batch.language,
        name=first_name(request.name),
        sender=sender,
        title=document_title(batch),
        link=short_signing_url(app_url=app.config["APP_URL"], token=token),
        reminder=reminder,
    )


def _live_link(session: Session, mail: OutgoingMail, app: Flask, *, waiting: bool) -> tuple[SigningRequest, str]:
    """The request of ``mail`` and its live token; ``waiting``: only while the request waits for its recipient
    (a reminder, or a link again after a bounce, is no longer needed once it signed or ended)."""
    request = session.get_one(SigningRequest, mail.request_id)
    token = current_token(request, secret=app.config["SECRET_KEY"])
    if token is None or not request.token_hash:
        raise LookupError(f"request {request.id} has no live signing link")
    if waiting and Status(request.status) not in WAITING_FOR_RECIPIENT:
        raise MailNotNeeded(f"the request is {request.status}")
    return request, token


@text_builder(MailKind.INVITATION)
def invitation_text(session: Session, mail: OutgoingMail, app: Flask) -> str:
    request, token = _live_link(session, mail, app, waiting=False)
    return request_link_text(request, token=token, app=app, reminder=False)


@text_builder(MailKind.REMINDER)
def reminder_text(session: Session, mail: OutgoingMail, app: Flask) -> str:
    request, token = _live_link(session, mail, app, waiting=True)
    return request_link_text(request, token=token, app=app, reminder=True)


@text_builder(MailKind.LINK_AGAIN)
def link_again_text(session: Session, mail: OutgoingMail, app: Flask) -> str:
    request, token = _live_link(session, mail, app, waiting=True)
    return request_link_text(request, token=token, app=app, reminder=False)

"""The mails to one party of a request several sign: its invitation, another party's decline, the completed PDF."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flask import Flask, render_template
from flask_babel import force_locale
from flask_babel import gettext as _
from flask_mail import Message
from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.doc_templates.jinja_sandbox import render_text
from bulksign.doc_templates.mail_texts import mail_text
from bulksign.doc_templates.template_parties import party_label
from bulksign.documents.audit_record import document_title
from bulksign.mail.mailer import MailNotNeeded, builder, queue_mail
from bulksign.models import RECIPIENT_ROLE, Party, SigningRequest
from bulksign.models.mail import MailKind, OutgoingMail
from bulksign.models.parties import PartyStatus
from bulksign.models.requests import version_suffix
from bulksign.signing import digests
from bulksign.signing.invitations import html_body
from bulksign.signing.routing import (
    PARTY_INVITATION,
    link_nonce,
    parties_in_order,
    party_context,
    party_link,
    party_person,
)


def tell_declined(session: Session, *, request: SigningRequest, decliner: Party, now: datetime) -> list[int]:
    """A mail to every other party already invited that the request was declined, by whom and why, but a party the
    countersigner's digest serves (its page says so: ``countersign_done``); the ids of the rows. The caller
    commits."""
    told = []
    by_digest = _served_by_digest(session, request.id)
    for party in parties_in_order(session, request.id):
        if party.id == decliner.id or party.status == PartyStatus.WAITING or party.id in by_digest:
            continue
        email, _name = party_person(party)
        if not email:
            continue  # reached by text alone: no address to tell
        with force_locale(request.batch.language):
            subject = _("Declined: %(name)s", name=document_title(request.batch))
        told.append(
            queue_mail(
                session,
                key=f"party-declined-{request.id}-{party.role}{version_suffix(request.document_version)}",
                kind=MailKind.PARTY_DECLINED,
                to_email=email,
                subject=subject,
                now=now,
                request_id=request.id,
                batch_id=request.batch_id,
                party_id=party.id,
            ).id
        )
    return told


def completed_mails(
    session: Session, *, request: SigningRequest, attachment: dict[str, Any], subject: str, now: datetime
) -> list[int]:
    """The completed, sealed PDF to every party but the recipient (whose confirmation is the request's own) and a
    party the countersigner's digest serves (one mail per document is what the digest spares them: their page
    lists the sealed copies, ``countersign_done``); the ids of the rows. The caller commits."""
    ids = []
    by_digest = _served_by_digest(session, request.id)
    for party in parties_in_order(session, request.id):
        # A party reached by text alone has no address for the PDF (a text cannot carry it).
        if party.role == RECIPIENT_ROLE or party.id in by_digest or not party.email:
            continue
        ids.append(
            queue_mail(
                session,
                key=f"party-completed-{request.id}-{party.role}",
                kind=MailKind.PARTY_COMPLETED,
                to_email=party_person(party)[0],
                subject=subject,
                now=now,
                request_id=request.id,
                batch_id=request.batch_id,
                party_id=party.id,
                attachments=[attachment],
            ).id
        )
    return ids


def _served_by_digest(session: Session, request_id: int) -> set[int]:
    return set(session.scalars(select(Party.id).where(Party.request_id == request_id, digests.served_by_digest())))


def mailed_party(session: Session, mail: OutgoingMail) -> Party | None:
    """The party a mail to one party of a request is for."""
    return session.get(Party, mail.party_id) if mail.party_id is not None else None


@builder(PARTY_INVITATION)
def build_party_invitation(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """A party's invitation: the template's invitation text, with the party's name and own link."""
    party = mailed_party(session, mail)
    if party is None:
        raise LookupError(f"mail {mail.id} names no party")
    token = party_link(party, secret=app.config["SECRET_KEY"])
    if token is None:
        raise LookupError(f"party {party.id} has no live signing link")
    if f"-{link_nonce(party)[:12]}@" not in mail.message_id:
        raise MailNotNeeded(f"party {party.id} was sent a newer link than this invitation's")
    request = party.request
    batch = request.batch
    context = party_context(request, party, token=token, app=app, now=mail.created_at)
    body = render_text(mail_text(batch.template_version.email_body, language=batch.language), context)
    message = Message(
        subject=mail.subject,
        recipients=[mail.to_email],
        body=body,
        html=html_body(body, link=context["signing_link"], pixel="", language=batch.language),
        sender=app.config["MAIL_DEFAULT_SENDER"],
        reply_to=batch.reply_to or (batch.created_by.email if batch.created_by else None),
    )
    message.msgId = mail.message_id
    return message


def _plain(mail: OutgoingMail, app: Flask, *, template: str, **context: Any) -> Message:
    request = context["request"]
    with force_locale(request.batch.language):
        body = render_template(template, document_name=document_title(request.batch), **context)
    message = Message(
        subject=mail.subject, recipients=[mail.to_email], body=body, reply_to=request.batch.reply_to or None
    )
    message.msgId = mail.message_id
    return message


@builder(MailKind.PARTY_DECLINED)
def build_party_declined(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """To a party already invited: another party declined, and why; nothing more will be asked of them."""
    request = session.get_one(SigningRequest, mail.request_id)
    decliner = next(p for p in parties_in_order(session, request.id) if p.status == PartyStatus.DECLINED)
    return _plain(
        mail,
        app,
        template="emails/party_declined.txt",
        request=request,
        role=party_label(request.batch.template_version, role=decliner.role, language=request.batch.language or "en"),
        who=party_person(decliner)[1] or party_person(decliner)[0],
        reason=decliner.decline_reason or "",
    )


@builder(MailKind.PARTY_COMPLETED)
def build_party_completed(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """To a party other than the recipient: every party has signed; the sealed PDF is attached."""
    request = session.get(SigningRequest, mail.request_id)
    return _plain(mail, app, template="emails/party_completed.txt", request=request)

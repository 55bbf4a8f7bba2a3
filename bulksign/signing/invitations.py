"""Invitation mails: the personal signing link, the template's subject and body, an open-tracking pixel.

The mail row is keyed by the request and its link nonce, so re-queueing after a crash finds the
same row (same Message-ID, same link); a new link (resend, retry) makes a new invitation.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from flask import Flask
from flask_babel import force_locale
from flask_mail import Message
from markupsafe import Markup, escape
from sqlalchemy import Row, Update, bindparam, select, update
from sqlalchemy.orm import Session, joinedload
from sqlalchemy.orm.attributes import set_committed_value

from bulksign.batches.settling import record_outcome, settles
from bulksign.batches.states import transition
from bulksign.core.branding import brand_from, logo_src
from bulksign.core.localtime import batch_time
from bulksign.core.logs import log
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.jinja_sandbox import render_text
from bulksign.doc_templates.mail_texts import mail_text
from bulksign.doc_templates.value_filters import LANGUAGE_VARIABLE
from bulksign.mail.mail_headers import one_line
from bulksign.mail.mailer import MailNotNeeded, builder, message_id_for, queue_mails
from bulksign.mail.outcomes import Delivery, Outcome
from bulksign.models import Batch, Event, OutgoingMail, SigningRequest, TemplateVersion, utcnow
from bulksign.models.mail import Channel, MailKind, MailStatus, TextReason
from bulksign.models.status import WAITING_FOR_RECIPIENT, Status
from bulksign.signing.links import current_token, issue_links, signing_url

KIND = MailKind.INVITATION
logger = logging.getLogger(__name__)


def invitation_key(request: SigningRequest) -> str:
    return f"invitation-{request.id}-{(request.token_nonce or '')[:12]}"


def text_invitation_key(request: SigningRequest) -> str:
    """The key of the invitation by text of a request whose row has a phone and no address."""
    return f"text-{invitation_key(request)}"


def deadline_for(batch: Batch, *, sent_at: datetime) -> datetime:
    """When a request of ``batch`` sent at ``sent_at`` expires: the batch's fixed deadline, else ``deadline_days`` later."""
    return batch.deadline_at or sent_at + timedelta(days=batch.deadline_days)


def request_deadline(request: SigningRequest, *, sent_at: datetime) -> datetime:
    """The deadline of a request (re)sent at ``sent_at``: the one a resend with extra days fixed, else the batch's."""
    if request.deadline_days and request.expires_at is not None:
        return request.expires_at
    return deadline_for(request.batch, sent_at=sent_at)


def extended_deadline(request: SigningRequest | Row[Any], *, batch: Batch, extend_days: int, now: datetime) -> datetime:
    """Extra days extend: from the current deadline, or from now when that has passed (never shortened)."""
    current = request.expires_at or deadline_for(batch, sent_at=request.sent_at or now)
    return max(current, now) + timedelta(days=extend_days)


def tracking_mac(request_id: int, *, secret: str) -> str:
    """Proof that a pixel URL was made by us; derived from the request id only, never from the signing token."""
    return hmac.new(secret.encode(), f"open:{request_id}".encode(), hashlib.sha256).hexdigest()[:32]


def tracking_url(*, app_url: str, request_id: int, secret: str) -> str:
    return f"{app_url}/t/{request_id}.{tracking_mac(request_id, secret=secret)}.gif"


def pixel_request_id(*, name: str, secret: str) -> int | None:
    """The request whose pixel ``name`` (``<id>.<mac>.gif``) is, if we made it; else None."""
    request_id, _, rest = name.partition(".")
    mac = rest.removesuffix(".gif")
    if (
        request_id.isdigit()
        and len(request_id) < 19
        and hmac.compare_digest(mac.encode(), tracking_mac(int(request_id), secret=secret).encode())
    ):
        return int(request_id)
    return None


def record_email_open(session: Session, *, request_id: int, now: datetime) -> bool:
    """Record the first time the invitation's pixel was fetched (an ``email.opened`` event); later opens change
    nothing. Whether this was the first."""
    row = session.execute(
        update(SigningRequest)
        .where(SigningRequest.id == request_id, SigningRequest.email_opened_at.is_(None))
        .values(email_opened_at=now)
        .returning(SigningRequest.batch_id)
    ).first()
    if row:
        session.add(
            Event(request_id=request_id, batch_id=row.batch_id, type="email.opened", created_at=now, actor="recipient")
        )
        log(logger, logging.INFO, "invitation opened", request_id=request_id)
    session.commit()
    return row is not None


_IMG = re.compile(r"<img\b[^>]*>", re.IGNORECASE)
_SRC = re.compile(r"""\bsrc\s*=\s*["']?[^"'\s>]*/t/([^"'\s>/]+)""", re.IGNORECASE)


def without_open_pixels(*, html: str, secret: str) -> str:
    """``html`` with our open-tracking images taken out, for staff who read a mail: their view is no open."""

    def keep(img: re.Match[str]) -> str:
        src = _SRC.search(img.group(0))
        return "" if src and pixel_request_id(name=src.group(1), secret=secret) is not None else img.group(0)

    return _IMG.sub(keep, html)


def mail_context(request: SigningRequest, *, token: str, app: Flask, deadline: datetime) -> dict[str, Any]:
    """What the subject and body templates may use: the row's data and the standard variables."""
    batch = request.batch
    owner = batch.created_by
    return {
        **(request.data or {}),
        # Empty for a row without one (not the address): the default texts then greet without a name.
        "name": request.name or "",
        "email": request.email,
        "sender": owner.shown_name if owner else app.config["MAIL_DEFAULT_SENDER"],
        "document_name": batch.template_version.template.name,
        "signing_link": signing_url(app_url=app.config["APP_URL"], token=token),
        # Recipients read the date in their batch's language and time zone.
        "deadline": batch_time(deadline, batch),
        # The language ``|date``, ``|money`` and ``|in_words`` write in.
        LANGUAGE_VARIABLE: batch.language or "en",
    }


def load_requests(session: Session, request_ids: Sequence[int]) -> list[SigningRequest]:
    """The requests with their batch, template version, template and owner, in one query, in id order."""
    batch = joinedload(SigningRequest.batch)
    return list(
        session.scalars(
            select(SigningRequest)
            .where(SigningRequest.id.in_(list(request_ids)))
            .order_by(SigningRequest.id)
            .options(
                batch.joinedload(Batch.template_version).joinedload(TemplateVersion.template),
                batch.joinedload(Batch.created_by),
            )
        ).unique()
    )


@dataclass(frozen=True)
class QueuedInvitations:
    #: request id → id of its invitation row.
    mail_ids: dict[int, int]
    #: request id → why its invitation could not be written (the subject template failed on its row).
    errors: dict[int, str]


def queue_invitations(session: Session, *, request_ids: Sequence[int], now: datetime, app: Flask) -> QueuedInvitations:
    """The invitation rows of generated requests (issuing a link where none is live), in a few statements.

    The caller commits.
    """
    requests = load_requests(session, request_ids)
    secret = app.config["SECRET_KEY"]
    tokens = {r.id: token for r in requests if r.token_hash and (token := current_token(r, secret=secret))}
    tokens.update(issue_links(session, requests=[r for r in requests if r.id not in tokens], secret=secret, now=now))
    mails: list[dict[str, Any]] = []
    errors: dict[int, str] = {}
    for request in requests:
        if not request.email:
            # A row reached by text alone (the batch's channel allowed it): its link goes to its phone.
            if not request.phone:
                errors[request.id] = "The request has neither an address nor a phone to send its link to."
                continue
            mails.append(
                dict(
                    key=text_invitation_key(request),
                    kind=KIND,
                    to_email="",
                    subject="",
                    request_id=request.id,
                    batch_id=request.batch_id,
                    channel=Channel.TEXT,
                    to_phone=request.phone,
                    text_reason=TextReason.NO_ADDRESS,
                )
            )
            continue
        context = mail_context(
            request, token=tokens[request.id], app=app, deadline=request_deadline(request, sent_at=now)
        )
        try:
            subject = render_text(
                mail_text(request.batch.template_version.email_subject, language=request.batch.language), context
            )
        except TemplateError as exc:
            errors[request.id] = f"The invitation mail could not be filled in: {exc}"
            continue
        mails.append(
            dict(
                key=invitation_key(request),
                kind=KIND,
                to_email=request.email,
                subject=one_line(text=subject),
                request_id=request.id,
                batch_id=request.batch_id,
            )
        )
    ids = queue_mails(session, mails, now=now)
    return QueuedInvitations(mail_ids={m["request_id"]: i for m, i in zip(mails, ids)}, errors=errors)


def record_sent(
    session: Session,
    *,
    request: SigningRequest,
    mail: OutgoingMail,
    now: datetime,
    reconciled: bool = False,
    mark_mail_sent: bool = False,
) -> bool:
    """sending → sent for a request whose invitation ``mail`` the server accepted (``mail.sent_at``); the caller commits.

    ``mark_mail_sent``: the server accepted it just now and the mail row does not say so yet (the sender's
    path): the row is recorded sent at ``now`` in the move's own statement, whether or not the move wins.
    """
    also, also_params = None, None
    if mark_mail_sent:
        also, also_params = _MAIL_SENT, {"mail_id": mail.id, "mail_sent_at": now}
        # What the row will say once this commits; set as loaded, so no second UPDATE is flushed.
        for name, value in (("status", MailStatus.SENT), ("sent_at", now), ("error", None)):
            set_committed_value(mail, name, value)
    details = {"message_id": mail.message_id, **({"reconciled": True} if reconciled else {})}
    return mark_sent(
        session,
        request=request,
        sent_at=mail.sent_at or now,
        now=now,
        details=details,
        also=also,
        also_params=also_params,
    )


#: ``record_sent``'s UPDATE of the mail row, built once (``transition`` caches the move's statement with it).
_MAIL_SENT = (
    update(OutgoingMail)
    .where(OutgoingMail.id == bindparam("mail_id"))
    .values(status=MailStatus.SENT, sent_at=bindparam("mail_sent_at"), error=None)
)


def mark_sent(
    session: Session,
    *,
    request: SigningRequest,
    sent_at: datetime,
    now: datetime,
    details: dict[str, Any],
    also: Update | None = None,
    also_params: Mapping[str, Any] | None = None,
) -> bool:
    """sending → sent by compare-and-set, the request's deadline counted from ``sent_at``; the caller commits."""
    return bool(
        transition(
            session,
            request.id,
            frm=Status.SENDING,
            to=Status.SENT,
            now=now,
            sent_at=sent_at,
            expires_at=request_deadline(request, sent_at=sent_at),
            error_message=None,
            details=details,
            also=also,
            also_params=also_params,
        )
    )


def delivered_invitations(session: Session, *, request_ids: Sequence[int]) -> list[tuple[SigningRequest, OutgoingMail]]:
    """The requests among ``request_ids`` whose current invitation (by mail or text) is recorded sent, each with it."""
    requests = {
        message_id_for(key(r)): r
        for r in load_requests(session, request_ids)
        if r.token_nonce
        for key in (invitation_key, text_invitation_key)
    }
    if not requests:
        return []
    mails = session.scalars(
        select(OutgoingMail).where(
            OutgoingMail.message_id.in_(list(requests)),
            OutgoingMail.status.in_([MailStatus.SENT, MailStatus.DELIVERED]),
        )
    )
    return [(requests[mail.message_id], mail) for mail in mails]


@builder(MailKind.LINK_AGAIN)
def build_link_again(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """The invitation again, by mail, after the text with its link failed: while the request still waits."""
    request = session.get_one(SigningRequest, mail.request_id)
    if Status(request.status) not in WAITING_FOR_RECIPIENT:
        raise MailNotNeeded(f"the request is {request.status}")
    return build_invitation(session, mail, app)


@builder(KIND)
def build_invitation(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """The invitation as it goes out: text and HTML, the link, the pixel, the row's Message-ID."""
    request = session.get_one(SigningRequest, mail.request_id)
    secret = app.config["SECRET_KEY"]
    token = current_token(request, secret=secret)
    if token is None or not request.token_hash:
        raise LookupError(f"request {request.id} has no live signing link")
    batch = request.batch
    context = mail_context(request, token=token, app=app, deadline=request_deadline(request, sent_at=utcnow()))
    version = batch.template_version
    subject = render_text(mail_text(version.email_subject, language=batch.language), context)  # one line when sent
    body = render_text(mail_text(version.email_body, language=batch.language), context)
    pixel = tracking_url(app_url=app.config["APP_URL"], request_id=request.id, secret=secret)
    return link_message(
        mail, batch=batch, subject=subject, body=body, link=context["signing_link"], pixel=pixel, app=app
    )


def link_message(
    mail: OutgoingMail, *, batch: Batch, subject: str, body: str, link: str, pixel: str, app: Flask
) -> Message:
    """A mail carrying a signing link, as invitations and reminders send it: text and HTML, the batch's sender
    and reply-to, the row's Message-ID."""
    message = Message(
        subject=subject,
        recipients=[mail.to_email],
        body=body,
        html=html_body(body, link=link, pixel=pixel, language=batch.language),
        sender=app.config["MAIL_DEFAULT_SENDER"],
        reply_to=batch.reply_to or (batch.created_by.email if batch.created_by else None),
    )
    message.msgId = mail.message_id
    return message


@settles(KIND)
def settle_invitation(
    session: Session, *, mail: OutgoingMail, request: SigningRequest | None, delivery: Delivery, now: datetime
) -> None:
    """Accepted: the mail row and the request's sending → sent in one statement (``record_sent``). Failed or no
    longer needed: the request moves to that status with the mail's error. The caller commits at once."""
    if request is None:
        raise LookupError(f"invitation {mail.id} has no request")
    if delivery.kind is Outcome.SENT:
        record_sent(session, request=request, mail=mail, now=now, mark_mail_sent=True)
        return
    record_outcome(session, mail=mail, request=request, delivery=delivery, now=now)
    transition(
        session,
        request.id,
        frm=Status.SENDING,
        to=Status(delivery.kind.value),
        now=now,
        error_message=delivery.reason[:2000],
        details={"error": delivery.reason[:500]},
    )


def html_body(text: str, *, link: str, pixel: str, language: str) -> str:
    """The plain body as HTML in the organisation's look: same paragraphs, the signing link clickable and as a
    button, the open pixel at the end; its own words (the button, the footer) in the batch's ``language``."""
    from flask import current_app, render_template

    brand = brand_from(current_app.config)
    logo = logo_src(brand, base=current_app.config["APP_URL"])
    paragraphs = [
        Markup("<br>".join(_linked(line, link, color=brand.text_color) for line in p.split("\n")))
        for p in text.split("\n\n")
        if p.strip()
    ]
    # A worker has no request to take a locale from, so the frame would be English under a Russian text.
    with force_locale(language):
        return render_template(
            "emails/_branded.html",
            brand=brand,
            paragraphs=paragraphs,
            link=link,
            pixel=pixel,
            logo=None if logo.lower().endswith(".svg") else logo,
        )


def _linked(line: str, link: str, *, color: str) -> str:
    """One escaped line of text with the signing link made clickable."""
    return str(escape(line)).replace(
        str(escape(link)), f'<a href="{escape(link)}" style="color:{color}">{escape(link)}</a>'
    )

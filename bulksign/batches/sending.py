"""Sending a chunk of outgoing mails: claim them, send each through ``mail.delivery``, settle what happened;
each outcome is committed on its own. docs/architecture/mail.md has the guarantees."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from flask import Flask
from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.batches import (
    approval,
    approval_requests,
    cancel_notices,
    correction_notices,
    expiry,
    notices,
    reminder_mails,
    texting,
)
from bulksign.batches.bounces import record_refused
from bulksign.batches.notices import queued_completion_notices
from bulksign.batches.progress import cancel_if_batch_stopped, close_if_done
from bulksign.batches.settling import SETTLES, record_outcome
from bulksign.batches.states import transition
from bulksign.core.error_tracking import OperatorFaults
from bulksign.core.extensions import db
from bulksign.core.logs import log
from bulksign.mail.delivery import Sender
from bulksign.mail.mailer import FOR_CANCELLED
from bulksign.mail.outcomes import AGAIN, SERVER_GONE, Delivery, Outcome
from bulksign.mail.smtp_link import SmtpLink
from bulksign.models import OutgoingMail, SigningRequest, utcnow
from bulksign.models.mail import Channel, MailKind, MailStatus
from bulksign.models.status import Status
from bulksign.ops import telemetry
from bulksign.people import password_resets
from bulksign.recipients.phone_suppressions import barred_among, not_texted_reason
from bulksign.recipients.suppressions import address_is_dead, in_force_among, not_sent_reason, suppress
from bulksign.signing import digests, invitations, link_texts, one_time_codes, party_mails, sealing
from bulksign.signing import recipient_actions as signing
from bulksign.signing.invitations import load_requests
from bulksign.work import stopping
from bulksign.work.pipeline import SEND, enqueue_sends, hand_back, top_up

logger = logging.getLogger(__name__)

#: The modules whose ``@mailer.builder`` functions build the mails sent here (and whose ``@settles`` steps settle
#: them): importing them here fills both registries wherever mail is sent (``tests/work/test_queues.py`` checks it).
BUILDER_MODULES = (
    approval,
    approval_requests,
    cancel_notices,
    correction_notices,
    digests,
    expiry,
    invitations,
    link_texts,
    notices,
    one_time_codes,
    password_resets,
    party_mails,
    reminder_mails,
    sealing,
    signing,
)

INVITATION = MailKind.INVITATION
#: A request not out yet: its own invitation not yet claimed by a mail worker.
NOT_OUT = (Status.GENERATING.value, Status.GENERATED.value)
#: Mails that never wait for their request's own invitation: it, and the notice of a correction (about the version
#: before, so it goes ahead of the new version's invitations).
NEVER_HELD = frozenset({INVITATION, MailKind.CORRECTION_NOTICE})


class TransientFailure(RuntimeError):
    """The mail was not sent for a reason that may pass; RQ re-runs the job after a backoff."""


def send_chunk(mail_ids: list[int], *, app: Flask, link: SmtpLink) -> str:
    """Send the queued mails among ``mail_ids`` through ``link``; returns what happened. Raises TransientFailure to
    retry the rest."""
    session = db.session
    limit = app.config["MAIL_MAX_ATTEMPTS"]
    claim = _claim(session, mail_ids, limit=limit)
    to_send, exhausted = claim.to_send, claim.exhausted
    if claim.held and not to_send and not exhausted:
        raise TransientFailure(f"{len(claim.held)} held: their requests' own invitations are not out yet")
    if not to_send and not exhausted:
        return "skipped: nothing to send"
    sender = Sender(app=app, link=link)
    try:
        return _send_claimed(session, claim, sender=sender, limit=limit)
    finally:
        sender.figures.write()


def _send_claimed(session: Session, claim: _Claim, *, sender: Sender, limit: int) -> str:
    """``send_chunk`` once its mails are claimed."""
    to_send, exhausted = claim.to_send, claim.exhausted
    requests: dict[int | None, SigningRequest] = {
        r.id: r for r in load_requests(session, [m.request_id for m in to_send + exhausted if m.request_id])
    }
    # Read now: a settled request is expired by its transition, and re-reading each one costs a query.
    batch_ids = {r.batch_id for r in requests.values()}
    # This chunk left its batches' line: their next invitations go to the back of it (``pipeline.top_up``).
    top_up(SEND, {requests[m.request_id].batch_id for m in to_send if m.kind == INVITATION and m.request_id})
    outcomes: Counter[str] = Counter()
    for mail in exhausted:
        said = mail.error or "the worker stopped while sending"
        failed = Delivery(Outcome.FAILED, f"The mail could not be delivered after {mail.attempts} attempts: {said}")
        outcomes[_settle(session, mail, requests.get(mail.request_id), failed, figures=sender.figures)] += 1
    retry_reason = ""
    handed_back: list[OutgoingMail] = []
    #: Texts queued in place of mails refused at sending (``texting.text_after_refusal``), and those left for later.
    fallbacks: list[OutgoingMail] = []
    later: list[OutgoingMail] = []
    # A bad address or one refused mail is the batch's business; our login or storage failing is the operator's.
    faults = OperatorFaults()
    #: Channels whose server (the mail server, the text provider) went down or silent in this chunk, and the
    #: messages of theirs given back untried: the rest would only wait for the same timeout.
    gone: set[Channel] = set()
    untried: list[OutgoingMail] = []
    for position, mail in enumerate(to_send):
        if stopping.is_requested():
            handed_back = to_send[position:]
            break
        if Channel(mail.channel) in gone:
            untried.append(mail)
            continue
        if not sender.wait_for_slot(stop=stopping.requested, channel=Channel(mail.channel)):
            if stopping.is_requested():
                handed_back = to_send[position:]
            else:
                _give_back(session, to_send[position:], untried=True)
                retry_reason = "mail throttle busy"
            break
        delivery = _last_attempt(_send(session, sender, mail), mail=mail, limit=limit)
        if delivery.fault is not None:
            faults.add(delivery.fault)
        outcomes[
            _settle(session, mail, requests.get(mail.request_id), delivery, fallbacks=fallbacks, figures=sender.figures)
        ] += 1
        if delivery.kind in AGAIN:
            retry_reason = delivery.reason
        if delivery.kind in SERVER_GONE:
            gone.add(Channel(mail.channel))
    if untried:
        _give_back(session, untried, untried=True)
    # Invitations and reminders refused at sending whose links fall back to texts: sent now, in this job.
    for position, text in enumerate(fallbacks):
        if (
            Channel.TEXT in gone
            or stopping.is_requested()
            or not sender.wait_for_slot(stop=stopping.requested, channel=Channel.TEXT)
        ):
            # Not tried: sent by another job; an invitation's request waits for it in ``generated``, claimable.
            later = fallbacks[position:]
            _give_back(session, later, untried=False)
            break
        text.attempts += 1
        session.commit()
        delivery = _last_attempt(_send(session, sender, text), mail=text, limit=limit)
        outcomes[
            _settle(session, text, requests.get(text.request_id), delivery, fallbacks=fallbacks, figures=sender.figures)
        ] += 1
    if handed_back:
        # The worker is stopping: the unsent rest goes back untried, to the queue, for another worker.
        _give_back(session, handed_back, untried=True)
        hand_back(SEND, [m.id for m in handed_back])
        outcomes["handed back"] = len(handed_back)
        log(logger, logging.INFO, "worker stopping, mails handed back", mail_ids=[m.id for m in handed_back])
    faults.report(stage="mail")
    closed = [batch_id for batch_id in batch_ids if close_if_done(session, batch_id=batch_id, now=utcnow())]
    session.commit()
    enqueue_sends([*queued_completion_notices(session, batch_ids=closed), *(t.id for t in later)])
    summary = ", ".join(f"{kind} {n}" for kind, n in sorted(outcomes.items()))
    if claim.held and not retry_reason:
        retry_reason = f"{len(claim.held)} held until their requests' own invitations are out"
    if retry_reason:
        raise TransientFailure(f"{summary or 'nothing sent'}; the rest will be tried again: {retry_reason}")
    return summary


def _send(session: Session, sender: Sender, mail: OutgoingMail) -> Delivery:
    """Send one mail; a text first counts against its batch's cap, and is uncounted when it does not go."""
    if mail.channel != Channel.TEXT:
        return sender.send(session, mail)
    stopped = texting.reserve_text(session, mail=mail, now=utcnow())
    if stopped is not None:
        return Delivery(Outcome.FAILED, stopped)
    delivery = sender.send(session, mail)
    if delivery.kind is not Outcome.SENT:
        texting.release_text(session, mail=mail)
    return delivery


def _last_attempt(delivery: Delivery, *, mail: OutgoingMail, limit: int) -> Delivery:
    """A mail the server deferred on its last attempt has failed (one the server never saw, ``down``, waits on)."""
    if delivery.kind not in (Outcome.RETRY, Outcome.UNREACHABLE) or mail.attempts < limit:
        return delivery
    said = f"The mail could not be delivered after {mail.attempts} attempts: {delivery.reason}"
    return Delivery(Outcome.FAILED, said, delivery.fault)


@dataclass(frozen=True)
class _Claim:
    #: The mails this job sends now, one more attempt counted each.
    to_send: list[OutgoingMail]
    #: Out of attempts: settled as failed.
    exhausted: list[OutgoingMail]
    #: Another party's mail of a request whose own invitation is not out yet: left queued, untried, for the retry.
    held: list[OutgoingMail]


def _claim(session: Session, mail_ids: list[int], *, limit: int) -> _Claim:
    """The chunk's queued mails this job may send (one more attempt counted), those out of attempts, and those that
    wait for their request's own invitation; committed."""
    mails = list(
        session.scalars(
            select(OutgoingMail)
            .where(OutgoingMail.id.in_(mail_ids), OutgoingMail.status == MailStatus.QUEUED)
            .order_by(OutgoingMail.id)
        )
    )
    mails = _without_suppressed(session, mails)
    cancel_if_batch_stopped(session, request_ids=[m.request_id for m in mails if m.request_id], now=utcnow())
    claimed = set(
        transition(
            session,
            [m.request_id for m in mails if m.kind == INVITATION and m.request_id is not None],
            frm=Status.GENERATED,
            to=Status.SENDING,
            now=utcnow(),
        ).won
    )
    # An invitation whose request is not ``generated`` belongs to someone else (or was cancelled meanwhile).
    mails = [m for m in mails if m.kind != INVITATION or m.request_id in claimed]
    # Only other mails' requests can be cancelled now. And a parallel step's other invitations wait until the
    # request's own is claimed (docs/architecture/mail.md). One read of those requests' states answers both.
    others = [m.request_id for m in mails if m.kind != INVITATION and m.kind not in FOR_CANCELLED and m.request_id]
    stopped_or_waiting: dict[int, str] = (
        {
            request_id: status
            for request_id, status in session.execute(
                select(SigningRequest.id, SigningRequest.status).where(
                    SigningRequest.id.in_(others), SigningRequest.status.in_([Status.CANCELLED.value, *NOT_OUT])
                )
            )
        }
        if others
        else {}
    )
    cancelled = {i for i, status in stopped_or_waiting.items() if status == Status.CANCELLED}
    not_out = {i for i, status in stopped_or_waiting.items() if status in NOT_OUT}
    to_send, exhausted, held = [], [], []
    for mail in mails:
        if mail.request_id in cancelled:
            mail.status = MailStatus.CANCELLED
        elif mail.kind not in NEVER_HELD and mail.request_id in not_out:
            held.append(mail)
        elif mail.attempts >= limit:
            # Claims are counted before the send, so even a worker that dies every time gives up.
            exhausted.append(mail)
        else:
            mail.attempts += 1
            to_send.append(mail)
    session.commit()
    return _Claim(to_send=to_send, exhausted=exhausted, held=held)


def _without_suppressed(session: Session, mails: list[OutgoingMail]) -> list[OutgoingMail]:
    """Mails to addresses on the suppression list (texts to numbers that opted out) are not sent; their invitations
    fail with the reason."""
    barred = in_force_among(session, [m.to_email for m in mails if m.channel == Channel.MAIL])
    stopped = barred_among(session, [m.to_phone or "" for m in mails if m.channel == Channel.TEXT])
    reasons = {
        mail.id: not_texted_reason(mail.to_phone or "")
        if mail.channel == Channel.TEXT
        else not_sent_reason(barred[mail.to_email.lower()])
        for mail in mails
        if (mail.to_phone in stopped if mail.channel == Channel.TEXT else mail.to_email.lower() in barred)
    }
    if not reasons:
        return mails
    now = utcnow()
    for mail in mails:
        if mail.id not in reasons:
            continue
        reason = reasons[mail.id]
        mail.status, mail.error = MailStatus.CANCELLED, reason
        if mail.kind == INVITATION and mail.request_id is not None:
            transition(
                session,
                mail.request_id,
                frm=Status.GENERATED,
                to=Status.FAILED,
                now=now,
                error_message=reason,
                details={
                    "suppressed": "opt_out" if mail.channel == Channel.TEXT else barred[mail.to_email.lower()].source
                },
            )
        log(
            logger,
            logging.INFO,
            "mail to a suppressed address not sent",
            mail_id=mail.id,
            request_id=mail.request_id,
            kind=mail.kind,
        )
    return [m for m in mails if m.id not in reasons]


def _give_back(session: Session, mails: list[OutgoingMail], *, untried: bool) -> None:
    """Between attempts an invitation's request waits in ``generated``: the retry can claim it again. Committed.

    ``untried``: these mails were claimed but not sent (the throttle or the server stopped the chunk),
    so their claim does not count as an attempt.
    """
    if untried:
        for mail in mails:
            mail.attempts -= 1
    transition(
        session,
        [m.request_id for m in mails if m.kind == INVITATION and m.request_id is not None],
        frm=Status.SENDING,
        to=Status.GENERATED,
        now=utcnow(),
        details={"retry": True},
    )
    session.commit()


def _settle(
    session: Session,
    mail: OutgoingMail,
    request: SigningRequest | None,
    delivery: Delivery,
    *,
    fallbacks: list[OutgoingMail] | None = None,
    figures: telemetry.Figures,
) -> Outcome:
    """Record one mail's outcome on the mail and what it moves, committed at once; a text queued in place of a
    refused mail joins ``fallbacks``. Returns the outcome."""
    now = utcnow()
    figures.count(telemetry.MAILS, (mail.kind, "deferred" if delivery.kind in AGAIN else delivery.kind))
    if delivery.kind in AGAIN:
        mail.error = delivery.reason
        _give_back(session, [mail], untried=delivery.kind is Outcome.DOWN)
        log(
            logger,
            logging.WARNING,
            "mail not sent, will retry",
            mail_id=mail.id,
            request_id=mail.request_id,
            attempt=mail.attempts,
            error=delivery.reason,
        )
        return Outcome.RETRY
    if delivery.reference:
        mail.provider_ref = delivery.reference
    if delivery.kind is Outcome.BOUNCED:
        text = _refused(session, mail, delivery, now=now)
        if text is not None and fallbacks is not None:
            fallbacks.append(text)
    else:
        SETTLES.get(mail.kind, record_outcome)(session, mail=mail, request=request, delivery=delivery, now=now)
    session.commit()
    level = logging.INFO if delivery.kind in (Outcome.SENT, Outcome.CANCELLED) else logging.ERROR
    log(
        logger,
        level,
        f"mail {delivery.kind}",
        mail_id=mail.id,
        request_id=mail.request_id,
        kind=mail.kind,
        error=mail.error,
    )
    return delivery.kind


def _refused(session: Session, mail: OutgoingMail, delivery: Delivery, *, now: datetime) -> OutgoingMail | None:
    """Refused for good, whatever its kind: the address is suppressed when the server says it is dead; the link of a
    recipient's invitation or reminder goes by text where the batch says so (the text returned), else the request
    bounces naming whose address it was (``bounces.record_refused``); the caller commits."""
    error = f"The recipient's mail server refused the address: {delivery.reason}"
    mail.status, mail.error = MailStatus.BOUNCED, error
    if address_is_dead(error):
        suppress(
            session,
            email=mail.to_email,
            source="smtp",
            reason=error,
            now=now,
            batch_id=mail.batch_id,
            request_id=mail.request_id,
        )
    text = texting.text_after_refusal(session, mail=mail, reason=delivery.reason or error, now=now)
    if text is not None:
        mail.error = f"{error} The link went by text instead."
        return text
    if mail.request_id:
        mail.error = record_refused(
            session,
            request_id=mail.request_id,
            email=mail.to_email,
            reason=delivery.reason or error,
            kind=mail.kind,
            now=now,
        )
    return None

"""Sending a chunk of outgoing mails: claim them, deliver each through the throttle and the SMTP link, settle it.

Order: (invitations: generated → sending, attempts counted, one commit for the chunk) → per mail: throttle →
SMTP → one statement marks the mail row sent and moves its request (``invitations.record_sent``), committed at
once. A crash between an SMTP answer and that commit (the statement, the batch counters' update and COMMIT:
without two-phase commit with the SMTP server there is always such a window) leaves the mail queued and its
request in ``sending``; the reconciler sends it again with the same Message-ID: at most one duplicate per
crash. A mail recorded sent whose request is still in ``sending`` (written before the two were one statement)
is finished by the reconciler without a re-send.

A mail server that cannot be reached at all (no connection: refused, no route, a 4xx greeting) is an outage,
not this mail's fault: the mail goes back untried, its attempts untouched, and waits for the server however
long it is down (RQ's backoff, then the reconciler); ``/readyz`` and an alert report an outage that lasts
(``mail_server``). Counted attempts are those the server saw: a 4xx answer, a connection lost mid-mail. In the
10,000-recipient soak a 60-s outage used up the attempts of the mail at the head of each retried chunk, and two
recipients' invitations failed for good.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass

from flask import Flask
from flask_mail import Message
from sqlalchemy import select

from bulksign.batches import approval, expiry, notices, reminders
from bulksign.batches.bounces import record_refused
from bulksign.batches.notices import queued_completion_notices
from bulksign.batches.progress import cancel_if_batch_stopped, close_if_done
from bulksign.batches.states import transition
from bulksign.core.error_tracking import Fault, OperatorFaults
from bulksign.core.extensions import db, get_redis
from bulksign.core.logs import log
from bulksign.documents import sealing
from bulksign.documents.storage import StorageError, backend_of, get_storage
from bulksign.mail.mail_headers import HeaderError, outgoing
from bulksign.mail.mailer import BUILDERS, MailNotNeeded
from bulksign.mail.smtp_link import SmtpLink
from bulksign.mail.throttle import MailThrottle
from bulksign.models import OutgoingMail, SigningRequest, utcnow
from bulksign.models.status import Status
from bulksign.ops import telemetry
from bulksign.people import password_resets
from bulksign.recipients.suppressions import address_is_dead, in_force_among, not_sent_reason, suppress
from bulksign.signing import digests, invitations, one_time_codes, routing
from bulksign.signing import recipient_actions as signing
from bulksign.signing.invitations import KIND as INVITATION
from bulksign.signing.invitations import load_requests, record_sent
from bulksign.work import stopping
from bulksign.work.pipeline import SEND, enqueue_sends, hand_back, top_up

logger = logging.getLogger(__name__)

#: The modules whose ``@mailer.builder`` functions build the mails sent here: importing them here fills
#: the registry wherever mail is sent (tests/test_queues.py checks that no builder lives elsewhere).
BUILDER_MODULES = (
    approval,
    digests,
    expiry,
    invitations,
    notices,
    one_time_codes,
    password_resets,
    reminders,
    routing,
    sealing,
    signing,
)


class TransientFailure(RuntimeError):
    """The mail was not sent for a reason that may pass; RQ re-runs the job after a backoff."""


@dataclass(frozen=True)
class Delivery:
    #: ``sent``, ``bounced``, ``failed`` or ``cancelled`` (final), ``retry`` (try again later),
    #: ``unreachable`` (retry, and stop the chunk) or ``down`` (the same, the attempt not counted).
    status: str
    #: What a person reads on the mail and the request.
    error: str | None = None
    #: Set when staff cannot mend it (storage, the server refusing our login): for Sentry.
    fault: Fault | None = None
    #: The server's own words for a refused address (``bounced``): the request's error names whose it was.
    reason: str | None = None


#: Outcomes after which the mail is tried again later.
_TRY_AGAIN = ("retry", "unreachable", "down")


def send_chunk(mail_ids: list[int], *, app: Flask, link: SmtpLink) -> str:
    """Send the queued mails among ``mail_ids`` through ``link``; returns what happened. Raises TransientFailure to
    retry the rest."""
    session = db.session
    claim = _claim(mail_ids, limit=app.config["MAIL_MAX_ATTEMPTS"])
    to_send, exhausted = claim.to_send, claim.exhausted
    if claim.held and not to_send and not exhausted:
        raise TransientFailure(f"{len(claim.held)} held: their requests' own invitations are not out yet")
    if not to_send and not exhausted:
        return "skipped: nothing to send"
    requests = {r.id: r for r in load_requests(session, [m.request_id for m in to_send + exhausted if m.request_id])}
    # Read now: a settled request is expired by its transition, and re-reading each one costs a query.
    batch_ids = {r.batch_id for r in requests.values()}
    # This chunk left its batches' line: their next invitations go to the back of it (``pipeline.top_up``).
    top_up(SEND, {requests[m.request_id].batch_id for m in to_send if m.kind == INVITATION})
    outcomes: Counter[str] = Counter()
    for mail in exhausted:
        outcomes[
            _settle(
                mail,
                requests.get(mail.request_id),
                Delivery(
                    "failed",
                    f"The mail could not be delivered after {mail.attempts} attempts: "
                    f"{mail.error or 'the worker stopped while sending'}",
                ),
            )
        ] += 1
    throttle = MailThrottle(
        get_redis(), rate=app.config["MAIL_RATE_PER_MINUTE"], window_seconds=app.config["MAIL_RATE_WINDOW_SECONDS"]
    )
    retry_reason = ""
    handed_back: list[OutgoingMail] = []
    # A bad address or one refused mail is the batch's business; our login or storage failing is the operator's.
    faults = OperatorFaults()
    for position, mail in enumerate(to_send):
        if stopping.is_requested():
            handed_back = to_send[position:]
            break
        if not _acquire(throttle, max_wait_seconds=app.config["THROTTLE_MAX_WAIT_SECONDS"], stop=stopping.requested):
            if stopping.is_requested():
                handed_back = to_send[position:]
            else:
                _give_back(to_send[position:], untried=True)
                retry_reason = "mail throttle busy"
            break
        delivery = _deliver_one(mail, app=app, link=link)
        if delivery.fault is not None:
            faults.add(delivery.fault)
        outcomes[_settle(mail, requests.get(mail.request_id), delivery)] += 1
        if delivery.status in _TRY_AGAIN:
            retry_reason = delivery.error
        if delivery.status in ("unreachable", "down"):
            # The server is down or silent: the rest of the chunk would only wait for the same timeout.
            _give_back(to_send[position + 1 :], untried=True)
            break
    if handed_back:
        # The worker is stopping: the unsent rest goes back untried, to the queue, for another worker.
        _give_back(handed_back, untried=True)
        hand_back(SEND, [m.id for m in handed_back])
        outcomes["handed back"] = len(handed_back)
        log(logger, logging.INFO, "worker stopping, mails handed back", mail_ids=[m.id for m in handed_back])
    faults.report(stage="mail")
    closed = [batch_id for batch_id in batch_ids if close_if_done(session, batch_id=batch_id, now=utcnow())]
    session.commit()
    enqueue_sends(queued_completion_notices(session, batch_ids=closed))
    summary = ", ".join(f"{kind} {n}" for kind, n in sorted(outcomes.items()))
    if claim.held and not retry_reason:
        retry_reason = f"{len(claim.held)} held until their requests' own invitations are out"
    if retry_reason:
        raise TransientFailure(f"{summary or 'nothing sent'}; the rest will be tried again: {retry_reason}")
    return summary


def _acquire(throttle: MailThrottle, *, max_wait_seconds: float, stop) -> bool:
    """Wait for a throttle slot (until ``stop()``); how long the wait took and whether it won go to ``telemetry``."""
    started = time.monotonic()
    allowed = throttle.acquire(max_wait_seconds=max_wait_seconds, stop=stop).allowed
    with telemetry.record(get_redis()) as figures:
        figures.count(telemetry.THROTTLE_WAIT, amount=time.monotonic() - started)
        figures.count(telemetry.THROTTLE_SLOTS, ("won" if allowed else "timed_out",))
    return allowed


#: A request not out yet: its own invitation not yet claimed by a mail worker.
NOT_OUT = (Status.GENERATING.value, Status.GENERATED.value)


@dataclass(frozen=True)
class _Claim:
    #: The mails this job sends now, one more attempt counted each.
    to_send: list[OutgoingMail]
    #: Out of attempts: settled as failed.
    exhausted: list[OutgoingMail]
    #: Another party's mail of a request whose own invitation is not out yet: left queued, untried, for the retry.
    held: list[OutgoingMail]


def _claim(mail_ids: list[int], *, limit: int) -> _Claim:
    """The chunk's queued mails this job may send (one more attempt counted), those out of attempts, and those that
    wait for their request's own invitation; committed."""
    session = db.session
    mails = list(
        session.scalars(
            select(OutgoingMail)
            .where(OutgoingMail.id.in_(mail_ids), OutgoingMail.status == "queued")
            .order_by(OutgoingMail.id)
        )
    )
    mails = _without_suppressed(mails)
    cancel_if_batch_stopped(session, request_ids=[m.request_id for m in mails if m.request_id], now=utcnow())
    claimed = set(
        transition(
            session,
            [m.request_id for m in mails if m.kind == INVITATION],
            frm=Status.GENERATED,
            to=Status.SENDING,
            now=utcnow(),
        ).won
    )
    # An invitation whose request is not ``generated`` belongs to someone else (or was cancelled meanwhile).
    mails = [m for m in mails if m.kind != INVITATION or m.request_id in claimed]
    # A claimed invitation's request is in ``sending``: only other mails' requests can be cancelled. And a parallel
    # step's other invitations wait until the request's own is claimed (``sending``): refused before that, the
    # manager's dead address could bounce nothing (``generated`` does not bounce), and two mail workers may take the
    # employee's chunk and the manager's at once. One read of those requests' states answers both.
    others = [m.request_id for m in mails if m.kind != INVITATION and m.request_id]
    stopped_or_waiting = (
        dict(
            session.execute(
                select(SigningRequest.id, SigningRequest.status).where(
                    SigningRequest.id.in_(others), SigningRequest.status.in_([Status.CANCELLED.value, *NOT_OUT])
                )
            ).all()
        )
        if others
        else {}
    )
    cancelled = {i for i, status in stopped_or_waiting.items() if status == Status.CANCELLED}
    not_out = {i for i, status in stopped_or_waiting.items() if status in NOT_OUT}
    to_send, exhausted, held = [], [], []
    for mail in mails:
        if mail.request_id in cancelled:
            mail.status = "cancelled"
        elif mail.kind != INVITATION and mail.request_id in not_out:
            held.append(mail)
        elif mail.attempts >= limit:
            # Claims are counted before the send, so even a worker that dies every time gives up.
            exhausted.append(mail)
        else:
            mail.attempts += 1
            to_send.append(mail)
    session.commit()
    return _Claim(to_send=to_send, exhausted=exhausted, held=held)


def _without_suppressed(mails: list[OutgoingMail]) -> list[OutgoingMail]:
    """Mails to addresses on the suppression list are not sent; their invitations fail with the reason."""
    barred = in_force_among(db.session, [m.to_email for m in mails])
    if not barred:
        return mails
    now = utcnow()
    for mail in mails:
        entry = barred.get(mail.to_email.lower())
        if entry is None:
            continue
        reason = not_sent_reason(entry)
        mail.status, mail.error = "cancelled", reason
        if mail.kind == INVITATION:
            transition(
                db.session,
                mail.request_id,
                frm=Status.GENERATED,
                to=Status.FAILED,
                now=now,
                error_message=reason,
                details={"suppressed": entry.source},
            )
        log(
            logger,
            logging.INFO,
            "mail to a suppressed address not sent",
            mail_id=mail.id,
            request_id=mail.request_id,
            kind=mail.kind,
        )
    return [m for m in mails if m.to_email.lower() not in barred]


def _deliver_one(mail: OutgoingMail, *, app: Flask, link: SmtpLink) -> Delivery:
    """Build one mail and hand it to the SMTP server; what the server said, in words."""
    build = BUILDERS[mail.kind]
    try:
        message = build(db.session, mail, app)
        _attach(message, mail.attachments or [])
        # Every builder's fields pass through the one header builder here, whatever values they were given.
        prepared = outgoing(message=message)
    except MailNotNeeded as exc:
        return Delivery("cancelled", f"Not sent, no longer needed: {exc}.")
    except StorageError as exc:
        # An attachment that cannot be read is storage's fault, not the mail's.
        return Delivery(
            "failed",
            f"The mail could not be built: {exc}",
            Fault(("storage-read", backend_of(app.config["STORAGE_URL"])), exc),
        )
    except (LookupError, HeaderError) as exc:
        return Delivery("failed", f"The mail could not be built: {exc}")
    outcome = link.send(prepared, app=app)
    if outcome.kind == "down":
        return Delivery("down", outcome.reason)
    if outcome.kind in ("retry", "unreachable"):
        if mail.attempts >= app.config["MAIL_MAX_ATTEMPTS"]:
            return Delivery(
                "failed",
                f"The mail could not be delivered after {mail.attempts} attempts: {outcome.reason}",
                outcome.fault,
            )
        return Delivery(outcome.kind, outcome.reason, outcome.fault)
    if outcome.kind == "bounced":
        return Delivery(
            "bounced", f"The recipient's mail server refused the address: {outcome.reason}", reason=outcome.reason
        )
    if outcome.kind == "failed":
        return Delivery("failed", f"The mail server refused the message: {outcome.reason}", outcome.fault)
    return Delivery("sent")


def _attach(message: Message, attachments: list[dict]) -> None:
    """Files listed on the mail row (e.g. the signed PDF of a confirmation), read from storage at send time."""
    for item in attachments:
        message.attach(
            filename=item["filename"], content_type=item["content_type"], data=get_storage().get(item["key"])
        )


def _give_back(mails: list[OutgoingMail], *, untried: bool) -> None:
    """Between attempts an invitation's request waits in ``generated``: the retry can claim it again. Committed.

    ``untried``: these mails were claimed but not sent (the throttle or the server stopped the chunk),
    so their claim does not count as an attempt.
    """
    if untried:
        for mail in mails:
            mail.attempts -= 1
    transition(
        db.session,
        [m.request_id for m in mails if m.kind == INVITATION],
        frm=Status.SENDING,
        to=Status.GENERATED,
        now=utcnow(),
        details={"retry": True},
    )
    db.session.commit()


def _settle(mail: OutgoingMail, request: SigningRequest | None, delivery: Delivery) -> str:
    """Record one mail's outcome on the mail and its request, committed at once. Returns the outcome."""
    session = db.session
    now = utcnow()
    with telemetry.record(get_redis()) as figures:
        figures.count(telemetry.MAILS, (mail.kind, "deferred" if delivery.status in _TRY_AGAIN else delivery.status))
    if delivery.status in _TRY_AGAIN:
        mail.error = delivery.error
        _give_back([mail], untried=delivery.status == "down")
        log(
            logger,
            logging.WARNING,
            "mail not sent, will retry",
            mail_id=mail.id,
            request_id=mail.request_id,
            attempt=mail.attempts,
            error=delivery.error,
        )
        return "retry"
    if delivery.status == "sent" and mail.kind == INVITATION:
        # The server has it: the mail row and the request's move in one statement, committed at once.
        record_sent(session, request=request, mail=mail, now=now, mark_mail_sent=True)
    else:
        mail.status, mail.error = delivery.status, delivery.error
        if delivery.status == "sent":
            mail.sent_at = now
        if delivery.status == "bounced" and address_is_dead(delivery.error or ""):
            suppress(
                session,
                email=mail.to_email,
                source="smtp",
                reason=delivery.error or "",
                now=now,
                batch_id=mail.batch_id,
                request_id=mail.request_id,
            )
        if mail.kind == INVITATION and delivery.status != "bounced":
            transition(
                session,
                request.id,
                frm=Status.SENDING,
                to=Status(delivery.status),
                now=now,
                error_message=delivery.error[:2000],
                details={"error": delivery.error[:500]},
            )
        elif delivery.status == "bounced" and mail.request_id:
            # Refused for good: the address is dead. The request bounces naming whose address it was (or, bounced
            # already by another party's, names it too: an employee's invitation refused after the manager's of the
            # same step), as a provider's report would.
            mail.error = record_refused(
                session,
                request_id=mail.request_id,
                email=mail.to_email,
                reason=delivery.reason or delivery.error,
                kind=mail.kind,
                now=now,
            )
    session.commit()
    level = logging.INFO if delivery.status in ("sent", "cancelled") else logging.ERROR
    log(
        logger,
        level,
        f"mail {delivery.status}",
        mail_id=mail.id,
        request_id=mail.request_id,
        kind=mail.kind,
        error=delivery.error,
    )
    return delivery.status

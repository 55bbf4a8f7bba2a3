"""What a recipient does with a link: open it, sign, or decline. Guarded by the state machine."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

import flask_mail
from flask import Flask
from flask_babel import force_locale
from flask_babel import lazy_gettext as _l
from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.batches.notices import notice_locale, notice_message, queue_notice
from bulksign.batches.states import transition
from bulksign.core.errors import Message
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.documents.audit_record import document_title
from bulksign.documents.storage import StorageError
from bulksign.mail.mailer import builder
from bulksign.models import RECIPIENT_ROLE, Event, Party, SigningRequest
from bulksign.models.mail import MailKind, OutgoingMail
from bulksign.models.parties import PartyStatus
from bulksign.models.requests import version_suffix
from bulksign.models.status import Status
from bulksign.signing import code_owners, link_proofs, one_time_codes, party_mails, routing
from bulksign.signing.acts import REFUSED, Act, DeclineOutcome, OpenOutcome, SignOutcome
from bulksign.signing.field_entry import (
    NOTHING_FILLED,
    FilledForm,
    check_entries,
    earlier_values,
    save_entries,
    signed_entries,
)
from bulksign.signing.page_states import PageState, page_state, signer_state
from bulksign.signing.parties import move_parties
from bulksign.signing.signer_input import InvalidInput, clean_signature
from bulksign.work.pipeline import enqueue_sends
from bulksign.work.queues import ADVANCE, SEAL

logger = logging.getLogger(__name__)

MAX_REASON_LENGTH = 2000
#: Re-opening the page adds a ``page.opened`` event at most this often, so reloads do not flood the audit trail.
REOPEN_EVENT_EVERY = timedelta(hours=1)


def _open(session: Session, request: SigningRequest, *, now: datetime, ip: str | None, user_agent: str | None) -> bool:
    won = transition(
        session,
        request.id,
        frm=Status.SENT,
        to=Status.OPENED,
        now=now,
        actor="recipient",
        ip=ip,
        user_agent=user_agent,
        opened_at=now,
    )
    return bool(won)


def open_request(
    session: Session, *, request_id: int, now: datetime, ip: str | None, user_agent: str | None
) -> OpenOutcome:
    """The recipient opened the page: the first open moves sent→opened (with an event); commits."""
    request = session.get(SigningRequest, request_id)
    state = page_state(request, now=now)
    if request is None or state != PageState.WAITING:
        return OpenOutcome(status=state, request_id=request_id)
    user_agent = (user_agent or "")[:500]
    if request.status == Status.SENT and _open(session, request, now=now, ip=ip, user_agent=user_agent):
        session.commit()
        return OpenOutcome(status=Act.OPENED, request_id=request_id)
    last = session.scalar(
        select(Event.created_at)
        .where(Event.request_id == request_id, Event.type.in_(["status.opened", "page.opened"]))
        .order_by(Event.created_at.desc())
        .limit(1)
    )
    if last is None or now - last >= REOPEN_EVENT_EVERY:
        session.add(
            Event(
                request_id=request_id,
                batch_id=request.batch_id,
                type="page.opened",
                created_at=now,
                actor="recipient",
                ip=ip,
                user_agent=user_agent,
                details={},
            )
        )
        session.commit()
    return OpenOutcome(status=Act.REOPENED, request_id=request_id)


def open_party(session: Session, *, party: Party, now: datetime, ip: str | None, user_agent: str | None) -> OpenOutcome:
    """A party other than the recipient opened its page: its first open moves it invited→opened; commits. The
    recipient's page is the request's (``open_request``)."""
    request = party.request
    state = signer_state(request, party, now=now)
    if state == PageState.WAITING and party.status == PartyStatus.INVITED:
        move_parties(
            session, party.id, frm=PartyStatus.INVITED, to=PartyStatus.OPENED, now=now, actor="recipient", ip=ip
        )
        session.commit()
        return OpenOutcome(status=Act.OPENED, request_id=request.id)
    return OpenOutcome(status=state, request_id=request.id)


def _act(
    session: Session,
    *,
    request_id: int,
    now: datetime,
    ip: str | None,
    user_agent: str | None,
    code_id: int | None,
    to: Status,
    details: dict[str, Any] | None = None,
    **fields: Any,
) -> Act:
    """The recipient's final move: open first if still sent, then opened→``to`` by compare-and-set. Returns ``to``'s
    act when it won (uncommitted), else one of ``REFUSED`` (``CODE_NEEDED``: ``code_id`` is not a verified
    one-time code of the request, and its batch asks for one)."""
    request = session.get(SigningRequest, request_id)
    if request is not None and page_state(request, now=now) == PageState.WAITING:
        if not one_time_codes.may_act(session, request=request, code_id=code_id, now=now):
            return Act.CODE_NEEDED
        user_agent = (user_agent or "")[:500]
        if request.status == Status.SENT:
            _open(session, request, now=now, ip=ip, user_agent=user_agent)
        if transition(
            session,
            request_id,
            frm=Status.OPENED,
            to=to,
            now=now,
            actor="recipient",
            ip=ip,
            user_agent=user_agent,
            details=details,
            **fields,
        ):
            return Act(to)
        session.rollback()
        request = session.get(SigningRequest, request_id)
    return Act(f"already_{to}") if page_state(request, now=now) == PageState(to) else Act.NOT_ALLOWED


def _act_as_party(
    session: Session,
    *,
    party: Party,
    now: datetime,
    ip: str | None,
    user_agent: str | None,
    code_id: int | None,
    proof: link_proofs.LinkProof | None,
    to: PartyStatus,
    details: dict[str, Any] | None = None,
    **fields: Any,
) -> routing.Settled:
    """A party's final move on a request several sign: open first if still invited, then opened→``to`` by
    compare-and-set and the request's status from its parties', in one transaction under the request's row lock
    (a cancel or an expiry is seen or waits). Returns what that settled, or a move that did not happen as
    ``_act`` (nothing held)."""
    request = routing.lock_request(session, party.request_id)
    if request is not None and signer_state(request, party, now=now) == PageState.WAITING:
        if proof is not None:
            # A countersigner's link code vouches for every document of theirs: each records it, in this transaction
            # (a move that loses its race rolls it back with the rest; a repeat finds the document moved already).
            if not proof.vouches_for(party):
                session.rollback()
                return routing.Settled(routing.Move.CODE_NEEDED, party.request_id)
            session.add(link_proofs.proof_event(proof, party=party))
        # Every party proves its own phone or mailbox when the batch asks for a code; the recipient's are the request's.
        elif not one_time_codes.may_act(
            session, request=request, code_id=code_id, now=now, party=code_owners.code_party(party)
        ):
            session.rollback()
            return routing.Settled(routing.Move.CODE_NEEDED, party.request_id)
        if party.role == RECIPIENT_ROLE:
            if request.status == Status.SENT:  # its party follows the request's own move to opened
                _open(session, request, now=now, ip=ip, user_agent=(user_agent or "")[:500])
        else:
            move_parties(
                session, party.id, frm=PartyStatus.INVITED, to=PartyStatus.OPENED, now=now, actor="recipient", ip=ip
            )
        if move_parties(
            session,
            party.id,
            frm=PartyStatus.OPENED,
            to=to,
            now=now,
            actor="recipient",
            ip=ip,
            details=details,
            **fields,
        ):
            return routing.request_follows_parties(session, request_id=request.id, now=now, ip=ip)
    session.rollback()
    session.refresh(party)
    moved = routing.Move(f"already_{to}") if party.status == to else routing.Move.NOT_ALLOWED
    return routing.Settled(moved, party.request_id)


def _after_party(settled: routing.Settled) -> None:
    """Queue what a party's committed move calls for: the seal after the last party, the next step's invitations
    after a step (a job per step: each re-queued by the reconciler when Redis loses it)."""
    try:
        if settled.status == routing.Move.SIGNED:
            SEAL.enqueue_unique([settled.request_id])
        elif settled.status == routing.Move.NEXT_STEP:
            ADVANCE.enqueue_unique(
                [settled.request_id], parts={settled.request_id: {"step": settled.step, "version": settled.version}}
            )
    except RedisError as exc:
        log(logger, logging.ERROR, "could not queue the next step", request_id=settled.request_id, error=str(exc))


def sign(
    session: Session,
    *,
    request_id: int,
    now: datetime,
    signer_name: str,
    signature_png: bytes | None,
    consent: bool,
    ip: str | None,
    user_agent: str | None,
    code_id: int | None = None,
    party: Party | None = None,
    filled: FilledForm = NOTHING_FILLED,
    proof: link_proofs.LinkProof | None = None,
) -> SignOutcome:
    """Sign: (open if still sent,) opened→signed by compare-and-set with the signer's ``filled`` fields (nothing is
    kept until every field passes); commits, then queues the seal. ``code_id``: the session's verified code;
    ``party``: whose link this is (``signer_party``); ``proof``: a countersigner's link code instead of
    ``code_id``."""
    request = session.get_one(SigningRequest, request_id)
    role = party.role if party is not None else RECIPIENT_ROLE
    checked = check_entries(request, role=role, filled=filled, earlier=earlier_values(session, request_id=request_id))
    message: Message = ""
    signer_field = None
    try:
        name, image = clean_signature(signer_name=signer_name, signature_png=signature_png, consent=consent)
    except InvalidInput as exc:
        message, signer_field = exc.message, exc.field
    if message or checked.errors:
        return SignOutcome(
            status=Act.INVALID,
            request_id=request_id,
            message=message
            or _l(
                "Correct these fields, each has a message: %(fields)s. Everything else you gave is kept.",
                fields=", ".join(f"“{label}”" for label in checked.wrong_labels),
            ),
            field_errors=checked.errors,
            signer_field=signer_field,
        )

    def save_values() -> SignOutcome | None:
        """In the sign's own transaction, after its compare-and-set won (a sign that lost its race saves nothing);
        a file storage cannot take undoes the sign: the signer tries again, with nothing half kept."""
        try:
            entries = (*checked.entries, *signed_entries(request, role=role, signer_name=name, now=now))
            save_entries(session, request=request, role=role, entries=entries, storage=filled.storage, now=now, ip=ip)
        except StorageError as exc:
            session.rollback()
            log(logger, logging.ERROR, "could not store an attachment", request_id=request_id, error=str(exc))
            return SignOutcome(
                status=Act.INVALID,
                request_id=request_id,
                message=_l("Your file could not be stored just now. Choose it again and sign in a minute."),
            )
        return None

    if party is not None:
        settled = _act_as_party(
            session,
            party=party,
            now=now,
            ip=ip,
            user_agent=user_agent,
            code_id=code_id,
            proof=proof,
            to=PartyStatus.SIGNED,
            signer_name=name,
            signer_ip=(ip or "")[:64],
            signature_image=image,
        )
        if settled.status in {routing.Move(refused) for refused in REFUSED}:
            return SignOutcome(status=Act(settled.status), request_id=request_id)
        unsaved = save_values()
        if unsaved is not None:
            return unsaved
        session.commit()
        _after_party(settled)
        log(logger, logging.INFO, "party signed", request_id=request_id, role=party.role, settled=settled.status)
        return SignOutcome(status=Act.SIGNED, request_id=request_id)
    result = _act(
        session,
        request_id=request_id,
        now=now,
        ip=ip,
        user_agent=user_agent,
        code_id=code_id,
        to=Status.SIGNED,
        signer_name=name,
        signer_ip=(ip or "")[:64],
        signature_image=image,
        signed_at=now,
    )
    if result != Act.SIGNED:
        return SignOutcome(status=result, request_id=request_id)
    unsaved = save_values()
    if unsaved is not None:
        return unsaved
    session.commit()
    try:
        SEAL.enqueue_unique([request_id])
    except RedisError as exc:
        # The signature is committed: the recipient sees it done, and the periodic ``seal_missing`` seals it later.
        log(logger, logging.ERROR, "could not queue the seal", request_id=request_id, error=str(exc))
    log(logger, logging.INFO, "request signed", request_id=request_id)
    return SignOutcome(status=Act.SIGNED, request_id=request_id)


def decline(
    session: Session,
    *,
    request_id: int,
    now: datetime,
    reason: str,
    ip: str | None,
    user_agent: str | None,
    code_id: int | None = None,
    party: Party | None = None,
    proof: link_proofs.LinkProof | None = None,
) -> DeclineOutcome:
    """Decline with a reason: opened→declined by compare-and-set, and a notice to whoever the batch names
    (its owner by default); commits. ``party``, ``proof``: as for ``sign``; its decline declines the request, and
    the parties already invited are told."""

    reason = (reason or "").strip()
    if not reason:
        return DeclineOutcome(status=Act.INVALID, request_id=request_id, message=_l("Tell the sender why you decline."))
    if len(reason) > MAX_REASON_LENGTH:
        return DeclineOutcome(
            status=Act.INVALID,
            request_id=request_id,
            message=_l("The reason is too long (at most %(count)s characters).", count=MAX_REASON_LENGTH),
        )
    told: list[int] = []
    if party is not None:
        settled = _act_as_party(
            session,
            party=party,
            now=now,
            ip=ip,
            user_agent=user_agent,
            code_id=code_id,
            proof=proof,
            to=PartyStatus.DECLINED,
            details={"reason": reason},
            decline_reason=reason,
        ).status
        result = Act.DECLINED if settled == routing.Move.DECLINED else Act(settled)
        if result == Act.DECLINED:
            told = party_mails.tell_declined(session, request=party.request, decliner=party, now=now)
    else:
        result = _act(
            session,
            request_id=request_id,
            now=now,
            ip=ip,
            user_agent=user_agent,
            code_id=code_id,
            to=Status.DECLINED,
            details={"reason": reason},
            declined_at=now,
            decline_reason=reason,
        )
    if result != Act.DECLINED:
        return DeclineOutcome(status=result, request_id=request_id)
    request = session.get_one(SigningRequest, request_id)
    decliner = _decliner(session, request)
    notice = queue_notice(
        session,
        batch=request.batch,
        kind=MailKind.DECLINE_NOTICE,
        key=f"decline-notice-{request_id}{version_suffix(request.document_version)}",
        subject=N_("Declined: %(who)s — %(batch)s", who=decliner[1] or decliner[0], batch=request.batch.name),
        now=now,
        request_id=request_id,
    )
    mail_id = notice.id if notice is not None else None
    session.commit()
    if mail_id is not None or told:
        try:
            enqueue_sends([*([mail_id] if mail_id is not None else []), *told])
        except RedisError as exc:
            # The notice is committed in ``queued``: the reconciler queues it when Redis is back.
            log(logger, logging.ERROR, "could not queue the decline notice", request_id=request_id, error=str(exc))
    log(logger, logging.INFO, "request declined", request_id=request_id, notice=mail_id is not None)
    return DeclineOutcome(status=Act.DECLINED, request_id=request_id)


def _decliner(session: Session, request: SigningRequest) -> tuple[str, str]:
    """(address, name) of who declined: the party that did, of a document several sign; else the recipient."""
    party = session.scalar(
        select(Party).where(Party.request_id == request.id, Party.status == PartyStatus.DECLINED).limit(1)
    )
    return routing.party_person(party) if party is not None else (request.email, request.name or "")


@builder(MailKind.DECLINE_NOTICE)
def build_decline_notice(session: Session, mail: OutgoingMail, app: Flask) -> flask_mail.Message:
    """The notice that a recipient declined, with the reason."""
    from flask import render_template

    request = session.get_one(SigningRequest, mail.request_id)
    email, name = _decliner(session, request)
    with force_locale(notice_locale(request.batch)):
        body = render_template(
            "emails/decline_notice.txt",
            request=request,
            who=name or email,
            email=email,
            batch=request.batch,
            document_name=document_title(request.batch),
            app_url=app.config["APP_URL"],
        )
    return notice_message(mail, app, body=body)

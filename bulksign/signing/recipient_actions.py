"""What a recipient does with a link: open it, sign, or decline. Guarded by the state machine.

Each function commits (the recipient's action is one transaction) and only then queues
follow-up work, so a job never sees a state that was not committed. A double click runs the
same compare-and-set twice: the second one loses and reports what already happened.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from io import BytesIO

from flask_babel import force_locale
from flask_babel import lazy_gettext as _l
from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.batches.notices import notice_locale, notice_message, queue_notice
from bulksign.batches.states import transition
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.documents.signed_pdf import document_title
from bulksign.documents.storage import StorageError
from bulksign.mail.mailer import builder
from bulksign.models import RECIPIENT_ROLE, Batch, Event, Party, SigningRequest
from bulksign.models.parties import PartyStatus
from bulksign.models.status import WAITING_FOR_RECIPIENT, Status
from bulksign.signing import one_time_codes, routing
from bulksign.signing.field_entry import CONTROL_CHARACTERS, NOTHING_FILLED, FilledForm, check_entries, save_entries
from bulksign.signing.parties import move_parties
from bulksign.work.pipeline import enqueue_sends
from bulksign.work.queues import ADVANCE, SEAL

logger = logging.getLogger(__name__)

#: A drawn signature is a few KB; anything far bigger is not one.
MAX_SIGNATURE_BYTES = 200 * 1024
MAX_SIGNATURE_PIXELS = 4000 * 2000
MAX_NAME_LENGTH = 300
MAX_REASON_LENGTH = 2000
#: Re-opening the page adds a ``page.opened`` event at most this often, so reloads do not flood the audit trail.
REOPEN_EVENT_EVERY = timedelta(hours=1)
#: Invisible characters taken out of a typed name: the bidirectional embeddings, overrides, isolates and marks
#: (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C) and the zero-width ones (U+200B–U+200D, U+2060, U+FEFF).
#: Kept, they make the audit certificate show a name other than the letters stored ("\u202eevil" reads "live")
#: or hide letters in it.
_INVISIBLE = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u200b-\u200d\u2060\ufeff]")


class InvalidInput(ValueError):
    """Input a person must correct; the message (lazily translated, in the page's language) says how."""


def deadline_of(request: SigningRequest) -> datetime | None:
    """When the link stops working: the request's own expiry, else the batch's fixed deadline, else sent + days."""
    if request.expires_at:
        return request.expires_at
    batch: Batch = request.batch
    if batch.deadline_at:
        return batch.deadline_at
    if request.sent_at:
        return request.sent_at + timedelta(days=batch.deadline_days)
    return None


def page_state(request: SigningRequest | None, *, now: datetime) -> str:
    """What the recipient's page shows: ``unknown``, ``waiting``, ``expired``, ``signed``, ``declined``,
    ``cancelled``, ``on_its_way`` or ``unavailable`` (sent out but not in a state the recipient can act on)."""
    if request is None:
        return "unknown"
    status = request.status
    if status in (Status.GENERATED, Status.SENDING) and request.token_hash:
        # The invitation is out, or about to be: its sender has not recorded the send yet (a worker that
        # died between the SMTP answer and its commit waits for the reconciler). Not an error: come back.
        return "on_its_way"
    if status in (Status.SIGNED, Status.DECLINED, Status.CANCELLED, Status.EXPIRED):
        return str(status)
    if status in WAITING_FOR_RECIPIENT:
        deadline = deadline_of(request)
        return "expired" if deadline is not None and deadline <= now else "waiting"
    return "unavailable"


def signer_party(session: Session, request: SigningRequest, party: Party | None) -> Party | None:
    """The party whose link was opened: ``party`` (another role's link), the recipient's party for the request's
    own link of a request several sign; None for a single-signer request (its recipient is the request)."""
    if party is not None or not routing.is_routed(session, request.id):
        return party
    return session.scalar(select(Party).where(Party.request_id == request.id, Party.role == RECIPIENT_ROLE))


def signer_state(request: SigningRequest, party: Party | None, *, now: datetime) -> str:
    """What a party's page shows: ``page_state`` for a single-signer request (``party`` None); for a party of a
    request several sign also ``not_started`` (its step has not started: no working link yet), ``party_signed``
    (it signed; the others have not all signed yet) and ``paused`` (a party's invitation bounced: staff correct
    that address and resend, and the request goes on)."""
    state = page_state(request, now=now)
    if party is None or request is None or state in ("signed", "declined", "cancelled", "expired", "unknown"):
        return state
    if party.status == PartyStatus.SIGNED:
        return "party_signed"
    if party.status in (PartyStatus.WAITING, PartyStatus.DECLINED):
        return "not_started"
    if request.status == Status.BOUNCED:
        # A party resent while another's bounce stands holds a new link before the request goes on: not the
        # sender's "contact us" page, nothing is wrong on its side.
        return "paused"
    # Every party acts once the request is out (its page says "on its way" until the recipient's invitation is
    # recorded sent, seconds): a decline then always finds the request in a state it can leave for declined.
    return state


@dataclass(frozen=True)
class OpenOutcome:
    #: ``opened`` (first open), ``reopened``, or the page state when the recipient cannot act.
    status: str
    request_id: int


@dataclass(frozen=True)
class SignOutcome:
    #: ``signed``, ``already_signed``, ``not_allowed`` (expired, declined, cancelled...), ``code_needed`` (the batch
    #: asks for a one-time code and this session has not entered one) or ``invalid``.
    status: str
    request_id: int
    #: For ``invalid``: what to correct (lazily translated: ``str()`` it where it is shown).
    message: str = ""
    #: For ``invalid``: each field of the signer's that is wrong → what to correct there.
    field_errors: Mapping[str, N_] = field(default_factory=dict)


@dataclass(frozen=True)
class DeclineOutcome:
    #: ``declined``, ``already_declined``, ``not_allowed``, ``code_needed`` or ``invalid``.
    status: str
    request_id: int
    #: For ``invalid``: what to correct (lazily translated: ``str()`` it where it is shown).
    message: str = ""


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
    if state != "waiting":
        return OpenOutcome(status=state, request_id=request_id)
    user_agent = (user_agent or "")[:500]
    if request.status == Status.SENT and _open(session, request, now=now, ip=ip, user_agent=user_agent):
        session.commit()
        return OpenOutcome(status="opened", request_id=request_id)
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
    return OpenOutcome(status="reopened", request_id=request_id)


def open_party(session: Session, *, party: Party, now: datetime, ip: str | None, user_agent: str | None) -> OpenOutcome:
    """A party other than the recipient opened its page: its first open moves it invited→opened; commits. The
    recipient's page is the request's (``open_request``)."""
    request = party.request
    state = signer_state(request, party, now=now)
    if state == "waiting" and party.status == PartyStatus.INVITED:
        move_parties(
            session, party.id, frm=PartyStatus.INVITED, to=PartyStatus.OPENED, now=now, actor="recipient", ip=ip
        )
        session.commit()
        return OpenOutcome(status="opened", request_id=request.id)
    return OpenOutcome(status=state, request_id=request.id)


def clean_name(raw: str) -> str:
    """The typed full name, trimmed and without invisible characters (``_INVISIBLE``); raises InvalidInput when
    empty (so also when nothing but invisible characters was typed), too long or holding control characters."""
    name = " ".join(_INVISIBLE.sub("", raw or "").split())
    if not name:
        raise InvalidInput(_l("Type your full name to sign."))
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidInput(_l("The name is too long (at most %(count)s characters).", count=MAX_NAME_LENGTH))
    if CONTROL_CHARACTERS.search(name):
        raise InvalidInput(_l("The name contains characters that cannot be printed."))
    return name


def clean_signature_png(data: bytes | None) -> bytes | None:
    """A drawn signature as a clean PNG (decoded and re-encoded, metadata dropped), or None when not drawn."""
    if not data:
        return None
    if len(data) > MAX_SIGNATURE_BYTES:
        raise InvalidInput(_l("The drawn signature is too large. Clear it and draw it again."))
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise InvalidInput(_l("The drawn signature is not a PNG image."))
    from PIL import Image

    try:
        with Image.open(BytesIO(data)) as image:
            if image.format != "PNG" or image.width * image.height > MAX_SIGNATURE_PIXELS:
                raise InvalidInput(_l("The drawn signature is not a usable image."))
            image.load()
            out = BytesIO()
            image.convert("RGBA").save(out, "PNG", optimize=True)
    except InvalidInput:
        raise
    except Exception:  # Pillow raises many kinds on a broken file; all mean the same to the signer
        raise InvalidInput(_l("The drawn signature could not be read. Clear it and draw it again.")) from None
    return out.getvalue()


def clean_signature(*, signer_name: str, signature_png: bytes | None, consent: bool) -> tuple[str, bytes | None]:
    """The typed name and drawn signature as they are kept (``clean_name``, ``clean_signature_png``), once consent
    is given; raises InvalidInput saying what to correct."""
    name = clean_name(signer_name)
    image = clean_signature_png(signature_png)
    if not consent:
        raise InvalidInput(_l("Tick “I agree to sign electronically” to sign."))
    return name, image


def _act(
    session: Session,
    *,
    request_id: int,
    now: datetime,
    ip: str | None,
    user_agent: str | None,
    code_id: int | None,
    to: Status,
    details: dict | None = None,
    **fields,
) -> str:
    """The recipient's final move: open first if still sent, then opened→``to`` by compare-and-set.

    Returns ``won``, ``already_<to>`` (the same move happened before: a double click), ``code_needed``
    (``code_id`` is not a verified one-time code of the request, and its batch asks for one) or ``not_allowed``.
    """
    request = session.get(SigningRequest, request_id)
    if page_state(request, now=now) == "waiting":
        if not one_time_codes.may_act(session, request=request, code_id=code_id, now=now):
            return "code_needed"
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
            return "won"
        session.rollback()
        request = session.get(SigningRequest, request_id)
    return f"already_{to}" if page_state(request, now=now) == str(to) else "not_allowed"


def _act_as_party(
    session: Session,
    *,
    party: Party,
    now: datetime,
    ip: str | None,
    user_agent: str | None,
    code_id: int | None,
    proof: one_time_codes.LinkProof | None,
    to: PartyStatus,
    details: dict | None = None,
    **fields,
) -> str:
    """A party's final move on a request several sign: open first if still invited, then opened→``to`` by
    compare-and-set, and the request's status from its parties' (``routing.request_follows_parties``) in the same
    transaction. Returns what that settled (``signed``, ``declined``, ``next_step``, ``waiting``), or
    ``already_<to>``, ``code_needed``, ``not_allowed`` as ``_act``."""
    request = party.request
    if signer_state(request, party, now=now) == "waiting":
        if proof is not None:
            # A countersigner's link code vouches for every document of theirs: each records it, in this transaction
            # (a move that loses its race rolls it back with the rest; a repeat finds the document moved already).
            if not proof.vouches_for(party):
                return "code_needed"
            session.add(one_time_codes.proof_event(proof, party=party))
        # Every party proves its own phone or mailbox when the batch asks for a code; the recipient's are the request's.
        elif not one_time_codes.may_act(
            session, request=request, code_id=code_id, now=now, party=one_time_codes.code_party(party)
        ):
            return "code_needed"
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
            return routing.request_follows_parties(session, request_id=request.id, now=now, ip=ip).status
        session.rollback()
    session.refresh(party)
    if party.status == to:
        return f"already_{to}"
    return "not_allowed"


def _after_party(request_id: int, settled: str) -> None:
    """Queue what a party's committed move calls for: the seal after the last party, the next step's invitations
    after a step (each re-queued by the reconciler when Redis loses it)."""
    handle = SEAL if settled == "signed" else ADVANCE if settled == "next_step" else None
    if handle is None:
        return
    try:
        handle.enqueue_unique([request_id])
    except RedisError as exc:
        log(logger, logging.ERROR, "could not queue the next step", request_id=request_id, error=str(exc))


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
    proof: one_time_codes.LinkProof | None = None,
) -> SignOutcome:
    """Sign: (open if still sent,) opened→signed by compare-and-set, with the values of the signer's fields
    (``filled``, checked by ``field_entry``: nothing is signed or saved until every field passes); commits, then
    queues the seal job.

    ``code_id``: the one-time code the signer's session verified, when the batch asks for one. ``party``: the
    party of a request several sign whose link this is (``signer_party``); the request is signed, and sealed,
    once its last party has signed. ``proof``: instead of ``code_id``, the countersigner's verified link code
    (checked fresh by the caller), recorded with the party's move.
    """
    request = session.get(SigningRequest, request_id)
    role = party.role if party is not None else RECIPIENT_ROLE
    checked = check_entries(request, role=role, filled=filled)
    message = ""
    try:
        name, image = clean_signature(signer_name=signer_name, signature_png=signature_png, consent=consent)
    except InvalidInput as exc:
        message = exc.args[0]
    if message or checked.errors:
        return SignOutcome(
            status="invalid",
            request_id=request_id,
            message=message or _l("Some fields need correcting: see the messages at them."),
            field_errors=checked.errors,
        )

    def save_values() -> SignOutcome | None:
        """In the sign's own transaction, after its compare-and-set won (a sign that lost its race saves nothing);
        a file storage cannot take undoes the sign: the signer tries again, with nothing half kept."""
        try:
            save_entries(
                session, request=request, role=role, entries=checked.entries, storage=filled.storage, now=now, ip=ip
            )
        except StorageError as exc:
            session.rollback()
            log(logger, logging.ERROR, "could not store an attachment", request_id=request_id, error=str(exc))
            return SignOutcome(
                status="invalid",
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
        if settled.startswith("already_") or settled in ("code_needed", "not_allowed"):
            return SignOutcome(status=settled, request_id=request_id)
        unsaved = save_values()
        if unsaved is not None:
            return unsaved
        session.commit()
        _after_party(request_id, settled)
        log(logger, logging.INFO, "party signed", request_id=request_id, role=party.role, settled=settled)
        return SignOutcome(status="signed", request_id=request_id)
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
    if result != "won":
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
    return SignOutcome(status="signed", request_id=request_id)


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
    proof: one_time_codes.LinkProof | None = None,
) -> DeclineOutcome:
    """Decline with a reason: opened→declined by compare-and-set, and a notice to whoever the batch names
    (its owner by default); commits. ``party``, ``proof``: as for ``sign``; its decline declines the request, and
    the parties already invited are told."""

    reason = (reason or "").strip()
    if not reason:
        return DeclineOutcome(status="invalid", request_id=request_id, message=_l("Tell the sender why you decline."))
    if len(reason) > MAX_REASON_LENGTH:
        return DeclineOutcome(
            status="invalid",
            request_id=request_id,
            message=_l("The reason is too long (at most %(count)s characters).", count=MAX_REASON_LENGTH),
        )
    told: list[int] = []
    if party is not None:
        result = _act_as_party(
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
        )
        result = "won" if result == "declined" else result
        if result == "won":
            told = routing.tell_declined(session, request=party.request, decliner=party, now=now)
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
    if result != "won":
        return DeclineOutcome(status=result, request_id=request_id)
    request = session.get(SigningRequest, request_id)
    decliner = _decliner(session, request)
    notice = queue_notice(
        session,
        batch=request.batch,
        kind="decline_notice",
        key=f"decline-notice-{request_id}",
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
    return DeclineOutcome(status="declined", request_id=request_id)


def _decliner(session: Session, request: SigningRequest) -> tuple[str, str]:
    """(address, name) of who declined: the party that did, of a document several sign; else the recipient."""
    party = session.scalar(
        select(Party).where(Party.request_id == request.id, Party.status == PartyStatus.DECLINED).limit(1)
    )
    return routing.party_person(party) if party is not None else (request.email, request.name or "")


def contact_of(batch: Batch) -> str | None:
    """Whom a recipient should contact about a batch: its reply-to, else its owner."""
    return batch.reply_to or (batch.created_by.email if batch.created_by is not None else None)


@builder("decline_notice")
def build_decline_notice(session: Session, mail, app):
    """The notice that a recipient declined, with the reason."""
    from flask import render_template

    request = session.get(SigningRequest, mail.request_id)
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

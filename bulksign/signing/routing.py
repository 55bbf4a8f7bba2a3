"""Routing: the parties of a request signed by several, invited step by step, and the request's status from theirs.

A request whose template marks other roles (``TemplateVersion.roles``) has a party per role, each at its step
(``signing.parties.add_parties``). When the recipient is in the first step, the request's own flow
(generated → sending → sent) carries the recipient's invitation as it always did; the other parties of that step
are invited in the render's own transaction (``invite_first_step``). When the recipient signs later, the request
goes out to its first step's parties alone (``send_to_first_step``) and the recipient is invited like any other
party when its step starts, with the request's own link. When every party of a step has signed, the
``advance`` job stores the document with their signatures as a new version (the original is untouched) and
invites the next step's parties, each with their own link and mail (``waiting`` → ``invited`` by compare-and-set,
the invitation row written in the same transaction, so nothing is sent twice). ``request_follows_parties`` is the
one place the request's status is written from its parties': ``signed`` when every party has signed, ``declined``
when any declined.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from flask import Flask, render_template
from flask_babel import force_locale
from flask_babel import gettext as _
from flask_mail import Message
from sqlalchemy import and_, exists, select
from sqlalchemy.orm import Session, aliased

from bulksign.batches.states import transition
from bulksign.core.localtime import zone_of
from bulksign.core.logs import log
from bulksign.doc_templates.fields import FieldSettings, shown_value, template_fields
from bulksign.doc_templates.jinja_sandbox import render_text
from bulksign.doc_templates.mail_texts import mail_text
from bulksign.doc_templates.roles import pdf_role_places
from bulksign.documents.signature_box import SIGNATURE_VARIABLE, SignatureBox, find_signature_boxes, mark_indexes
from bulksign.documents.signed_pdf import FilledField, PartyBlock, PartyFacts, document_title, stamp_parties
from bulksign.mail.mail_headers import one_line
from bulksign.mail.mailer import MailNotNeeded, builder, queue_mail
from bulksign.models import RECIPIENT_ROLE, Document, FieldValue, Party, SigningRequest
from bulksign.models.parties import PartyStatus
from bulksign.models.status import Status
from bulksign.signing import digests
from bulksign.signing.invitations import html_body, mail_context, mark_sent, request_deadline
from bulksign.signing.links import current_token, issue_link, signing_url
from bulksign.signing.parties import issue_party_link, move_parties, party_token, step_not_started

logger = logging.getLogger(__name__)

PARTY_INVITATION = "party_invitation"
PARTY_DECLINED = "party_declined"
PARTY_COMPLETED = "party_completed"
#: The kind of a document version holding the signatures of the steps finished so far (unsealed).
STEP_KIND = "step"


def is_routed(session: Session, request_id: int) -> bool:
    """Whether the request is signed by other parties than its recipient."""
    return bool(session.scalar(select(exists().where(Party.request_id == request_id, Party.role != RECIPIENT_ROLE))))


def parties_in_order(session: Session, request_id: int) -> list[Party]:
    return list(session.scalars(select(Party).where(Party.request_id == request_id).order_by(Party.step, Party.role)))


def current_step(parties: Sequence[Party]) -> int | None:
    """The first step with a party that has not signed; None when every party has."""
    open_steps = [p.step for p in parties if p.status != PartyStatus.SIGNED]
    return min(open_steps) if open_steps else None


def party_person(party: Party) -> tuple[str, str]:
    """(address, name) of a party: the recipient's are the request's own."""
    if party.role == RECIPIENT_ROLE:
        return party.request.email, party.request.name or ""
    return party.email or "", party.name or ""


# ---------------------------------------------------------------------------------------------
# The request's status from its parties' (its one writer)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settled:
    #: ``signed`` (the last party signed: seal it), ``declined``, ``next_step`` (a step finished: invite the next)
    #: or ``waiting`` (the step's other parties have yet to sign).
    status: str
    request_id: int


def request_follows_parties(
    session: Session, *, request_id: int, now: datetime, ip: str | None = None, actor: str = "recipient"
) -> Settled:
    """Write the request's status from its parties', after a party's move in the same transaction: ``signed``
    when every party signed, ``declined`` when one declined (with that party's reason). The caller commits."""
    parties = parties_in_order(session, request_id)
    declined = next((p for p in parties if p.status == PartyStatus.DECLINED), None)
    if declined is not None:
        transition(
            session,
            request_id,
            frm=[Status.SENT, Status.OPENED],
            to=Status.DECLINED,
            now=now,
            actor=actor,
            ip=ip,
            details={"reason": declined.decline_reason, "role": declined.role},
            declined_at=now,
            decline_reason=declined.decline_reason,
        )
        return Settled("declined", request_id)
    step = current_step(parties)
    if step is None:
        recipient = next(p for p in parties if p.role == RECIPIENT_ROLE)
        transition(
            session,
            request_id,
            frm=Status.OPENED,
            to=Status.SIGNED,
            now=now,
            actor=actor,
            ip=ip,
            signed_at=now,
            signer_name=recipient.signer_name,
            signer_ip=recipient.signer_ip,
        )
        return Settled("signed", request_id)
    finished = [p for p in parties if p.step < step]
    if finished and any(p.step == step and p.status == PartyStatus.WAITING for p in parties):
        return Settled("next_step", request_id)
    return Settled("waiting", request_id)


# ---------------------------------------------------------------------------------------------
# Inviting a step's parties
# ---------------------------------------------------------------------------------------------


def invite_parties(session: Session, parties: Sequence[Party], *, now: datetime, app: Flask) -> list[int]:
    """Move each waiting party waiting → invited by compare-and-set and, for each win only, give it its link and
    invitation row in the same transaction; the ids of the rows to send. A recipient invited here signs after
    others (its request went out to them): its link is the request's, issued now, and the request's ``sent_at``
    becomes its invitation's, from which its reminders count. A party served by its countersigner's digest
    (``digests``) gets no link nor mail of its own, but the digest. The caller commits."""
    secret = app.config["SECRET_KEY"]
    mail_ids = []
    by_digest: dict[int, set[str]] = {}
    for party in parties:
        if party.status != PartyStatus.WAITING:
            continue
        email, _name = party_person(party)
        batch_digests = by_digest.get(party.batch_id)
        if batch_digests is None:
            emails = [p.email for p in parties if p.batch_id == party.batch_id and p.role != RECIPIENT_ROLE]
            batch_digests = digests.digest_addresses(session, batch_id=party.batch_id, emails=emails)
            by_digest[party.batch_id] = batch_digests
        if not move_parties(
            session, party.id, frm=PartyStatus.WAITING, to=PartyStatus.INVITED, now=now, details={"to": email}
        ):
            continue  # invited by another run: its link and mail stand
        if party.role != RECIPIENT_ROLE and email.lower() in batch_digests:
            continue
        request = party.request
        if party.role == RECIPIENT_ROLE:
            token = issue_link(session, request_id=request.id, secret=secret, now=now)
            request.sent_at = now
        else:
            token = issue_party_link(session, party=party, secret=secret, now=now)
        mail = queue_mail(
            session,
            # The link's nonce in it: a new link is a new mail. Short: a long Message-ID is folded.
            key=f"party-invitation-{party.id}-{_link_nonce(party)[:12]}",
            kind=PARTY_INVITATION,
            to_email=email,
            subject=one_line(text=_invitation_subject(request, party, token=token, app=app, now=now)),
            now=now,
            request_id=request.id,
            batch_id=request.batch_id,
        )
        mail_ids.append(mail.id)
    for batch_id, emails in by_digest.items():
        mail_ids += digests.invited(session, batch_id=batch_id, emails=emails, secret=secret, now=now)
    return mail_ids


def _link_nonce(party: Party) -> str:
    """The nonce of the party's current link: the request's for the recipient, else the party's own."""
    return (party.request.token_nonce if party.role == RECIPIENT_ROLE else party.token_nonce) or ""


def party_link(party: Party, *, secret: str) -> str | None:
    """The token of the party's current link (the request's for the recipient); None when it has no live link."""
    if party.role == RECIPIENT_ROLE:
        return current_token(party.request, secret=secret) if party.request.token_hash else None
    return party_token(party, secret=secret) if party.token_hash else None


def party_context(request: SigningRequest, party: Party, *, token: str, app: Flask, now: datetime) -> dict:
    """The invitation's variables for a party: the row's, with the party's own name and address and link."""
    deadline = request.expires_at or request_deadline(request, sent_at=now)
    context = mail_context(request, token=token, app=app, deadline=deadline)
    email, name = party_person(party)
    return {
        **context,
        "name": name,
        "email": email,
        "signing_link": signing_url(app_url=app.config["APP_URL"], token=token),
    }


def _invitation_subject(request: SigningRequest, party: Party, *, token: str, app: Flask, now: datetime) -> str:
    batch = request.batch
    context = party_context(request, party, token=token, app=app, now=now)
    return render_text(mail_text(batch.template_version.email_subject, language=batch.language), context)


def invite_first_step(session: Session, *, request_ids: Sequence[int], now: datetime, app: Flask) -> list[int]:
    """The first step's other parties of these just-rendered requests, invited with the recipient's invitation (the
    render's own transaction: the document is ready); the ids of their invitation rows. The caller commits."""
    if not request_ids:
        return []
    parties = session.scalars(
        select(Party)
        .where(
            Party.request_id.in_(list(request_ids)),
            Party.role != RECIPIENT_ROLE,
            Party.status == PartyStatus.WAITING,
            Party.step == 0,
        )
        .order_by(Party.id)
    ).all()
    return invite_parties(session, parties, now=now, app=app)


def later_recipients(session: Session, request_ids: Sequence[int]) -> set[int]:
    """Of these requests, those whose recipient signs after other parties (its step is not the first)."""
    if not request_ids:
        return set()
    return set(
        session.scalars(
            select(Party.request_id).where(
                Party.request_id.in_(list(request_ids)), Party.role == RECIPIENT_ROLE, Party.step > 0
            )
        )
    )


def send_to_first_step(session: Session, *, request_ids: Sequence[int], now: datetime, app: Flask) -> list[int]:
    """Just-rendered requests whose recipient signs after others go out to their first step (the render's own
    transaction): its parties are invited, and the request is sent (generated → sending → sent, its deadline
    from now) with no invitation of its own: its recipient is invited with its own link when its step starts
    (``advance``), and its party stays waiting meanwhile (``parties.follows``). The ids of the invitation rows;
    the caller commits."""
    for request in session.scalars(select(SigningRequest).where(SigningRequest.id.in_(list(request_ids)))):
        transition(session, request.id, frm=Status.GENERATED, to=Status.SENDING, now=now)
        mark_sent(session, request=request, sent_at=now, now=now, details={"first_step": True})
    return invite_first_step(session, request_ids=request_ids, now=now, app=app)


@dataclass(frozen=True)
class Advanced:
    #: ``invited`` (the next step's parties), ``nothing`` (no step to start: repeated, or not open).
    status: str
    request_id: int
    mail_ids: tuple[int, ...] = ()


def advance(session: Session, *, request_id: int, now: datetime, storage, app: Flask) -> Advanced:
    """The ``advance`` job's one step: for an open request whose step finished, store the document with every
    signature so far as a new version (once per step), then invite the next step's parties. Commits; safe to
    repeat (the request's row lock makes two runs take turns, and a party invited already is left alone)."""
    request = session.scalar(select(SigningRequest).where(SigningRequest.id == request_id).with_for_update())
    if request is None or request.status not in (Status.SENT, Status.OPENED):
        session.rollback()
        return Advanced("nothing", request_id)
    parties = parties_in_order(session, request_id)
    step = current_step(parties)
    if step is None or any(p.status == PartyStatus.DECLINED for p in parties):
        session.rollback()
        return Advanced("nothing", request_id)
    waiting = [p for p in parties if p.step == step and p.status == PartyStatus.WAITING]
    if not waiting:
        session.rollback()
        return Advanced("nothing", request_id)
    store_step_version(session, request=request, parties=parties, step=step, storage=storage, now=now)
    mail_ids = invite_parties(session, waiting, now=now, app=app)
    session.commit()
    log(logger, logging.INFO, "next step invited", request_id=request_id, step=step, parties=len(mail_ids))
    return Advanced("invited", request_id, tuple(mail_ids))


def stalled(
    session: Session, *, now: datetime, grace: timedelta = timedelta(minutes=5), limit: int = 1000
) -> list[int]:
    """Open requests whose current step (after the first) has a waiting party for ``grace`` after every earlier
    party signed: their ``advance`` job was lost. For the reconciler."""
    waiting, before = aliased(Party), aliased(Party)
    recent = exists().where(
        before.request_id == waiting.request_id, before.step < waiting.step, before.signed_at > now - grace
    )
    return list(
        session.scalars(
            select(waiting.request_id)
            .join(SigningRequest, SigningRequest.id == waiting.request_id)
            .where(
                waiting.status == PartyStatus.WAITING,
                waiting.step > 0,
                SigningRequest.status.in_([Status.SENT.value, Status.OPENED.value]),
                and_(~step_not_started(waiting), ~recent),
            )
            .distinct()
            .order_by(waiting.request_id)
            .limit(limit)
        )
    )


# ---------------------------------------------------------------------------------------------
# The document with the parties' signatures
# ---------------------------------------------------------------------------------------------


def step_key(request: SigningRequest, step: int) -> str:
    return f"batches/{request.batch_id}/requests/{request.id}/step-{step}.pdf"


def current_document(session: Session, request_id: int) -> Document | None:
    """What the next party reads: the newest version with the earlier steps' signatures, else the original."""
    return session.scalar(
        select(Document)
        .where(Document.request_id == request_id, Document.kind.in_([STEP_KIND, "original"]))
        .order_by(Document.id.desc())
        .limit(1)
    )


def party_boxes(*, request: SigningRequest, original: Document, pdf: bytes) -> dict[str, SignatureBox]:
    """Each role's place in the rendered document: the recipient's as stored at render, the others' found by their
    mark's shade (``signature_box.mark_indexes``); a role missing here signs on the signature page."""
    version = request.batch.template_version
    if version.kind == "pdf":  # its fields and placed boxes say where, the same for every document
        return {**pdf_role_places(version), **_stored_recipient_box(original)}
    indexes = mark_indexes(version.variables or ())
    found = find_signature_boxes(pdf, count=max(indexes.values()) + 1) if len(indexes) > 1 else ()
    boxes = {}
    for variable, index in indexes.items():
        if variable == SIGNATURE_VARIABLE or index >= len(found) or found[index] is None:
            continue
        boxes[variable.removeprefix("signature_")] = found[index]
    return {**boxes, **_stored_recipient_box(original)}


def _stored_recipient_box(original: Document) -> dict[str, SignatureBox]:
    """The recipient's place as the render stored it with the original (none: the signature page)."""
    recipient = SignatureBox.from_json(original.signature_box)
    return {RECIPIENT_ROLE: recipient} if recipient is not None else {}


def party_blocks(parties: Sequence[Party], boxes: dict[str, SignatureBox]) -> list[PartyBlock]:
    """The signed parties' blocks, in the order they signed."""
    signed = sorted((p for p in parties if p.status == PartyStatus.SIGNED), key=lambda p: (p.signed_at, p.step, p.role))
    return [
        PartyBlock(
            role=p.role,
            signer_name=p.signer_name or "",
            signed_at=p.signed_at,
            signer_ip=p.signer_ip or "",
            image_png=p.signature_image,
            box=boxes.get(p.role),
        )
        for p in signed
    ]


def party_facts(parties: Sequence[Party], *, identities: dict | None = None) -> tuple[PartyFacts, ...]:
    """Every party for the audit certificate, by step, in the order they signed; ``identities``: role → the
    identity check of each party that confirmed a one-time code (``AuditRecord.identities``)."""
    ordered = sorted(parties, key=lambda p: (p.step, p.signed_at or datetime.max.replace(tzinfo=None), p.role))
    facts = []
    for p in ordered:
        email, name = party_person(p)
        facts.append(
            PartyFacts(
                role=p.role,
                name=name,
                email=email,
                signer_name=p.signer_name or "",
                signed_at=p.signed_at,
                signer_ip=p.signer_ip or "",
                identity=(identities or {}).get(p.role),
            )
        )
    return tuple(facts)


def filled_fields(
    session: Session, *, request: SigningRequest, original: Document, parties: Sequence[Party]
) -> tuple[FilledField, ...]:
    """Every value given for the request's fields (``FieldValue``), in the document's order, as its signed PDF stamps
    and lists them: shown in the batch's language (``fields.shown_value``), at the box the original keeps for it,
    with the party who gave it."""
    batch = request.batch
    settings = {f.name: f for f in template_fields(batch.template_version)}
    order = {name: i for i, name in enumerate(settings)}
    values = session.scalars(select(FieldValue).where(FieldValue.request_id == request.id)).all()
    boxes = original.field_boxes or {}
    # The recipient is the request's own person, with or without a party row (requests made before parties had none).
    people = {RECIPIENT_ROLE: (request.email, request.name or ""), **{p.role: party_person(p) for p in parties}}
    filled = []
    for value in sorted(values, key=lambda v: (order.get(v.name, len(order)), v.name)):
        field = settings.get(value.name) or FieldSettings(name=value.name)
        email, name = people.get(value.role, ("", ""))
        filled.append(
            FilledField(
                label=field.shown_label,
                text=shown_value(field, value.value, language=batch.language or "en"),
                ticked=value.value == "true" if field.type == "checkbox" else None,
                box=SignatureBox.from_json(boxes.get(value.name)),
                role=value.role,
                name=name,
                email=email,
                entered_at=value.entered_at,
                entered_ip=value.entered_ip or "",
                sha256=value.sha256,
                size=value.size,
            )
        )
    return tuple(filled)


def store_step_version(
    session: Session, *, request: SigningRequest, parties: Sequence[Party], step: int, storage, now: datetime
) -> Document | None:
    """The document with the signatures of every step before ``step``, stored as a new version (once: a repeat
    finds it); the original stays as rendered. None before the first step. The caller commits."""
    if step == 0:
        return None
    key = step_key(request, step)
    existing = session.scalar(select(Document).where(Document.request_id == request.id, Document.storage_key == key))
    if existing is not None:
        return existing
    original = session.scalar(
        select(Document)
        .where(Document.request_id == request.id, Document.kind == "original")
        .order_by(Document.id.desc())
        .limit(1)
    )
    data = storage.get(original.storage_key)
    boxes = party_boxes(request=request, original=original, pdf=data)
    batch = request.batch
    stamped = stamp_parties(
        data,
        party_blocks([p for p in parties if p.step < step], boxes),
        document_name=document_title(batch),
        language=batch.language or "en",
        zone=zone_of(batch).key,
        # What the parties who signed filled in, for the next to read: only they have given values yet.
        fields=filled_fields(session, request=request, original=original, parties=parties),
    )
    storage.put(key, stamped, content_type="application/pdf")
    document = Document(
        request_id=request.id,
        kind=STEP_KIND,
        storage_key=key,
        sha256=hashlib.sha256(stamped).hexdigest(),
        size=len(stamped),
        content_type="application/pdf",
        created_at=now,
        signature_box=original.signature_box,
        field_boxes=original.field_boxes,
    )
    session.add(document)
    session.flush()
    return document


def with_parties(record, parties: Sequence[Party]):
    """The audit record of a request several signed, listing every party."""
    # The recipient's codes are the request's (its ``identity``); each other party's carry its role.
    identities = {**record.identities, **({RECIPIENT_ROLE: record.identity} if record.identity else {})}
    return replace(record, parties=party_facts(parties, identities=identities))


# ---------------------------------------------------------------------------------------------
# Mail to parties
# ---------------------------------------------------------------------------------------------


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
        with force_locale(request.batch.language):
            subject = _("Declined: %(name)s", name=document_title(request.batch))
        told.append(
            queue_mail(
                session,
                key=f"party-declined-{request.id}-{party.role}",
                kind=PARTY_DECLINED,
                to_email=email,
                subject=subject,
                now=now,
                request_id=request.id,
                batch_id=request.batch_id,
            ).id
        )
    return told


def completed_mails(
    session: Session, *, request: SigningRequest, attachment: dict, subject: str, now: datetime
) -> list[int]:
    """The completed, sealed PDF to every party but the recipient (whose confirmation is the request's own) and a
    party the countersigner's digest serves (one mail per document is what the digest spares them: their page
    lists the sealed copies, ``countersign_done``); the ids of the rows. The caller commits."""
    ids = []
    by_digest = _served_by_digest(session, request.id)
    for party in parties_in_order(session, request.id):
        if party.role == RECIPIENT_ROLE or party.id in by_digest:
            continue
        ids.append(
            queue_mail(
                session,
                key=f"party-completed-{request.id}-{party.role}",
                kind=PARTY_COMPLETED,
                to_email=party.email,
                subject=subject,
                now=now,
                request_id=request.id,
                batch_id=request.batch_id,
                attachments=[attachment],
            ).id
        )
    return ids


def _served_by_digest(session: Session, request_id: int) -> set[int]:
    return set(session.scalars(select(Party.id).where(Party.request_id == request_id, digests.served_by_digest())))


def _mailed_party(session: Session, mail) -> Party:
    """The party a party's invitation goes to, by the id its Message-ID names (``party-invitation-<id>-…``)."""
    return session.get(Party, int(mail.message_id.strip("<>").removeprefix("party-invitation-").split("-")[0]))


@builder(PARTY_INVITATION)
def build_party_invitation(session: Session, mail, app: Flask):
    """A party's invitation: the template's invitation text, with the party's name and own link."""
    party = _mailed_party(session, mail)
    token = party_link(party, secret=app.config["SECRET_KEY"])
    if token is None:
        raise LookupError(f"party {party.id} has no live signing link")
    if f"-{_link_nonce(party)[:12]}@" not in mail.message_id:
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


def _plain(mail, app: Flask, *, template: str, **context):
    request = context["request"]
    with force_locale(request.batch.language):
        body = render_template(template, document_name=document_title(request.batch), **context)
    message = Message(
        subject=mail.subject, recipients=[mail.to_email], body=body, reply_to=request.batch.reply_to or None
    )
    message.msgId = mail.message_id
    return message


@builder(PARTY_DECLINED)
def build_party_declined(session: Session, mail, app: Flask):
    """To a party already invited: another party declined, and why; nothing more will be asked of them."""
    request = session.get(SigningRequest, mail.request_id)
    decliner = next(p for p in parties_in_order(session, request.id) if p.status == PartyStatus.DECLINED)
    return _plain(
        mail,
        app,
        template="emails/party_declined.txt",
        request=request,
        role=decliner.role,
        who=party_person(decliner)[1] or party_person(decliner)[0],
        reason=decliner.decline_reason or "",
    )


@builder(PARTY_COMPLETED)
def build_party_completed(session: Session, mail, app: Flask):
    """To a party other than the recipient: every party has signed; the sealed PDF is attached."""
    request = session.get(SigningRequest, mail.request_id)
    return _plain(mail, app, template="emails/party_completed.txt", request=request)

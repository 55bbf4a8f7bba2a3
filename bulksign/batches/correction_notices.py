"""What the parties who saw a document are told when staff correct it: a short mail with the sender's note and what
changed, built when sent from the correction it names. Their new link comes with their new invitation."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from flask import Flask
from flask_babel import force_locale
from flask_babel import gettext as _
from flask_mail import Message
from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.batches.cancel_notices import notice_message
from bulksign.doc_templates.template_parties import party_label
from bulksign.documents.audit_record import document_title
from bulksign.mail.mailer import MailNotNeeded, builder, queue_mail
from bulksign.models import RECIPIENT_ROLE, Batch, Correction, Party, SigningRequest
from bulksign.models.corrections import CorrectionStatus
from bulksign.models.mail import MailKind, OutgoingMail

KIND = MailKind.CORRECTION_NOTICE


def tell_corrected(
    session: Session, *, request: SigningRequest, parties: Sequence[Party], version: int, now: datetime
) -> list[int]:
    """Queue a notice to every party the request reached before it becomes ``version`` (at the address it reached
    them at); the mail ids. The caller commits, then sends them."""
    mail_ids: list[int] = []
    subject = _subject(request.batch)
    for party in parties:
        reached = party.invited_at is not None or (party.role == RECIPIENT_ROLE and request.sent_at is not None)
        email = request.email if party.role == RECIPIENT_ROLE else party.email
        if not reached or not email:
            continue  # not invited yet, or reached by text alone: its new invitation is the first it hears
        mail_ids.append(
            queue_mail(
                session,
                key=f"corrected-{request.id}-v{version}-{party.role}",
                kind=KIND,
                to_email=email,
                subject=subject,
                now=now,
                request_id=request.id,
                batch_id=request.batch_id,
                party_id=party.id,
            ).id
        )
    return mail_ids


def _subject(batch: Batch) -> str:
    with force_locale(batch.language):
        return cast(str, _("Corrected: %(name)s", name=document_title(batch)))


def _version_of(mail: OutgoingMail) -> int:
    """The version a notice announces, from its Message-ID (``<corrected-<request>-v<version>-<role>@…>``)."""
    return int(mail.message_id.strip("<>").split("-")[2].removeprefix("v"))


def changed_lines(batch: Batch, changes: dict[str, Any]) -> list[str]:
    """What a correction changed, a line each in the batch's language: values with before and after, names, and
    addresses without them (a party's address is theirs alone)."""
    language = batch.language or "en"
    version = batch.template_version
    lines = [
        _("%(column)s: %(old)s → %(new)s", column=column, old=old or "—", new=new or "—")
        for column, (old, new) in sorted(changes.get("values", {}).items())
    ]
    lines += [
        _("Name of the %(party)s: %(new)s", party=party_label(version, role=role, language=language), new=new)
        for role, (_old, new) in sorted(changes.get("names", {}).items())
    ]
    lines += [
        _("The address of the %(party)s was corrected.", party=party_label(version, role=role, language=language))
        for role in sorted(changes.get("emails", {}))
    ]
    return [str(line) for line in lines]


@builder(KIND)
def build_corrected(session: Session, mail: OutgoingMail, app: Flask) -> Message:
    """To a party who saw the document: the sender corrected it, why and what changed; the old link is dead."""
    request = session.get(SigningRequest, mail.request_id) if mail.request_id else None
    if request is None or request.purged_at is not None:
        raise MailNotNeeded(f"request {mail.request_id} is gone (or purged)")
    version = _version_of(mail)
    correction = session.scalar(
        select(Correction).where(
            Correction.request_id == request.id,
            Correction.version == version,
            Correction.status == CorrectionStatus.APPLIED,
        )
    )
    if correction is None:
        raise MailNotNeeded(f"request {request.id} has no applied correction to version {version}")
    return notice_message(
        mail,
        app,
        batch=request.batch,
        template="emails/request_corrected.txt",
        note=correction.note,
        changed=changed_lines(request.batch, correction.changes),
    )

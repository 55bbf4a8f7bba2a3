"""A party's own copy of a document several sign, from the moment they signed until every party has: the original
with the values and signatures given so far, each page marked "Not complete: waiting for <roles>". Once complete,
the sealed PDF is mailed to every party as before."""

from __future__ import annotations

from dataclasses import dataclass

from flask_babel import force_locale
from flask_babel import lazy_gettext as _l
from sqlalchemy.orm import Session

from bulksign.documents.audit_record import document_title
from bulksign.documents.signed_pdf import marked_copy
from bulksign.documents.storage import Storage
from bulksign.models import Party, SigningRequest
from bulksign.models.parties import PartyStatus
from bulksign.models.status import Status
from bulksign.signing.routing import parties_in_order
from bulksign.signing.steps import batch_party_labels, stamped_so_far


@dataclass(frozen=True)
class PartyCopy:
    data: bytes
    #: ``<document title> – waiting for <roles>.pdf``, in the batch's language.
    filename: str


def party_copy(session: Session, *, request: SigningRequest, party: Party, storage: Storage) -> PartyCopy | None:
    """What ``party`` signed, for them to keep: None unless they signed and the request still waits for others."""
    if party.status != PartyStatus.SIGNED or request.status not in (Status.SENT, Status.OPENED):
        return None
    parties = parties_in_order(session, request.id)
    waiting = [p for p in parties if p.status != PartyStatus.SIGNED]
    if not waiting:
        return None
    signers = [p for p in parties if p.status == PartyStatus.SIGNED]
    data = stamped_so_far(session, request=request, parties=parties, signers=signers, storage=storage)
    batch = request.batch
    labels = batch_party_labels(batch)
    with force_locale(batch.language or "en"):
        roles = ", ".join(dict.fromkeys(labels.get(p.role, p.role) for p in waiting))
        note = str(_l("Not complete: waiting for %(roles)s. Keep it until the sealed copy arrives.", roles=roles))
        name = str(_l("%(title)s – waiting for %(roles)s", title=document_title(batch), roles=roles))
    return PartyCopy(data=marked_copy(data, note=note), filename=f"{name}.pdf")

"""The countersigner's page: every document of a batch ready for one address (``digests``), read one by one and
signed all at once (``countersign_runs``), or a selection, with one signature; declined one by one. How it goes:
docs/architecture/signing.md.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Select, func, or_, select
from sqlalchemy.orm import Session

from bulksign.models import CountersignLink, Document, Party, SigningRequest, TemplateVersion
from bulksign.models.batches import Batch
from bulksign.signing import link_proofs, one_time_codes, steps
from bulksign.signing.acts import Act, DeclineOutcome
from bulksign.signing.countersign_listed import MAX_RUN, Listed
from bulksign.signing.digests import ready_parties
from bulksign.signing.parties import issue_party_link, party_token
from bulksign.signing.recipient_actions import decline
from bulksign.signing.signer_input import MAX_NAME_LENGTH

logger = logging.getLogger(__name__)

#: Documents a page of the list shows.
PER_PAGE = 50


@dataclass(frozen=True)
class ReadyDocument:
    party_id: int
    request_id: int
    #: The row's person (the document is theirs: "Eva Employee's contract").
    name: str
    email: str
    #: Signed on its own page, not in bulk (``OwnPages``).
    own_page: bool


@dataclass(frozen=True)
class ReadyPage:
    documents: tuple[ReadyDocument, ...]
    #: Every ready document matching the search, and of those the ones "Sign all" signs.
    total: int
    signable: int
    page: int
    pages: int
    query: str
    #: What "Sign all" signs: exactly these (the first ``MAX_RUN`` of ``signable``).
    listed: Listed = Listed()


@dataclass(frozen=True)
class OwnPages:
    """Which documents of a batch are signed on their own page (``own_link``), never in bulk."""

    #: The roles the batch's template gives fields to fill.
    field_roles: frozenset[str]

    def own_page(self, role: str) -> bool:
        return role in self.field_roles

    def bulk(self, ready: Select[tuple[Party]]) -> Select[tuple[Party]]:
        """``ready`` kept to the documents signed in bulk."""
        return ready.where(Party.role.not_in(self.field_roles)) if self.field_roles else ready


def own_pages(session: Session, batch_id: int) -> OwnPages:
    fields = session.scalar(
        select(TemplateVersion.fields)
        .join(Batch, Batch.template_version_id == TemplateVersion.id)
        .where(Batch.id == batch_id)
    )
    return OwnPages(frozenset(str(f.get("role")) for f in fields or ()))


def unlocked(session: Session, *, link: CountersignLink, code_id: int | None, now: datetime) -> bool:
    """Whether the countersigner's session may see, sign or decline the link's documents: the batch asks for no
    one-time code, or ``code_id`` (kept by the session) is a code of the link verified within ``VERIFIED_FOR``."""
    return not link.batch.one_time_code or one_time_codes.link_verified(
        session, link_id=link.id, code_id=code_id, now=now
    )


def clean_query(query: str | None) -> str:
    return " ".join((query or "").split())[:MAX_NAME_LENGTH]


def matching_parties(link: CountersignLink, *, query: str, now: datetime) -> Select[tuple[Party]]:
    ready = ready_parties(link, now=now)
    if query:
        like = f"%{query.lower()}%"
        ready = ready.where(
            or_(func.lower(SigningRequest.name).like(like), func.lower(SigningRequest.email).like(like))
        )
    return ready


def ready_page(session: Session, *, link: CountersignLink, query: str, page: int, now: datetime) -> ReadyPage:
    """One page of the documents ready for the link's person, by request, searched by the row's name or address."""
    query = clean_query(query)
    matching = matching_parties(link, query=query, now=now)
    total = session.scalar(select(func.count()).select_from(matching.subquery())) or 0
    rules = own_pages(session, link.batch_id)
    signable = session.scalar(select(func.count()).select_from(rules.bulk(matching).subquery())) or 0
    listed = Listed.of(list(session.scalars(in_order(rules.bulk(matching)).limit(MAX_RUN))))
    pages = max(1, -(-total // PER_PAGE))
    page = min(max(page, 1), pages)
    rows = session.execute(
        matching.with_only_columns(Party.id, Party.request_id, Party.role, SigningRequest.name, SigningRequest.email)
        .order_by(Party.request_id, Party.id)
        .offset((page - 1) * PER_PAGE)
        .limit(PER_PAGE)
    ).all()
    documents = tuple(
        ReadyDocument(party_id, request_id, name or "", email, rules.own_page(role))
        for party_id, request_id, role, name, email in rows
    )
    return ReadyPage(documents, total, signable, page, pages, query, listed)


def in_order(ready: Select[tuple[Party]]) -> Select[tuple[int]]:
    """The party ids of ``ready``, in the page's order."""
    return ready.with_only_columns(Party.id).order_by(Party.request_id, Party.id)


def ready_among(session: Session, ready: Select[tuple[Party]], ids: Sequence[int]) -> set[int]:
    """Those of ``ids`` that ``ready`` holds."""
    found: set[int] = set()
    for start in range(0, len(ids), 1000):
        found.update(session.scalars(ready.with_only_columns(Party.id).where(Party.id.in_(ids[start : start + 1000]))))
    return found


def ready_party(session: Session, *, link: CountersignLink, party_id: int, now: datetime) -> Party | None:
    """The party ``party_id`` if its document is ready for the link's person; None otherwise (another batch's,
    another address's, its step not started, signed, declined, ended)."""
    return session.scalar(ready_parties(link, now=now).where(Party.id == party_id))


def own_link(session: Session, *, link: CountersignLink, party_id: int, secret: str, now: datetime) -> str | None:
    """The token of the document's own signing page (for a document with fields to fill), given once and kept:
    None when it is not ready for the link's person. Commits."""
    party = ready_party(session, link=link, party_id=party_id, now=now)
    if party is None:
        return None
    if party.token_nonce is None:
        token = issue_party_link(session, party=party, secret=secret, now=now, actor="countersigner")
        session.commit()
        return token
    return party_token(party, secret=secret)


def decline_one(
    session: Session,
    *,
    link: CountersignLink,
    party_id: int,
    reason: str,
    ip: str | None,
    user_agent: str | None,
    now: datetime,
    code_id: int | None = None,
) -> DeclineOutcome | None:
    """Decline one document, with a reason, as its party (``recipient_actions.decline``: the request is
    declined and the others told), recording the link's code ``code_id`` when the batch asks for one (``code_needed``
    without a fresh one); None when it is not ready for the link's person."""
    party = ready_party(session, link=link, party_id=party_id, now=now)
    if party is None:
        return None
    if not unlocked(session, link=link, code_id=code_id, now=now):
        return DeclineOutcome(status=Act.CODE_NEEDED, request_id=party.request_id)
    proof = link_proofs.link_proof(session, link=link, code_id=code_id) if link.batch.one_time_code else None
    return decline(
        session,
        request_id=party.request_id,
        now=now,
        reason=reason,
        ip=ip,
        user_agent=user_agent,
        party=party,
        proof=proof,
    )


@dataclass(frozen=True)
class Readable:
    document: Document
    #: Whose document it is: the row's person.
    name: str
    email: str
    #: Signed on its own signing page (its role fills fields), not from this one.
    own_page: bool = False


def readable_document(session: Session, *, link: CountersignLink, party_id: int, now: datetime) -> Readable | None:
    """What the countersigner reads of a ready document: its newest version with the earlier parties' signatures
    (``steps.current_document``), and whose it is; None when it is not ready for the link's person. (In a batch that
    asks for a one-time code, the caller shows it only to a session ``unlocked``.)"""
    party = ready_party(session, link=link, party_id=party_id, now=now)
    if party is None:
        return None
    request = party.request
    document = steps.current_document(session, request.id)
    if document is None:
        return None
    own_page = own_pages(session, link.batch_id).own_page(party.role)
    return Readable(document, request.name or "", request.email, own_page=own_page)

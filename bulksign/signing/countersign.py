"""The countersigner's page: every document of a batch ready for one address (``digests``), read one by one and
signed all at once, or a selection, with one signature; declined one by one.

"Sign all" records a ``CountersignRun`` (the parties chosen, the cleaned name and drawn signature, where from) and
queues its chunk jobs (``COUNTERSIGN_CHUNK`` on ``default``, ``RUN_CHUNK`` parties each): each document goes
through the single page's own path, ``recipient_actions.sign`` with its party — its own compare-and-set, its own
``party.signed`` event with its time and the signer's IP, its own commit, then its seal (``seal-<id>``) or the next
step (``advance-<id>``) queued. A chunk is only ids: a repeat finds the documents signed already and passes them
by, so a worker killed midway leaves each document signed or not, never half, and ``requeue_stalled`` (the
reconciler's tick) queues what is left once no job of the run will run. A lost seal is the reseal tick's.

Documents whose template gives this role fields to fill (issue 30) are not signed in bulk: the page lists them with
their own signing page (``own_link``, ``OwnPages``).

A batch that asks for a one-time code asks the countersigner for one code of their link (``one_time_codes``'s link
codes) before the page shows anything of the documents (``unlocked``); a run or a decline is refused without a
fresh one, and each document it signs or declines records the check in its own trail (``one_time_codes.LinkProof``),
as its own code would. A run is checked when it starts: its jobs may sign after the code's ``VERIFIED_FOR``.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import datetime

from flask_babel import lazy_gettext as _l
from sqlalchemy import Select, func, or_, select, update
from sqlalchemy.orm import Session

from bulksign.core.logs import log
from bulksign.models import CountersignLink, CountersignRun, Document, Party, SigningRequest, TemplateVersion
from bulksign.models.batches import Batch
from bulksign.signing import one_time_codes, routing
from bulksign.signing.digests import ready_parties
from bulksign.signing.parties import issue_party_link, party_token
from bulksign.signing.recipient_actions import (
    MAX_NAME_LENGTH,
    DeclineOutcome,
    InvalidInput,
    clean_signature,
    decline,
    sign,
)
from bulksign.work.queues import COUNTERSIGN_CHUNK

logger = logging.getLogger(__name__)

#: Documents one chunk job signs (each its own commit; a killed worker's chunk is redone from what is left).
RUN_CHUNK = 50
#: A run's documents are queued again at most this many times after its jobs died; then it ends, and what is left
#: stays on the countersigner's page to sign again.
MAX_GENERATIONS = 5
#: Documents a page of the list shows.
PER_PAGE = 50
#: At most this many documents in one run (a selection beyond is refused with a message).
MAX_RUN = 20_000


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


@dataclass(frozen=True)
class OwnPages:
    """Which documents of a batch are signed on their own page (``own_link``), never in bulk."""

    #: The roles the batch's template gives fields to fill (issue 30).
    field_roles: frozenset[str]

    def own_page(self, role: str) -> bool:
        return role in self.field_roles

    def bulk(self, ready: Select) -> Select:
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


def _matching(link: CountersignLink, *, query: str, now: datetime):
    ready = ready_parties(link, now=now)
    if query:
        like = f"%{query.lower()}%"
        ready = ready.where(
            or_(func.lower(SigningRequest.name).like(like), func.lower(SigningRequest.email).like(like))
        )
    return ready


def ready_page(session: Session, *, link: CountersignLink, query: str, page: int, now: datetime) -> ReadyPage:
    """One page of the documents ready for the link's person, by request, searched by the row's name or address."""
    query = " ".join((query or "").split())[:MAX_NAME_LENGTH]
    matching = _matching(link, query=query, now=now)
    total = session.scalar(select(func.count()).select_from(matching.subquery())) or 0
    rules = own_pages(session, link.batch_id)
    signable = session.scalar(select(func.count()).select_from(rules.bulk(matching).subquery()))
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
    return ReadyPage(documents, total, signable, page, pages, query)


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


@dataclass(frozen=True)
class RunStarted:
    #: ``started``, ``invalid`` (``message`` says what to correct), ``nothing`` (no chosen document is ready) or
    #: ``code_needed`` (the batch asks for a one-time code, and the session has no fresh one of the link).
    status: str
    run_id: int | None = None
    count: int = 0
    message: str = ""


def start_run(
    session: Session,
    *,
    link: CountersignLink,
    party_ids: list[int] | None,
    signer_name: str,
    signature_png: bytes | None,
    consent: bool,
    ip: str | None,
    user_agent: str | None,
    now: datetime,
    code_id: int | None = None,
) -> RunStarted:
    """Sign the chosen documents (``party_ids``; None: every one ready) with one signature: checks what was typed
    and drawn as the single page does, keeps the ready ones signed in bulk (``OwnPages``), records the run and commits;
    then queues its chunks. ``code_id``: the link's one-time code the session verified, when the batch asks for one
    (the run keeps it: each document records it)."""
    if not unlocked(session, link=link, code_id=code_id, now=now):
        return RunStarted("code_needed")
    try:
        name, image = clean_signature(signer_name=signer_name, signature_png=signature_png, consent=consent)
    except InvalidInput as exc:
        return RunStarted("invalid", message=exc.args[0])
    rules = own_pages(session, link.batch_id)
    chosen = rules.bulk(ready_parties(link, now=now)).with_only_columns(Party.id).order_by(Party.request_id, Party.id)
    if party_ids is not None:
        if len(party_ids) > MAX_RUN:
            return RunStarted("invalid", message=_l("Choose at most %(count)s documents at once.", count=MAX_RUN))
        wanted = set(party_ids)
        ids = [i for i in session.scalars(chosen) if i in wanted]
    else:
        ids = list(session.scalars(chosen.limit(MAX_RUN)))
    if not ids:
        return RunStarted("nothing")
    run = CountersignRun(
        link_id=link.id,
        party_ids=ids,
        signer_name=name,
        signature_image=image,
        signer_ip=(ip or "")[:64],
        user_agent=(user_agent or "")[:500],
        created_at=now,
        generation=0,
        job_ids=[],
        code_id=code_id if link.batch.one_time_code else None,
    )
    session.add(run)
    session.flush()
    run.job_ids = _chunk_ids(run, ids)
    session.commit()
    _queue(run, ids)
    log(logger, logging.INFO, "countersign run started", run_id=run.id, batch_id=link.batch_id, documents=len(ids))
    return RunStarted("started", run.id, len(ids))


def _chunks(ids: list[int]) -> list[list[int]]:
    return [ids[start : start + RUN_CHUNK] for start in range(0, len(ids), RUN_CHUNK)]


def _chunk_ids(run: CountersignRun, ids: list[int]) -> list[str]:
    return [
        COUNTERSIGN_CHUNK.job_id(run=run.id, generation=run.generation, first=f"{chunk[0]}-{secrets.token_hex(3)}")
        for chunk in _chunks(ids)
    ]


def _queue(run: CountersignRun, ids: list[int]) -> None:
    """Queue the run's chunks under the job ids it recorded (Redis down: the reconciler queues them later)."""
    from redis.exceptions import RedisError

    try:
        for chunk, job_id in zip(_chunks(ids), run.job_ids, strict=True):
            COUNTERSIGN_CHUNK.enqueue(run.id, chunk, job_id=job_id)
    except RedisError as exc:
        log(logger, logging.ERROR, "could not queue a countersign run", run_id=run.id, error=str(exc))


def run_proof(session: Session, run: CountersignRun) -> one_time_codes.LinkProof | None:
    """The one-time code check the run's documents record (None: its batch asks for none)."""
    if run.code_id is None:
        return None
    return one_time_codes.link_proof(session, link=session.get(CountersignLink, run.link_id), code_id=run.code_id)


def sign_one(
    session: Session, *, run: CountersignRun, party_id: int, now: datetime, proof: one_time_codes.LinkProof | None
) -> str:
    """Sign one chosen document of the run through the single page's path, recording ``proof`` (``run_proof``);
    what became of it (``signed``, ``already_signed``, ``not_allowed``, ``code_needed`` … or ``gone``: no longer
    ready for the run's person)."""
    link = session.get(CountersignLink, run.link_id)
    party = ready_party(session, link=link, party_id=party_id, now=now)
    if party is None:
        session.rollback()
        return "gone"
    return sign(
        session,
        request_id=party.request_id,
        now=now,
        signer_name=run.signer_name,
        signature_png=run.signature_image,
        consent=True,
        ip=run.signer_ip,
        user_agent=run.user_agent,
        party=party,
        proof=proof,
    ).status


@dataclass(frozen=True)
class RunProgress:
    run_id: int
    total: int
    #: Chosen documents no longer waiting (signed by the run, or gone another way), and of those signed.
    done: int
    signed: int

    @property
    def finished(self) -> bool:
        return self.done >= self.total


def _left(session: Session, run: CountersignRun, link: CountersignLink, *, now: datetime) -> list[int]:
    """The run's documents still ready for its person, in its order."""
    ready = set()
    for start in range(0, len(run.party_ids), 1000):
        part = run.party_ids[start : start + 1000]
        ready.update(
            session.scalars(ready_parties(link, now=now).with_only_columns(Party.id).where(Party.id.in_(part)))
        )
    return [i for i in run.party_ids if i in ready]


def run_progress(session: Session, *, link: CountersignLink, run_id: int, now: datetime) -> RunProgress | None:
    """How far the run is; None when it is not this link's."""
    run = session.get(CountersignRun, run_id)
    if run is None or run.link_id != link.id:
        return None
    left = len(_left(session, run, link, now=now))
    signed = 0
    for start in range(0, len(run.party_ids), 1000):
        part = run.party_ids[start : start + 1000]
        signed += session.scalar(
            select(func.count()).where(Party.id.in_(part), Party.status == "signed", Party.signed_at >= run.created_at)
        )
    return RunProgress(run.id, len(run.party_ids), len(run.party_ids) - left, signed)


def requeue_stalled(session: Session, *, live: set[str], runs: list[CountersignRun], now: datetime) -> list[int]:
    """For each unfinished run none of whose jobs will run (``live``: the job ids RQ will still run): mark it
    finished when nothing is left, else record a new generation of chunk jobs for what is left (compare-and-set on
    the generation) and queue them. Commits each; the ids of the runs queued again."""
    queued = []
    for run in runs:
        if set(run.job_ids) & live:
            continue
        link = session.get(CountersignLink, run.link_id)
        left = _left(session, run, link, now=now)
        if not left or run.generation >= MAX_GENERATIONS:
            if left:  # each try left them unsigned (a database error each time?): the countersigner signs again
                log(logger, logging.ERROR, "countersign run given up", run_id=run.id, left=len(left))
            session.execute(
                update(CountersignRun)
                .where(CountersignRun.id == run.id, CountersignRun.finished_at.is_(None))
                .values(finished_at=now)
            )
            session.commit()
            continue
        generation = run.generation + 1
        job_ids = [
            COUNTERSIGN_CHUNK.job_id(run=run.id, generation=generation, first=f"{chunk[0]}-{secrets.token_hex(3)}")
            for chunk in _chunks(left)
        ]
        won = session.execute(
            update(CountersignRun)
            .where(CountersignRun.id == run.id, CountersignRun.generation == run.generation)
            .values(generation=generation, job_ids=job_ids)
        ).rowcount
        session.commit()
        if won:
            session.refresh(run)
            _queue(run, left)
            queued.append(run.id)
            log(
                logger,
                logging.WARNING,
                "countersign run's job lost; what is left queued again",
                run_id=run.id,
                left=len(left),
            )
    return queued


def unfinished_runs(session: Session, *, older_than: datetime) -> list[CountersignRun]:
    """Runs not marked finished, started before ``older_than`` (younger ones are left to the jobs being queued)."""
    return list(
        session.scalars(
            select(CountersignRun)
            .where(CountersignRun.finished_at.is_(None), CountersignRun.created_at < older_than)
            .order_by(CountersignRun.id)
            .limit(200)
        )
    )


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
        return DeclineOutcome(status="code_needed", request_id=party.request_id)
    proof = one_time_codes.link_proof(session, link=link, code_id=code_id) if link.batch.one_time_code else None
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


def readable_document(session: Session, *, link: CountersignLink, party_id: int, now: datetime) -> Readable | None:
    """What the countersigner reads of a ready document: its newest version with the earlier parties' signatures
    (``routing.current_document``), and whose it is; None when it is not ready for the link's person. (In a batch that
    asks for a one-time code, the caller shows it only to a session ``unlocked``.)"""
    party = ready_party(session, link=link, party_id=party_id, now=now)
    if party is None:
        return None
    request = party.request
    return Readable(routing.current_document(session, request.id), request.name or "", request.email)

"""A countersigner's "sign all": a run of exactly the documents the page listed, signed in chunk jobs, each document
through the single page's own path; a run whose jobs died is queued again."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal, cast

from flask_babel import lazy_gettext as _l
from sqlalchemy import CursorResult, func, select, update
from sqlalchemy.orm import Session

from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.models import RECIPIENT_ROLE, CountersignLink, CountersignRun, Party
from bulksign.models.parties import PartyStatus
from bulksign.signing import link_proofs
from bulksign.signing.acts import Act
from bulksign.signing.countersign import (
    clean_query,
    in_order,
    matching_parties,
    own_pages,
    ready_among,
    ready_party,
    unlocked,
)
from bulksign.signing.countersign_listed import LIST_CHANGED, MAX_RUN, Listed, changed_message, digest_of
from bulksign.signing.digests import ready_parties
from bulksign.signing.recipient_actions import sign
from bulksign.signing.signer_input import InvalidInput, clean_signature
from bulksign.work.queues import COUNTERSIGN_CHUNK

logger = logging.getLogger(__name__)

#: Documents one chunk job signs (each its own commit; a killed worker's chunk is redone from what is left).
RUN_CHUNK = 50
#: A run's documents are queued again at most this many times after its jobs died; then it ends, and what is left
#: stays on the countersigner's page to sign again.
MAX_GENERATIONS = 5


class RunStatus(StrEnum):
    STARTED = "started"
    #: ``message`` says what to correct.
    INVALID = "invalid"
    #: The listed documents are no longer the ones waiting: ``message`` says so.
    CHANGED = "changed"
    #: Nothing was listed.
    NOTHING = "nothing"
    #: The batch asks for a one-time code, and the session has no fresh one of the link.
    CODE_NEEDED = "code_needed"


@dataclass(frozen=True)
class RunStarted:
    status: RunStatus
    run_id: int | None = None
    count: int = 0
    message: str | N_ = ""


def start_run(
    session: Session,
    *,
    link: CountersignLink,
    listed: Listed | None,
    query: str,
    signer_name: str,
    signature_png: bytes | None,
    consent: bool,
    ip: str | None,
    user_agent: str | None,
    now: datetime,
    code_id: int | None = None,
) -> RunStarted:
    """Sign exactly the documents the page listed (``listed``; None: the form carried no list) with one signature: the
    input checked as the single page does, each listed document still waiting, else ``CHANGED``. Records the run
    and commits, then queues its chunks; ``code_id``: the link's verified code, kept by the run."""
    if not unlocked(session, link=link, code_id=code_id, now=now):
        return RunStarted(RunStatus.CODE_NEEDED)
    try:
        name, image = clean_signature(signer_name=signer_name, signature_png=signature_png, consent=consent)
    except InvalidInput as exc:
        return RunStarted(RunStatus.INVALID, message=exc.message)
    if listed is None:
        return RunStarted(RunStatus.CHANGED, message=LIST_CHANGED)
    rules = own_pages(session, link.batch_id)
    if listed.digest:
        ids = list(
            session.scalars(
                in_order(rules.bulk(matching_parties(link, query=clean_query(query), now=now))).limit(MAX_RUN)
            )
        )
        if len(ids) != listed.count or digest_of(ids) != listed.digest:
            return RunStarted(RunStatus.CHANGED, message=LIST_CHANGED)
    else:
        if len(listed.ids) > MAX_RUN:
            return RunStarted(
                RunStatus.INVALID, message=_l("Choose at most %(count)s documents at once.", count=MAX_RUN)
            )
        waiting = ready_among(session, rules.bulk(ready_parties(link, now=now)), listed.ids)
        gone = len(listed.ids) - len(waiting)
        if gone:
            return RunStarted(RunStatus.CHANGED, count=gone, message=changed_message(gone))
        ids = list(listed.ids)
    if not ids:
        return RunStarted(RunStatus.NOTHING)
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
    return RunStarted(RunStatus.STARTED, run.id, len(ids))


@dataclass(frozen=True)
class Adopted:
    """The typed name and drawing of a run the countersigner's browser started: the next documents offer them."""

    signer_name: str
    signature_png: bytes


def adopted(session: Session, *, link: CountersignLink, run_id: int | None) -> Adopted | None:
    """What run ``run_id`` (the last one this browser started on ``link``) was signed with, so the countersigner
    draws once a session; None when it is not the link's or had no drawing."""
    run = session.get(CountersignRun, run_id) if run_id is not None else None
    if run is None or run.link_id != link.id or run.signature_image is None:
        return None
    return Adopted(signer_name=run.signer_name, signature_png=run.signature_image)


def adopted_by_party(session: Session, *, party: Party, runs: dict[str, int]) -> Adopted | None:
    """``adopted`` for a countersigner's party opened on its document's own page (a document with fields):
    ``runs`` maps the browser's countersign links to their last run; None for anyone else."""
    if not runs or not party.email or party.role == RECIPIENT_ROLE:
        return None
    link = session.scalar(
        select(CountersignLink).where(
            CountersignLink.batch_id == party.batch_id, CountersignLink.email == func.lower(party.email)
        )
    )
    return adopted(session, link=link, run_id=runs.get(str(link.id))) if link is not None else None


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


def run_proof(session: Session, run: CountersignRun) -> link_proofs.LinkProof | None:
    """The one-time code check the run's documents record (None: its batch asks for none)."""
    if run.code_id is None:
        return None
    return link_proofs.link_proof(session, link=session.get_one(CountersignLink, run.link_id), code_id=run.code_id)


def sign_one(
    session: Session, *, run: CountersignRun, party_id: int, now: datetime, proof: link_proofs.LinkProof | None
) -> Act | Literal["gone"]:
    """Sign one chosen document of the run through the single page's path, recording ``proof`` (``run_proof``);
    what became of it, or ``gone``: no longer ready for the run's person."""
    link = session.get_one(CountersignLink, run.link_id)
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
    ready = ready_among(session, ready_parties(link, now=now), run.party_ids)
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
        signed += (
            session.scalar(
                select(func.count()).where(
                    Party.id.in_(part), Party.status == PartyStatus.SIGNED, Party.signed_at >= run.created_at
                )
            )
            or 0
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
        link = session.get_one(CountersignLink, run.link_id)
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
        won = cast(
            CursorResult[Any],
            session.execute(
                update(CountersignRun)
                .where(CountersignRun.id == run.id, CountersignRun.generation == run.generation)
                .values(generation=generation, job_ids=job_ids)
            ),
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

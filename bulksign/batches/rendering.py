"""The render step of a chunk of requests: claim, render and store each document, settle the chunk in one
transaction. docs/architecture/rendering.md has the path and what a killed worker leaves."""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

from flask import Flask
from sqlalchemy import select

from bulksign.batches.notices import queued_completion_notices
from bulksign.batches.progress import cancel_if_batch_stopped, close_if_done, mark_batch_started
from bulksign.batches.states import transition
from bulksign.core.error_tracking import Fault, OperatorFaults
from bulksign.core.extensions import db
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.kinds import field_boxes, prepare_document, signature_box
from bulksign.doc_templates.roles import mark_variables
from bulksign.doc_templates.together import remember_alone, render_chunk_together, tries_together
from bulksign.doc_templates.value_filters import LANGUAGE_VARIABLE
from bulksign.documents.field_boxes import field_values, stored_marks
from bulksign.documents.pdf import RenderError
from bulksign.documents.rendering import Converter, Converting, original_key, record_times, store_original
from bulksign.documents.signature_box import SignatureBox, UnreadablePdf, mark_values
from bulksign.documents.storage import StorageError, backend_of
from bulksign.documents.together import Part
from bulksign.models import Document, SigningRequest, TemplateVersion, utcnow
from bulksign.models.status import Status
from bulksign.signing.invitations import load_requests, queue_invitations
from bulksign.signing.routing import invite_first_step, later_recipients, send_to_first_step
from bulksign.work import stopping
from bulksign.work.pipeline import RENDER, SEND, enqueue_sends, hand_back, top_up

logger = logging.getLogger(__name__)
T = TypeVar("T")


class TransientFailure(RuntimeError):
    """Raised after some requests were put back in ``pending``: RQ re-runs the job after a backoff."""


def document_context(request: SigningRequest) -> dict[str, Any]:
    """The variables a request's document sees: the row's columns, then the built-in ones."""
    return row_context(
        request.batch.template_version,
        data=request.data or {},
        email=request.email,
        name=request.name,
        phone=request.phone,
        language=request.batch.language or "en",
    )


def row_context(
    version: TemplateVersion, *, data: Mapping[str, Any], email: str, name: str, phone: str | None, language: str
) -> dict[str, Any]:
    """The variables a document of ``version`` sees for a row: its columns, then the built-in ones (a request's,
    or a checked file's row before there is one)."""
    return {
        **data,
        "email": email,
        "name": name,
        "phone": phone or "",
        # ``{{ signature }}`` and every other role's mark of the version, each in its own shade.
        **mark_values(mark_variables(version)),
        # ``{{ field_<name> }}``: the empty box of a field the signer fills, whatever a prefill column holds.
        **field_values(stored_marks(version.fields)),
        # The language ``|date``, ``|money`` and ``|in_words`` write in.
        LANGUAGE_VARIABLE: language,
    }


@dataclass(frozen=True)
class Rendered:
    # Ids, not the request: the settling transition expires the loaded request.
    request_id: int
    batch_id: int
    key: str
    data: bytes
    #: Where the document marks the signature; None: sealing appends a signature page.
    signature_box: SignatureBox | None = None
    #: Where it shows each field the signer fills, by field name.
    field_boxes: dict[str, SignatureBox] | None = None
    #: How long it took to render, for the render figures.
    seconds: float = 0.0


@dataclass(frozen=True)
class Problem:
    request: SigningRequest
    #: What a person reads on the request.
    message: str
    #: What the log keeps (stderr of the renderer, the storage error …).
    detail: str = ""


def render_chunk(request_ids: list[int], *, app: Flask) -> str:
    """Render the pending requests among ``request_ids``; returns what happened. Raises TransientFailure to retry
    those that may render later."""
    session = db.session
    now = utcnow()
    stopped = cancel_if_batch_stopped(session, request_ids=request_ids, now=now)
    claimed = transition(
        session,
        [i for i in request_ids if i not in stopped],
        frm=Status.PENDING,
        to=Status.GENERATING,
        now=now,
        attempts=SigningRequest.attempts + 1,
    ).won
    if not claimed:
        session.commit()  # the stopped ones
        return "skipped: none pending"
    batch_ids = list(session.scalars(select(SigningRequest.batch_id).where(SigningRequest.id.in_(claimed)).distinct()))
    for batch_id in batch_ids:
        mark_batch_started(session, batch_id=batch_id, now=now)
    session.commit()
    # This chunk left its batch's line: the batch's next chunk goes to the back of it (``pipeline.top_up``).
    top_up(RENDER, batch_ids)

    limit = app.config["RENDER_MAX_ATTEMPTS"]
    rendered: list[Rendered | None] = []
    failed: list[Problem] = []
    retry: list[Problem] = []
    untried: list[int] = []
    # Staff can mend a template, not a full disk or a missing renderer: those go to Sentry.
    faults = OperatorFaults()

    def attempt(request: SigningRequest, step: Callable[[], T]) -> T | None:
        """Run one step of a request's document; on failure file the problem and return None."""
        try:
            return step()
        except TemplateError as exc:
            failed.append(Problem(request, _not_filled_in(exc)))
        except RenderError as exc:
            if exc.transient:  # the renderer missing, crashed or out of time: not the document's fault
                faults.add(Fault(("renderer-unavailable", request.batch.template_version.kind), exc))
            bound = min(limit, exc.attempts or limit)
            (retry if exc.transient and request.attempts < bound else failed).append(
                Problem(request, _gave_up(str(exc.message), request, bound, transient=exc.transient), exc.detail)
            )
        except StorageError as exc:
            faults.add(Fault(("storage-write", backend_of(app.config["STORAGE_URL"])), exc))
            (retry if request.attempts < limit else failed).append(
                Problem(request, _gave_up(str(exc), request, limit, transient=True), repr(exc.__cause__))
            )
        except Exception as exc:  # noqa: BLE001 - one request's surprise must not take its chunk down
            logger.exception("render crashed", extra={"fields": {"request_id": request.id}})
            faults.add(Fault(("render-crashed", type(exc).__name__), exc))
            failed.append(
                Problem(request, f"The document could not be rendered: {type(exc).__name__}: {exc}", repr(exc))
            )
        return None

    requests = load_requests(session, claimed)
    ready = _rendered_together(requests, app=app) if app.config["RENDER_TOGETHER"] else {}
    with Converter() as converter:
        previous: InFlight | None = None
        for request in requests:
            if stopping.is_requested():
                untried.append(request.id)
                continue
            if request.attempts > limit:
                # Queued again and again by the reconciler: the worker dies on this document.
                failed.append(
                    Problem(
                        request,
                        f"The document could not be rendered after {limit} attempts (the renderer stopped each time).",
                    )
                )
                continue
            current = attempt(request, partial(_start, request, converter, app=app, ready=ready.get(request.id)))
            if previous is not None:
                rendered.append(attempt(previous.request, partial(_store, previous)))
            previous = current
        if previous is not None:
            rendered.append(attempt(previous.request, partial(_store, previous)))
    faults.report(stage="render")
    record_times([r.seconds for r in rendered if r is not None])
    return _settle(
        rendered=[r for r in rendered if r is not None], failed=failed, retry=retry, untried=untried, app=app
    )


#: What a failed request's error says first when its template failed on the row.
NOT_FILLED_IN = "The template could not be filled in:"


def _not_filled_in(exc: TemplateError) -> str:
    """The template's error as the request keeps it, saying "could not be filled in" once: the sandbox's own
    messages for an expression that failed already start with it."""
    text = str(exc)
    return text if NOT_FILLED_IN in text else f"{NOT_FILLED_IN} {text}"


def _gave_up(message: str, request: SigningRequest, limit: int, *, transient: bool) -> str:
    return (
        f"{message} (gave up after {request.attempts} attempts)" if transient and request.attempts >= limit else message
    )


@dataclass(frozen=True)
class InFlight:
    """A request's document handed to the converter."""

    request: SigningRequest
    converting: Converting


def _rendered_together(requests: list[SigningRequest], *, app: Flask) -> dict[int, tuple[Part, float]]:
    """The chunk's documents from as few runs as they allow (``doc_templates.together``), with each one's share of
    the time; {} when they are rendered one by one (several versions, or one that is not tried together)."""
    versions = {request.batch.template_version for request in requests}
    if len(versions) != 1 or not tries_together(version := versions.pop()):
        return {}
    started = time.perf_counter()
    rows = {request.id: document_context(request) for request in requests}
    chunk = render_chunk_together(version, rows, timeout=app.config["PDF_TIMEOUT_SECONDS"])
    if chunk.refused is not None:
        remember_alone(db.session, version.id, chunk.refused, batch_id=requests[0].batch_id, now=utcnow())
    share = (time.perf_counter() - started) / max(len(chunk.parts), 1)
    return {request_id: (part, share) for request_id, part in chunk.parts.items()}


def _start(
    request: SigningRequest, converter: Converter, *, app: Flask, ready: tuple[Part, float] | None = None
) -> InFlight:
    """Fill in the request's document and queue it for the converter (it starts when the one before is done);
    ``ready``: its PDF already rendered together with the chunk's."""
    if ready is not None:
        part, seconds = ready
        return InFlight(request, Converter.ready(part.pdf, seconds, marks_view=part.marks_view))
    convert = prepare_document(
        request.batch.template_version, document_context(request), timeout=app.config["PDF_TIMEOUT_SECONDS"]
    )
    return InFlight(request, converter.start(convert))


def _store(document: InFlight) -> Rendered:
    """Wait for the document's PDF, find its signature box, store it; raises what any of that raised."""
    made = document.converting.made()
    request = document.request
    version = request.batch.template_version
    try:
        box = signature_box(version, made.marked)
        fields = field_boxes(version, made.marked) if version.fields else None
    except UnreadablePdf as exc:
        raise RenderError(
            N_("The rendered document could not be read back."), transient=True, detail=str(exc)
        ) from None
    key = original_key(batch_id=request.batch_id, request_id=request.id, version=request.document_version)
    store_original(key, made.pdf)
    return Rendered(request.id, request.batch_id, key, made.pdf, box, fields, made.seconds)


def _settle(
    *, rendered: list[Rendered], failed: list[Problem], retry: list[Problem], untried: list[int], app: Flask
) -> str:
    """One transaction for the whole chunk: documents, states, invitation rows; then queue the sends.

    ``untried``: requests the chunk did not render because the worker is stopping; they go back to
    ``pending`` with their claim uncounted and are queued again for another worker.
    """
    session = db.session
    now = utcnow()
    # Cancelled (or reconciled) while rendering: its stored file is simply unused.
    won = set(
        transition(
            session,
            [r.request_id for r in rendered],
            frm=Status.GENERATING,
            to=Status.GENERATED,
            now=now,
            attempts=0,
            error_message=None,
        ).won
    )
    session.add_all(
        [
            Document(
                request_id=r.request_id,
                kind="original",
                storage_key=r.key,
                sha256=hashlib.sha256(r.data).hexdigest(),
                size=len(r.data),
                created_at=now,
                signature_box=r.signature_box.to_json() if r.signature_box else None,
                field_boxes={name: b.to_json() for name, b in r.field_boxes.items()}
                if r.field_boxes is not None
                else None,
            )
            for r in rendered
            if r.request_id in won
        ]
    )
    # The invitation rows are written in the same transaction: a generated request always has one, unless its
    # recipient signs after others: it goes out to them (sent), and its recipient is invited when its step starts.
    later = later_recipients(session, sorted(won))
    invitations = queue_invitations(session, request_ids=sorted(won - later), now=now, app=app)
    # The first step's other parties of a document several sign: their document is ready too.
    party_mails = invite_first_step(session, request_ids=sorted(invitations.mail_ids), now=now, app=app)
    party_mails += send_to_first_step(session, request_ids=sorted(later), now=now, app=app)
    for request_id, message in invitations.errors.items():
        _fail(Problem(session.get_one(SigningRequest, request_id), message), frm=Status.GENERATED, now=now)
    for problem in failed:
        _fail(problem, frm=Status.GENERATING, now=now)
    for problem in retry:
        transition(
            session,
            problem.request.id,
            frm=Status.GENERATING,
            to=Status.PENDING,
            now=now,
            error_message=problem.message[:2000],
            details={"retry": problem.request.attempts},
        )
        log(
            logger,
            logging.WARNING,
            "render failed, will retry",
            request_id=problem.request.id,
            attempt=problem.request.attempts,
            error=problem.message,
            detail=problem.detail,
        )
    transition(
        session,
        untried,
        frm=Status.GENERATING,
        to=Status.PENDING,
        now=now,
        attempts=SigningRequest.attempts - 1,
        details={"handed_back": True},
    )
    touched = {p.request.batch_id for p in failed}
    touched |= {r.batch_id for r in rendered if r.request_id in invitations.errors}
    closed = [batch_id for batch_id in touched if close_if_done(session, batch_id=batch_id, now=now)]
    counts = Counter(
        {
            "generated": len(invitations.mail_ids) + len(later),
            "failed": len(failed) + len(invitations.errors),
            "retried": len(retry),
            "handed back": len(untried),
        }
    )
    retry_message = retry[0].message if retry else ""
    session.commit()

    log(
        logger,
        logging.INFO,
        "documents rendered",
        generated=counts["generated"],
        failed=counts["failed"],
        retried=counts["retried"],
        request_ids=sorted(invitations.mail_ids),
    )
    # The invitations wait in the database; their batch's send window takes them from there.
    top_up(SEND, {r.batch_id for r in rendered if r.request_id in invitations.mail_ids})
    if party_mails:
        enqueue_sends(party_mails)
    enqueue_sends(queued_completion_notices(session, batch_ids=closed))
    if untried:
        log(logger, logging.INFO, "worker stopping, renders handed back", request_ids=untried)
        hand_back(RENDER, untried)
    if retry:
        raise TransientFailure(f"{len(retry)} documents will be rendered again: {retry_message}")
    return ", ".join(f"{kind} {n}" for kind, n in counts.items() if n) or "nothing to do"


def _fail(problem: Problem, *, frm: Status, now: datetime) -> None:
    request = problem.request
    transition(
        db.session,
        request.id,
        frm=frm,
        to=Status.FAILED,
        now=now,
        error_message=problem.message[:2000],
        details={"error": problem.message[:500]},
    )
    log(
        logger,
        logging.ERROR,
        "render failed",
        request_id=request.id,
        batch_id=request.batch_id,
        error=problem.message,
        detail=problem.detail,
    )

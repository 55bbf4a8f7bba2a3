"""Outgoing webhooks: endpoints are registered for events of a team, and new events and batch moves become one
delivery row per endpoint that wants them (``emit``, ``collect``), sent later by ``webhook_delivery``. A periodic job
runs ``collect``, so no state change anywhere needs a webhook call."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from bulksign.core.errors import BulksignError
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.integrations.webhook_delivery import DeliveryStatus
from bulksign.integrations.webhook_events import (
    EVENT_TYPES,
    EVENTS,
    BatchEvent,
    BatchRef,
    RequestEvent,
    RequestRef,
    party_ref,
    request_links,
)
from bulksign.models import Batch, Event, SigningRequest, WebhookDelivery, WebhookEndpoint
from bulksign.models.status import BATCH_STATE_NAMES, BatchStatus

logger = logging.getLogger(__name__)

#: What the signers of each request filled in, by field name, as machines are given it: the domain's reading
#: (``batches.field_values.values_by_name``), passed in by the caller. Requests without values are left out.
ValuesOf = Callable[[Session, list[int]], Mapping[int, Mapping[str, str | None]]]

#: Batch events → the column whose time says the batch got there.
BATCH_EVENTS = {
    "batch.completed": Batch.finished_at,
    "batch.all_signed": Batch.settled_at,
    "batch.closed": Batch.settled_at,
    "batch.approved": Batch.approval_at,
}
#: Batch events told only of batches in this status (the settling events share their column).
BATCH_OUTCOMES = {"batch.all_signed": BatchStatus.ALL_SIGNED, "batch.closed": BatchStatus.CLOSED}
#: Batch events told only of batches whose approval is so (``approval_at`` marks a rejection too).
BATCH_APPROVALS = {"batch.approved": "approved"}
#: Batches read per event and run of ``collect``.
BATCH_PAGE = 1000


class WebhookError(BulksignError):
    """Input a person can correct; the message says how."""


def create_endpoint(
    session: Session, *, url: str, events: list[str], user_id: int | None, now: datetime, team_id: int | None = None
) -> WebhookEndpoint:
    """Register an endpoint hearing ``team_id``'s events (None: every team's); its signing secret is generated here."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or len(url) > 1000:
        raise WebhookError(N_("Enter the endpoint's full address, starting with https:// (or http://)."))
    unknown = sorted(set(events) - set(EVENTS))
    if unknown:
        raise WebhookError(N_("Unknown events: %(events)s.", events=", ".join(unknown)))
    if not events:
        raise WebhookError(N_("Choose at least one event to send to this endpoint."))
    endpoint = WebhookEndpoint(
        url=url,
        events=[e for e in EVENTS if e in events],
        secret=secrets.token_hex(24),
        active=True,
        created_by_id=user_id,
        created_at=now,
        team_id=team_id,
    )
    session.add(endpoint)
    session.flush()
    log(logger, logging.INFO, "webhook endpoint created", endpoint_id=endpoint.id)
    return endpoint


def endpoints(session: Session) -> Sequence[WebhookEndpoint]:
    """Every endpoint, oldest first."""
    return session.scalars(select(WebhookEndpoint).order_by(WebhookEndpoint.id)).all()


def set_active(session: Session, *, endpoint_id: int, active: bool) -> WebhookEndpoint | None:
    """Enable or pause an endpoint (a paused one gets no new deliveries); None when there is none. The caller
    commits."""
    endpoint = session.get(WebhookEndpoint, endpoint_id)
    if endpoint is not None:
        endpoint.active = active
    return endpoint


@dataclass(frozen=True)
class EmitResult:
    delivery_ids: tuple[int, ...]


def emit(
    session: Session, *, event: str, payload: dict, team_id: int | None, now: datetime, request_id: int | None = None
) -> EmitResult:
    """Record one delivery per active endpoint that wants ``event`` of team ``team_id`` (the caller commits).

    An endpoint of a team hears only that team's events; one without a team hears every team's. ``request_id``: the
    request a ``request.*`` or ``party.*`` payload tells of, whose purge reaches the delivery.
    """
    if event not in EVENTS:
        raise ValueError(f"unknown webhook event {event!r}")
    endpoints = session.scalars(
        select(WebhookEndpoint).where(
            WebhookEndpoint.active.is_(True), or_(WebhookEndpoint.team_id.is_(None), WebhookEndpoint.team_id == team_id)
        )
    ).all()
    deliveries = [
        WebhookDelivery(
            endpoint_id=e.id,
            event=event,
            request_id=request_id,
            payload=payload,
            status=DeliveryStatus.PENDING,
            created_at=now,
            next_attempt_at=now,
        )
        for e in endpoints
        if event in (e.events or [])
    ]
    session.add_all(deliveries)
    session.flush()
    return EmitResult(delivery_ids=tuple(d.id for d in deliveries))


@dataclass(frozen=True)
class CollectResult:
    #: The cursors to pass next time.
    last_event_id: int
    batches_since: datetime
    deliveries: int


def collect(
    session: Session,
    *,
    after_event_id: int | None,
    batches_since: datetime | None,
    now: datetime,
    app_url: str,
    values_of: ValuesOf,
    limit: int = 5000,
) -> CollectResult:
    """Turn events after ``after_event_id`` and batches finished since ``batches_since`` into deliveries
    (``app_url``: where the payloads' links point; ``values_of``: what ``request.signed`` carries).

    With no cursor yet, start from now: an endpoint hears about what happens after it exists.
    """
    top: int = session.scalar(select(func.coalesce(func.max(Event.id), 0))) or 0
    wanted = _wanted_events(session)
    last_event_id, made = _request_events(
        session,
        after=top if after_event_id is None else after_event_id,
        top=top,
        wanted=wanted,
        now=now,
        app_url=app_url,
        values_of=values_of,
        limit=limit,
    )
    next_since, made_for_batches = _batch_events(session, since=batches_since or now, wanted=wanted, now=now)
    return CollectResult(last_event_id=last_event_id, batches_since=next_since, deliveries=made + made_for_batches)


def _request_events(
    session: Session,
    *,
    after: int,
    top: int,
    wanted: set[str],
    now: datetime,
    app_url: str,
    values_of: ValuesOf,
    limit: int,
) -> tuple[int, int]:
    """Deliveries of the ``request.*`` and ``party.*`` events after event ``after`` up to ``top``: (the event id to
    go on after, how many deliveries were made)."""
    made = 0
    rows = session.execute(
        select(
            Event.id,
            Event.type,
            Event.created_at,
            SigningRequest.id,
            SigningRequest.batch_id,
            SigningRequest.email,
            SigningRequest.name,
            SigningRequest.row_number,
            Batch.team_id,
            Event.details,
        )
        .join(SigningRequest, SigningRequest.id == Event.request_id)
        .join(Batch, Batch.id == SigningRequest.batch_id)
        .where(Event.id > after, Event.id <= top, Event.type.in_(list(EVENT_TYPES)))
        .order_by(Event.id)
        .limit(limit)
    ).all()
    # What the signers filled in goes with ``request.signed`` only: one query for the page's signed requests.
    signed_ids = [r[3] for r in rows if EVENT_TYPES[r[1]] == "request.signed"] if "request.signed" in wanted else []
    values = values_of(session, signed_ids)
    for _event_id, etype, at, request_id, batch_id, email, name, row_number, team_id, details in rows:
        if EVENT_TYPES[etype] in wanted:
            given = values.get(request_id, {}) if EVENT_TYPES[etype] == "request.signed" else None
            made += len(
                emit(
                    session,
                    event=EVENT_TYPES[etype],
                    now=now,
                    team_id=team_id,
                    request_id=request_id,
                    payload=RequestEvent(
                        request=RequestRef(
                            id=request_id, batch_id=batch_id, email=email, name=name, row_number=row_number
                        ),
                        occurred_at=at,
                        links=request_links(
                            app_url=app_url, request_id=request_id, signed=EVENT_TYPES[etype] == "request.signed"
                        ),
                        party=party_ref(etype, details),
                        fields=dict(given) if given is not None else None,
                    ).model_dump(mode="json"),
                ).delivery_ids
            )
    # A full page may have more behind it; otherwise everything up to ``top`` has been seen.
    return (rows[-1][0] if len(rows) == limit else top), made


def _batch_events(session: Session, *, since: datetime, wanted: set[str], now: datetime) -> tuple[datetime, int]:
    """Deliveries of the ``batch.*`` events of batches that got there after ``since``: (the time to go on after,
    how many deliveries were made)."""
    made = 0
    next_since = now
    for event, moment in BATCH_EVENTS.items():
        batches = session.scalars(
            select(Batch).where(moment > since, moment <= now).order_by(moment).limit(BATCH_PAGE)
        ).all()
        if len(batches) == BATCH_PAGE:
            # More may be behind this page: the next run starts after its last, for both events (re-reading a
            # few of the other event's batches is harmless: a delivery is made once per endpoint and event).
            next_since = min(next_since, getattr(batches[-1], moment.key))
        for batch in batches:
            status = BatchStatus(batch.status)
            if event not in wanted or event in BATCH_OUTCOMES and BATCH_OUTCOMES[event] != status:
                continue
            if event in BATCH_APPROVALS and batch.approval != BATCH_APPROVALS[event]:
                continue
            made += len(
                emit(
                    session,
                    event=event,
                    now=now,
                    team_id=batch.team_id,
                    payload=BatchEvent(
                        batch=BatchRef(
                            id=batch.id,
                            name=batch.name,
                            status=BATCH_STATE_NAMES[status],
                            total_count=batch.total_count,
                        ),
                        occurred_at=getattr(batch, moment.key),
                    ).model_dump(mode="json"),
                ).delivery_ids
            )
    return next_since, made


def _wanted_events(session: Session) -> set[str]:
    wanted: set[str] = set()
    for events in session.scalars(select(WebhookEndpoint.events).where(WebhookEndpoint.active.is_(True))):
        wanted.update(events or [])
    return wanted

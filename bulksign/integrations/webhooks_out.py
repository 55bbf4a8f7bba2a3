"""Outgoing webhooks: customer endpoints hear about request and batch events, signed with HMAC-SHA256.

Deliveries are rows first (``emit``), then POSTed by a job on the ``webhooks`` queue; a failed
POST is retried with exponential backoff (``next_attempt_at``) up to ``MAX_ATTEMPTS``. A periodic
job turns new ``events`` rows into deliveries, so no state change anywhere needs a webhook call.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import json
import logging
import secrets
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from pydantic import BaseModel, Field
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from bulksign.batches.field_values import stored_values
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.models import Batch, Event, SigningRequest, WebhookDelivery, WebhookEndpoint
from bulksign.models.status import BATCH_STATE_NAMES, BatchStatus

logger = logging.getLogger(__name__)

#: Event names endpoints may subscribe to.
EVENTS = (
    "request.sent",
    "request.opened",
    "request.signed",
    "request.declined",
    "request.bounced",
    "request.expired",
    "party.signed",
    "party.declined",
    "batch.completed",
    "batch.all_signed",
    "batch.closed",
    "batch.approved",
)
#: What each event means, for the API description and the admin's choice.
EVENT_MEANINGS = {
    "request.sent": "The recipient's mail server accepted the invitation.",
    "request.opened": "The recipient opened the signing page.",
    "request.signed": "The recipient signed (for a document several parties sign: its last party signed); the "
    "signed PDF follows within seconds. `data.fields` carries what the signers filled in.",
    "request.declined": "The recipient declined to sign.",
    "request.bounced": "An invitation bounced: the request is `bounced`, `party` naming whose invitation came back. "
    "Told again for each further party of a document several sign whose invitation comes back while it is bounced "
    "(each address to correct), not for the same party twice.",
    "request.expired": "The deadline passed unsigned.",
    "party.signed": "A party of a document several sign signed (`party.role`); `request.signed` follows the last.",
    "party.declined": "A party of a document several sign declined (`party.role`); the request is declined.",
    "batch.completed": "Sending ended: every invitation of the batch was dispatched (or failed). Recipients may "
    "still sign; `batch.all_signed` or `batch.closed` follows when nobody can any more.",
    "batch.all_signed": "Every recipient of the batch signed.",
    "batch.closed": "Nobody can sign the batch any more and some did not (expired, declined, failed, cancelled).",
    "batch.approved": "A batch that waited for approval (its team requires it) was approved; its documents are "
    "being prepared and sent now. A rejected one sends nothing and is `cancelled`.",
}
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
#: A further party's returned invitation on a request bounced already (``batches.bounces.BOUNCED_TOO``; a literal:
#: webhooks stay independent of what the bounce module imports).
BOUNCED_TOO = "email.bounced"
#: ``events.type`` → webhook event.
EVENT_TYPES = {
    **{f"status.{name.split('.')[1]}": name for name in EVENTS if name.startswith("request.")},
    **{name: name for name in EVENTS if name.startswith("party.")},
    # Another party's returned invitation on a request bounced already: news for whoever corrects addresses.
    BOUNCED_TOO: "request.bounced",
}
SIGNATURE_HEADER = "X-Bulksign-Signature"
MAX_ATTEMPTS = 8
BACKOFF_BASE = timedelta(seconds=30)
BACKOFF_MAX = timedelta(hours=6)
TIMEOUT_SECONDS = 10
#: Cloud metadata services outside the link-local ranges (169.254.169.254 and kin are refused as link-local),
#: address → cloud, refused whatever ``WEBHOOK_ALLOW_LOCAL`` says: the private-network rule would let them through.
METADATA_ADDRESSES = {
    ipaddress.ip_address("fd00:ec2::254"): "AWS (instance metadata over IPv6, inside the private fd00::/8)",
    ipaddress.ip_address("100.100.100.200"): "Alibaba Cloud (in the shared 100.64/10 range)",
}


class RequestRef(BaseModel):
    id: int
    batch_id: int
    email: str
    name: str | None
    row_number: int


class RequestEventLinks(BaseModel):
    """The API's URLs for the request (``Authorization: Bearer <key>`` as for any call)."""

    request: str = Field(description="`GET /api/v1/requests/{id}`: status, times, documents.")
    document: str = Field(description="The rendered original PDF.")
    signed: str | None = Field(
        description="On `request.signed`: the sealed signed PDF (409 with `Retry-After` for the few seconds until "
        "it is sealed); null on the other events."
    )
    certificate: str | None = Field(description="On `request.signed`: its audit certificate; null otherwise.")


def request_links(*, app_url: str, request_id: int, signed: bool) -> RequestEventLinks:
    """The links of a ``request.*`` payload: the API's routes of one request (``views.api.requests``)."""
    base = f"{app_url}/api/v1/requests/{request_id}"
    return RequestEventLinks(
        request=base,
        document=f"{base}/document",
        signed=f"{base}/signed" if signed else None,
        certificate=f"{base}/certificate" if signed else None,
    )


class PartyRef(BaseModel):
    role: str = Field(description="The party's role: `recipient`, or the `<role>` of its `signature_<role>` mark.")


def _party_ref(etype: str, details: dict | None) -> PartyRef | None:
    """The party an event is about: a ``party.*`` event's, or a bounce's (whose address the returned mail went to;
    none on bounces recorded before they named one)."""
    role = (details or {}).get("role")
    if etype.startswith("party."):
        return PartyRef(role=role or "")
    if etype in ("status.bounced", BOUNCED_TOO) and role:
        return PartyRef(role=role)
    return None


class RequestEvent(BaseModel):
    """``data`` of the ``request.*`` and ``party.*`` events."""

    request: RequestRef
    occurred_at: datetime
    links: RequestEventLinks
    party: PartyRef | None = Field(
        None,
        description="On `party.*`: which party; on `request.bounced`, the party whose invitation came back (another "
        "role's returned invitation bounces the request too, and each further party's whose comes back while it "
        "is bounced is told in a `request.bounced` of its own); null on the other `request.*`.",
    )
    fields: dict[str, str | None] | None = Field(
        None,
        description="On `request.signed`: what the signers filled in, by field name, as the request's `fields` in "
        "the API (a number `1234.5`, a date `2027-01-31`, a checkbox `true`/`false`, an attachment's file name: "
        "fetch the file from the request's `attachments`); null on the other events.",
    )


class BatchRef(BaseModel):
    id: int
    name: str
    status: str = Field(
        description="As the API's batch says it: `sending`, `awaiting_signatures`, `all_signed`, `closed`, `cancelled`."
    )
    total_count: int


class BatchEvent(BaseModel):
    """``data`` of the ``batch.*`` events."""

    batch: BatchRef
    occurred_at: datetime


class Delivery(BaseModel):
    """The JSON body of every delivery; ``X-Bulksign-Signature`` signs its exact bytes."""

    id: int = Field(description="The delivery's id (also in `X-Bulksign-Delivery`); the same on every retry.")
    event: str = Field(description="The event (also in `X-Bulksign-Event`).")
    created_at: datetime
    data: RequestEvent | BatchEvent


class WebhookError(ValueError):
    """Input a person can correct; the message says how."""


class ForbiddenAddress(OSError):
    """The endpoint's name resolved to an address deliveries must not reach."""


def forbidden_reason(address: str, *, allow_local: bool) -> str | None:
    """Why a POST must not go to ``address`` (an IP), or None.

    Link-local addresses (cloud metadata services at 169.254.169.254) and the other known metadata services
    (``METADATA_ADDRESSES``) are never reached; this host's own addresses (loopback, unspecified) only with
    ``WEBHOOK_ALLOW_LOCAL``: an admin's typo, a redirect or a DNS answer must not turn a webhook into a
    request to internal services of the host.
    Private networks (10/8, 192.168/16 ...) are allowed: in-house systems are a normal destination.
    """
    ip = ipaddress.ip_address(address.split("%")[0])
    if getattr(ip, "ipv4_mapped", None):
        ip = ip.ipv4_mapped
    if ip in METADATA_ADDRESSES:
        return f"{ip} is a cloud metadata service: {METADATA_ADDRESSES[ip]}"
    if ip.is_link_local or ip.is_multicast or ip.is_reserved:
        return f"{ip} is a link-local or reserved address"
    if (ip.is_loopback or ip.is_unspecified) and not allow_local:
        return f"{ip} is this host (set WEBHOOK_ALLOW_LOCAL=true to allow it)"
    return None


def _guarded(connection_class: type[http.client.HTTPConnection], allow_local: bool):
    class Guarded(connection_class):
        # Checked on the connected socket, after DNS and for every redirect hop: no rebinding in between.
        def connect(self):
            super().connect()
            reason = forbidden_reason(self.sock.getpeername()[0], allow_local=allow_local)
            if reason:
                self.close()
                raise ForbiddenAddress(f"refused to deliver to {self.host}: {reason}")

    return Guarded


def _opener(*, allow_local: bool) -> urllib.request.OpenerDirector:
    http_class, https_class = (
        _guarded(c, allow_local) for c in (http.client.HTTPConnection, http.client.HTTPSConnection)
    )

    class GuardedHTTP(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(http_class, req)

    class GuardedHTTPS(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(https_class, req, context=self._context)

    return urllib.request.build_opener(GuardedHTTP, GuardedHTTPS)


def sign(secret: str, body: bytes) -> str:
    """The signature header value: ``sha256=<hex HMAC of the raw body>``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


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


@dataclass(frozen=True)
class EmitResult:
    delivery_ids: tuple[int, ...]


def emit(session: Session, *, event: str, payload: dict, team_id: int | None, now: datetime) -> EmitResult:
    """Record one delivery per active endpoint that wants ``event`` of team ``team_id`` (the caller commits).

    An endpoint of a team hears only that team's events; one without a team hears every team's.
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
            endpoint_id=e.id, event=event, payload=payload, status="pending", created_at=now, next_attempt_at=now
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
    limit: int = 5000,
) -> CollectResult:
    """Turn events after ``after_event_id`` and batches finished since ``batches_since`` into deliveries
    (``app_url``: where the payloads' links point).

    With no cursor yet, start from now: an endpoint hears about what happens after it exists.
    """
    top = session.scalar(select(func.coalesce(func.max(Event.id), 0)))
    if after_event_id is None:
        after_event_id = top
    batches_since = batches_since or now
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
        .where(Event.id > after_event_id, Event.id <= top, Event.type.in_(list(EVENT_TYPES)))
        .order_by(Event.id)
        .limit(limit)
    ).all()
    wanted = _wanted_events(session)
    # What the signers filled in goes with ``request.signed`` only: one query for the page's signed requests.
    signed_ids = [r[3] for r in rows if EVENT_TYPES[r[1]] == "request.signed"] if "request.signed" in wanted else []
    values = stored_values(session, request_ids=signed_ids)
    for _event_id, etype, at, request_id, batch_id, email, name, row_number, team_id, details in rows:
        if EVENT_TYPES[etype] in wanted:
            given = values.get(request_id, {}) if EVENT_TYPES[etype] == "request.signed" else None
            made += len(
                emit(
                    session,
                    event=EVENT_TYPES[etype],
                    now=now,
                    team_id=team_id,
                    payload=RequestEvent(
                        request=RequestRef(
                            id=request_id, batch_id=batch_id, email=email, name=name, row_number=row_number
                        ),
                        occurred_at=at,
                        links=request_links(
                            app_url=app_url, request_id=request_id, signed=EVENT_TYPES[etype] == "request.signed"
                        ),
                        party=_party_ref(etype, details),
                        fields={n: v.value for n, v in given.items()} if given is not None else None,
                    ).model_dump(mode="json"),
                ).delivery_ids
            )
    # A full page may have more behind it; otherwise everything up to ``top`` has been seen.
    last_event_id = rows[-1][0] if len(rows) == limit else top
    next_since = now
    for event, moment in BATCH_EVENTS.items():
        batches = session.scalars(
            select(Batch).where(moment > batches_since, moment <= now).order_by(moment).limit(BATCH_PAGE)
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
    return CollectResult(last_event_id=last_event_id, batches_since=next_since, deliveries=made)


def _wanted_events(session: Session) -> set[str]:
    wanted: set[str] = set()
    for events in session.scalars(select(WebhookEndpoint.events).where(WebhookEndpoint.active.is_(True))):
        wanted.update(events or [])
    return wanted


def due_deliveries(session: Session, *, now: datetime, limit: int = 1000) -> list[tuple[int, int]]:
    """(delivery id, attempts) of pending deliveries whose time has come."""
    return [
        tuple(r)
        for r in session.execute(
            select(WebhookDelivery.id, WebhookDelivery.attempts)
            .where(WebhookDelivery.status == "pending", WebhookDelivery.next_attempt_at <= now)
            .order_by(WebhookDelivery.next_attempt_at)
            .limit(limit)
        )
    ]


def backoff(attempts: int) -> timedelta:
    """Wait before try ``attempts + 1``: 30 s, 1 min, 2 min, ... at most 6 h."""
    return min(BACKOFF_BASE * (2 ** max(0, attempts - 1)), BACKOFF_MAX)


@dataclass(frozen=True)
class DeliveryResult:
    delivery_id: int
    status: str
    response_code: int | None = None
    error: str | None = None


def deliver(
    session: Session, *, delivery_id: int, now: datetime, timeout: float = TIMEOUT_SECONDS, allow_local: bool = False
) -> DeliveryResult:
    """POST one pending delivery; record the outcome and, after a failure, when to try again (the caller commits)."""
    delivery = session.get(WebhookDelivery, delivery_id)
    if delivery is None or delivery.status != "pending":
        return DeliveryResult(delivery_id=delivery_id, status=delivery.status if delivery else "missing")
    if delivery.next_attempt_at is not None and delivery.next_attempt_at > now:
        return DeliveryResult(delivery_id=delivery_id, status="waiting")  # a duplicate job before the backoff ended
    endpoint = session.get(WebhookEndpoint, delivery.endpoint_id)
    # The stored payload as it was recorded (not re-validated): a retry sends the same bytes as the first try.
    body = json.dumps(
        {
            "id": delivery.id,
            "event": delivery.event,
            "created_at": delivery.created_at.isoformat(),
            "data": delivery.payload,
        },
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()
    request = urllib.request.Request(
        endpoint.url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "Bulksign-Webhooks/1",
            SIGNATURE_HEADER: sign(endpoint.secret, body),
            "X-Bulksign-Event": delivery.event,
            "X-Bulksign-Delivery": str(delivery.id),
        },
    )
    delivery.attempts += 1
    code, error = None, None
    try:
        with _opener(allow_local=allow_local).open(request, timeout=timeout) as response:
            code = response.status
    except urllib.error.HTTPError as exc:
        code, error = exc.code, f"The endpoint answered HTTP {exc.code}."
    except ForbiddenAddress as exc:
        error = f"Not delivered: {exc}."
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ForbiddenAddress):
            error = f"Not delivered: {exc.reason}."
        else:
            error = f"Could not reach the endpoint: {exc.reason}."
    except OSError as exc:
        error = f"Could not reach the endpoint: {exc}."
    delivery.response_code = code
    if error is None and code is not None and 200 <= code < 300:
        delivery.status, delivery.delivered_at, delivery.error, delivery.next_attempt_at = "delivered", now, None, None
        log(logger, logging.INFO, "webhook delivered", delivery_id=delivery.id, endpoint_id=endpoint.id, code=code)
    else:
        delivery.error = error or f"The endpoint answered HTTP {code}."
        if delivery.attempts >= MAX_ATTEMPTS:
            delivery.status, delivery.next_attempt_at = "failed", None
        else:
            delivery.next_attempt_at = now + backoff(delivery.attempts)
        log(
            logger,
            logging.WARNING,
            "webhook delivery failed",
            delivery_id=delivery.id,
            endpoint_id=endpoint.id,
            attempts=delivery.attempts,
            error=delivery.error,
        )
    return DeliveryResult(delivery_id=delivery.id, status=delivery.status, response_code=code, error=delivery.error)

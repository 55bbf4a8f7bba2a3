"""Outgoing webhook deliveries: each is POSTed, signed with HMAC-SHA256, to an address checked on the connected
socket; a failed POST is retried with exponential backoff (``next_attempt_at``) up to ``MAX_ATTEMPTS``."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.core.logs import log
from bulksign.models import WebhookDelivery, WebhookEndpoint

logger = logging.getLogger(__name__)


class DeliveryStatus(StrEnum):
    """Where a delivery is (``WebhookDelivery.status``)."""

    #: Waiting for its (next) try at ``next_attempt_at``.
    PENDING = "pending"
    DELIVERED = "delivered"
    #: Given up after ``MAX_ATTEMPTS``.
    FAILED = "failed"


class NotTried(StrEnum):
    """Why ``deliver`` did not POST."""

    #: No such delivery (purged with its request).
    MISSING = "missing"
    #: A duplicate job before the backoff ended.
    WAITING = "waiting"


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


class ForbiddenAddress(OSError):
    """The endpoint's name resolved to an address deliveries must not reach."""


def forbidden_reason(address: str, *, allow_local: bool) -> str | None:
    """Why a POST must not go to ``address`` (an IP), or None: link-local and cloud metadata addresses never, this
    host's own only with ``allow_local``; private networks are allowed (docs/architecture/views.md)."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    if ip in METADATA_ADDRESSES:
        return f"{ip} is a cloud metadata service: {METADATA_ADDRESSES[ip]}"
    if ip.is_link_local or ip.is_multicast or ip.is_reserved:
        return f"{ip} is a link-local or reserved address"
    if (ip.is_loopback or ip.is_unspecified) and not allow_local:
        return f"{ip} is this host (set WEBHOOK_ALLOW_LOCAL=true to allow it)"
    return None


def _guarded(connection_class: type[http.client.HTTPConnection], allow_local: bool) -> type[http.client.HTTPConnection]:
    class Guarded(connection_class):  # type: ignore[valid-type, misc]  # a subclass of the class given
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
            return self.do_open(https_class, req, context=self._context)  # type: ignore[attr-defined]

    return urllib.request.build_opener(GuardedHTTP, GuardedHTTPS)


def sign(secret: str, body: bytes) -> str:
    """The signature header value: ``sha256=<hex HMAC of the raw body>``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def due_deliveries(session: Session, *, now: datetime, limit: int = 1000) -> list[tuple[int, int]]:
    """(delivery id, attempts) of pending deliveries whose time has come."""
    return [
        tuple(r)
        for r in session.execute(
            select(WebhookDelivery.id, WebhookDelivery.attempts)
            .where(WebhookDelivery.status == DeliveryStatus.PENDING, WebhookDelivery.next_attempt_at <= now)
            .order_by(WebhookDelivery.next_attempt_at)
            .limit(limit)
        )
    ]


def recent_deliveries(
    session: Session, *, status: DeliveryStatus | None = None, limit: int = 200
) -> Sequence[WebhookDelivery]:
    """The newest deliveries, of ``status`` when given, newest first."""
    query = select(WebhookDelivery).order_by(WebhookDelivery.id.desc()).limit(limit)
    if status is not None:
        query = query.where(WebhookDelivery.status == status)
    return session.scalars(query).all()


def backoff(attempts: int) -> timedelta:
    """Wait before try ``attempts + 1``: 30 s, 1 min, 2 min, ... at most 6 h."""
    return min(BACKOFF_BASE * (2 ** max(0, attempts - 1)), BACKOFF_MAX)


@dataclass(frozen=True)
class DeliveryResult:
    delivery_id: int
    status: DeliveryStatus | NotTried
    response_code: int | None = None
    error: str | None = None


def deliver(
    session: Session, *, delivery_id: int, now: datetime, timeout: float = TIMEOUT_SECONDS, allow_local: bool = False
) -> DeliveryResult:
    """POST one pending delivery; record the outcome and, after a failure, when to try again (the caller commits)."""
    delivery = session.get(WebhookDelivery, delivery_id)
    if delivery is None:
        return DeliveryResult(delivery_id=delivery_id, status=NotTried.MISSING)
    if delivery.status != DeliveryStatus.PENDING:
        return DeliveryResult(delivery_id=delivery_id, status=DeliveryStatus(delivery.status))
    if delivery.next_attempt_at is not None and delivery.next_attempt_at > now:
        return DeliveryResult(delivery_id=delivery_id, status=NotTried.WAITING)
    endpoint = session.get_one(WebhookEndpoint, delivery.endpoint_id)
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
        delivery.status, delivery.delivered_at = DeliveryStatus.DELIVERED, now
        delivery.error, delivery.next_attempt_at = None, None
        log(logger, logging.INFO, "webhook delivered", delivery_id=delivery.id, endpoint_id=endpoint.id, code=code)
    else:
        delivery.error = error or f"The endpoint answered HTTP {code}."
        if delivery.attempts >= MAX_ATTEMPTS:
            delivery.status, delivery.next_attempt_at = DeliveryStatus.FAILED, None
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
    return DeliveryResult(
        delivery_id=delivery.id, status=DeliveryStatus(delivery.status), response_code=code, error=delivery.error
    )

"""Tables of what other systems talk to: webhook endpoints and their deliveries, API idempotency keys."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bulksign.core.extensions import db
from bulksign.models.base import BigId, Model, UTCDateTime, utcnow


class WebhookEndpoint(Model):
    __tablename__ = "webhook_endpoints"

    id: Mapped[int] = mapped_column(primary_key=True)
    url: Mapped[str] = mapped_column(db.String(1000))
    #: HMAC-SHA256 key for the signature header.
    secret: Mapped[str] = mapped_column(db.String(100))
    #: Event names this endpoint wants, e.g. ["request.signed", "batch.completed"].
    events: Mapped[list] = mapped_column(JSON, default=list)
    active: Mapped[bool] = mapped_column(default=True)
    #: The team whose events it hears; None: every team's (an organisation-wide endpoint).
    team_id: Mapped[int | None] = mapped_column(db.ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    created_by_id: Mapped[int | None] = mapped_column(db.ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WebhookDelivery(Model):
    __tablename__ = "webhook_deliveries"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    endpoint_id: Mapped[int] = mapped_column(db.ForeignKey("webhook_endpoints.id", ondelete="CASCADE"), index=True)
    event: Mapped[str] = mapped_column(db.String(50))
    #: The request a ``request.*`` or ``party.*`` delivery tells of (no key: the request's rows may go, the
    #: delivery's record stays); its purge empties the payload, or re-builds a pending one without the person.
    request_id: Mapped[int | None] = mapped_column(BigId, index=True)
    #: The body's ``data``; ``{}`` once its request was purged after delivery.
    payload: Mapped[dict] = mapped_column(JSON, default=dict)
    #: ``pending`` → ``delivered`` | ``failed``.
    status: Mapped[str] = mapped_column(db.String(20), default="pending")
    attempts: Mapped[int] = mapped_column(default=0)
    response_code: Mapped[int | None] = mapped_column()
    error: Mapped[str | None] = mapped_column(db.Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: When a pending delivery is next tried (exponential backoff after a failure).
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime, index=True)


class IdempotencyKey(Model):
    """An API call made with ``Idempotency-Key``: a repeat gets the stored answer instead of doing it again."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("api_key_id", "key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    #: Keys are per API key: two integrations may pick the same key without meeting.
    api_key_id: Mapped[int] = mapped_column(db.ForeignKey("api_keys.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(db.String(200))
    #: sha256 of method, path and body: the same key with another request is refused, not replayed.
    fingerprint: Mapped[str] = mapped_column(db.String(64))
    #: None while the first call is still running (a repeat then gets 409).
    status_code: Mapped[int | None] = mapped_column()
    response_body: Mapped[dict | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    #: After this the row is deleted (periodic job) and the key may be used afresh.
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)

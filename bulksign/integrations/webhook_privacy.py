"""Outgoing webhook deliveries of purged requests keep nothing of the person: done ones are emptied, pending ones
re-built without them, in the purge's transaction (docs/architecture/views.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import CursorResult, select, update
from sqlalchemy.orm import Session

from bulksign.core.slicing import slices
from bulksign.integrations.webhook_delivery import DeliveryStatus
from bulksign.integrations.webhook_events import RequestEvent, RequestRef
from bulksign.integrations.webhooks_out import ValuesOf
from bulksign.models import SigningRequest, WebhookDelivery


@dataclass(frozen=True)
class ForgottenDeliveries:
    #: Deliveries done whose payload was emptied.
    emptied: int = 0
    #: Pending deliveries re-built without the person.
    rebuilt: int = 0


def forget_requests(session: Session, *, request_ids: list[int], values_of: ValuesOf) -> ForgottenDeliveries:
    """Empty the payloads of these (purged) requests' done deliveries and re-build their pending ones from the
    rows as the purge left them (``values_of``: their filled values, as ``webhooks_out.collect`` reads them). The
    caller commits."""
    emptied = rebuilt = 0
    for chunk in slices(sorted(set(request_ids))):
        emptied += cast(
            CursorResult[Any],
            session.execute(
                update(WebhookDelivery)
                .where(WebhookDelivery.request_id.in_(chunk), WebhookDelivery.status != DeliveryStatus.PENDING)
                .values(payload={})
            ),
        ).rowcount
        pending = session.scalars(
            select(WebhookDelivery).where(
                WebhookDelivery.request_id.in_(chunk), WebhookDelivery.status == DeliveryStatus.PENDING
            )
        ).all()
        if not pending:
            continue
        rows = {
            r.id: r
            for r in session.execute(
                select(
                    SigningRequest.id,
                    SigningRequest.batch_id,
                    SigningRequest.email,
                    SigningRequest.name,
                    SigningRequest.row_number,
                ).where(SigningRequest.id.in_({d.request_id for d in pending}))
            )
        }
        values = values_of(session, list(rows))
        for delivery in pending:
            row = rows[delivery.request_id]
            told = RequestEvent.model_validate(delivery.payload)
            told.request = RequestRef(
                id=row.id, batch_id=row.batch_id, email=row.email, name=row.name or None, row_number=row.row_number
            )
            if told.fields is not None:
                told.fields = dict(values.get(row.id, {}))
            delivery.payload = told.model_dump(mode="json")
            rebuilt += 1
    session.flush()
    return ForgottenDeliveries(emptied=emptied, rebuilt=rebuilt)

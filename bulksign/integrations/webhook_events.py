"""What webhook endpoints hear: the events, what each means, and the payload of each (its JSON schema is the API's
description of the webhooks)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

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


def party_ref(etype: str, details: dict | None) -> PartyRef | None:
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

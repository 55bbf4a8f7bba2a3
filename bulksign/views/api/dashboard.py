"""JSON API for following batches: list, one batch with counts, its requests (keyset pages), CSV export."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal, cast

from flask import Blueprint, g
from pydantic import BaseModel, Field

from bulksign.batches import dashboard, field_values, recipients_table, texting
from bulksign.batches.field_values import GivenValue
from bulksign.batches.recipients_table import DashboardError, RecipientFilter
from bulksign.batches.retention.periods import Policy, policies
from bulksign.core import keyset
from bulksign.core.extensions import db
from bulksign.core.schemas import NO_NUL
from bulksign.models import Batch, SigningRequest
from bulksign.models.status import BATCH_DISPATCHED, BATCH_STATE_NAMES, BatchStatus, Status
from bulksign.views._downloads import csv_response
from bulksign.views.api.common import ApiError, NextCursor, PageQuery, absolute_url, answer, operation, parse_query

bp = Blueprint("api_dashboard", __name__, url_prefix="/api/v1")

# Literals of computed values: mypy sees the plain type, pydantic (and the API's description) the values.
if TYPE_CHECKING:
    BatchStateName = str
    RecipientFilterName = str
    RecipientSort = str
else:
    BatchStateName = Literal[tuple(dict.fromkeys(BATCH_STATE_NAMES.values()))]
    RecipientFilterName = Literal[recipients_table.FILTERS]
    RecipientSort = Literal[tuple(recipients_table.SORTS)]
#: What an approval may be at (``Batch.approval``).
ApprovalState = Literal["waiting", "approved", "rejected"]


class ApprovalOut(BaseModel):
    """Approval before sending, for a batch whose team required it when it was created."""

    state: ApprovalState = Field(
        description="`waiting` (nothing is sent until a manager of its team or an admin other than its creator "
        "approves it), `approved` (then it is sent as any batch) or `rejected` (it is `cancelled`; nothing was sent)."
    )
    by: str | None = Field(description="The e-mail address of who approved or rejected it.")
    at: datetime | None = Field(description="When it was approved or rejected.")
    reason: str | None = Field(description="Why it was rejected (its creator was mailed this).")


def approval_out(b: Batch) -> ApprovalOut | None:
    """The batch's ``approval`` object; None for a batch that needed none."""
    if b.approval is None:
        return None
    return ApprovalOut(
        state=cast(ApprovalState, b.approval),
        by=b.approval_by.email if b.approval_by is not None else None,
        at=b.approval_at,
        reason=b.rejection_reason,
    )


class RetentionOut(BaseModel):
    """How long the batch keeps what it holds (its own periods over its team's), and its legal hold."""

    keep_signed_days: int | None = Field(description="Days a signed document is kept after signing; null: for ever.")
    keep_unsigned_days: int = Field(description="Days an unsigned request is kept after it ended.")
    legal_hold_since: datetime | None = Field(
        description="When an admin put the batch on legal hold (nothing of it is purged or erased until lifted); "
        "null: no hold."
    )
    legal_hold_reason: str | None = Field(description="Why it is held.")


def retention_out(policy: Policy) -> RetentionOut:
    return RetentionOut(
        keep_signed_days=policy.keep_signed_days,
        keep_unsigned_days=policy.keep_unsigned_days,
        legal_hold_since=policy.held_at,
        legal_hold_reason=policy.hold_reason,
    )


class BatchOut(BaseModel):
    id: int
    name: str
    status: BatchStateName = Field(
        description="What the batch is at: `awaiting_approval` (its team requires approval: nothing is sent "
        "yet, see `approval`), `sending` (documents being prepared and invitations sent), "
        "`awaiting_signatures` (every invitation dispatched; some recipients can still sign), `all_signed`, "
        "`closed` (nobody can sign any more and `unsigned` did not: expired, declined, failed, cancelled) or "
        "`cancelled` (stopped by staff). Until December 2026 this said `processing`, `completed` (meaning only "
        "that every invitation had been dispatched) or `partially_failed`."
    )
    total_count: int = Field(description="Requests in the batch.")
    unsigned: int = Field(description="Requests not signed (yet): on a `closed` batch, those that never will be.")
    counts: dict[str, int] = Field(description="Requests per status (every status, zeros included).")
    skipped_rows: int = Field(
        description="Rows of the recipients file left out at creation for their errors (not requests)."
    )
    created_at: datetime
    sending_ended_at: datetime | None = Field(description="When the last invitation was dispatched.")
    settled_at: datetime | None = Field(description="When it became `all_signed` or `closed`.")
    deadline_at: datetime | None = Field(
        description="Its fixed deadline, else when its last link expires (each request's deadline is "
        "`deadline_days` after its invitation); null until sending ends."
    )
    deadline_days: int = Field(description="Days each recipient has to sign after the invitation.")
    template: str | None = Field(description="The template's name.")
    created_by: str | None = Field(description="The owner's e-mail address.")
    team_id: int | None
    notify_email: str | None = Field(description="Who gets the batch's notices; null: its owner.")
    one_time_code: bool = Field(description="Recipients confirm a one-time code (SMS or mail) before signing.")
    approval: ApprovalOut | None = Field(description="Approval before sending; null when its team required none.")
    channel: str = Field(
        "mail", description="`mail`, `text_without_address`, `text_on_bounce` or `text_both` (see `POST /batches`)."
    )
    text_cap: int | None = Field(None, description="At most this many text messages; null for a batch that mails.")
    texts_sent: int = Field(0, description="Text messages handed to the provider so far.")
    text_cap_reached_at: datetime | None = Field(
        None, description="When the cap first stopped a text (its request failed with the reason); null: never."
    )
    retention: RetentionOut


class BatchPage(NextCursor):
    items: list[BatchOut]


class AttachmentOut(BaseModel):
    """A file a signer attached to an `attachment` field (PDF, JPEG or PNG, checked by its content)."""

    field: str = Field(description="The field's name: `id_scan` for the mark `{{ field_id_scan }}`.")
    filename: str | None = Field(description="The name the signer's file had; null once purged.")
    content_type: str | None = Field(description="`application/pdf`, `image/jpeg` or `image/png`; null once purged.")
    size: int | None = Field(description="Bytes.")
    sha256: str | None = Field(
        description="Of the file's bytes, as the audit certificate prints it (kept after a purge)."
    )
    role: str = Field(description="The role of the party that attached it (`recipient` or another party's role).")
    entered_at: datetime
    url: str | None = Field(
        description="`GET` it with the key (`Content-Disposition: attachment`, its type); null once purged."
    )


class SigningRequestOut(BaseModel):
    """One recipient's request. Never its signing link: that is the recipient's secret."""

    id: int
    row_number: int = Field(description="The row of the recipients file.")
    email: str | None = Field(description="The recipient's address; null once purged.")
    name: str | None
    status: str = Field(
        description="`pending`, `generating`, `generated`, `sending`, `sent`, `opened`, `signed`, "
        "`declined`, `expired`, `failed`, `bounced`, `cancelled`."
    )
    status_changed_at: datetime | None
    sent_at: datetime | None
    opened_at: datetime | None
    signed_at: datetime | None
    declined_at: datetime | None
    decline_reason: str | None
    reminder_count: int
    expires_at: datetime | None
    complained_at: datetime | None
    error: str | None = Field(description="Why it failed or bounced.")
    purged_at: datetime | None = Field(
        None,
        description="When its documents and personal data were purged (the team's retention, or an erasure): "
        "`email`, `name`, `decline_reason` and `error` are null from then on; the times and the status stay.",
    )
    fields: dict[str, str | None] = Field(
        default_factory=dict,
        description="What the signers filled in, by field name (`{{ field_<name> }}`), as the template's field "
        "settings check it: text as typed, a number `1234.5`, a date `2027-01-31`, a checkbox `true` or `false`, "
        "the option chosen, an attachment's file name; null for an optional field left empty, and every value once "
        "purged. Empty until a party that fills fields signs.",
    )
    attachments: list[AttachmentOut] = Field(
        default_factory=list, description="The files the signers attached, with their links."
    )
    phone: str | None = Field(None, description="The row's phone (E.164 in a batch that texts); null once purged.")
    channel: str = Field(
        "mail",
        description="How the link reached the recipient: `mail`, or `text` (a row without an address, or a bounced "
        "mail's link sent by text); `mail` again when a failed text's link was mailed instead.",
    )
    text_state: str | None = Field(
        None, description="The newest text's state: `queued`, `sent`, `delivered`, `failed`, `cancelled`; null: none."
    )
    text_reason: str | None = Field(
        None, description="Why it went by text: `no_address`, or `mail_bounced`; null: no text."
    )


class RequestPage(NextCursor):
    items: list[SigningRequestOut]


class BatchListQuery(PageQuery):
    q: str = Field("", max_length=200, pattern=NO_NUL, description="Part of the batch name.")


class RecipientFilterQuery(BaseModel):
    status: RecipientFilterName | None = Field(
        None, description="A status, or `not_opened`, `waiting` (still in the pipeline), `problems`."
    )
    q: str = Field("", max_length=200, pattern=NO_NUL, description="Part of the e-mail address or name.")
    sort: RecipientSort = "row"
    dir: Literal["asc", "desc"] = "asc"
    waiting_for: str = Field(
        "",
        pattern=f"^({recipients_table.ROLE_PATTERN.pattern})?$",
        description="A role (`recipient`, or the `<role>` of a `{{ signature_<role> }}` mark): only the requests "
        "still open whose party of that role has not signed yet (see `parties` on a request).",
    )

    def to_filter(self) -> RecipientFilter:
        return RecipientFilter.parse(
            status=self.status, q=self.q, sort=self.sort, direction=self.dir, waiting_for=self.waiting_for
        )


class RequestListQuery(RecipientFilterQuery, PageQuery):
    pass


def _batch_out(view: dashboard.BatchView | dashboard.BatchRow, policy: Policy) -> BatchOut:
    b = view.batch
    return BatchOut(
        id=b.id,
        name=b.name,
        status=BATCH_STATE_NAMES[BatchStatus(b.status)],
        total_count=b.total_count,
        unsigned=view.counts.total - view.counts.by_status[Status.SIGNED],
        counts=view.counts.by_status,
        skipped_rows=b.skipped_count,
        created_at=b.created_at,
        sending_ended_at=b.finished_at if b.status in BATCH_DISPATCHED else None,
        settled_at=b.settled_at,
        deadline_at=b.deadline_at or b.last_expires_at,
        deadline_days=b.deadline_days,
        template=view.template_name,
        created_by=view.started_by,
        team_id=b.team_id,
        notify_email=b.notify_email,
        one_time_code=b.one_time_code,
        approval=approval_out(b),
        channel=b.channel,
        text_cap=b.text_cap if b.channel != "mail" else None,
        texts_sent=b.texts_sent,
        text_cap_reached_at=b.text_cap_reached_at,
        retention=retention_out(policy),
    )


def _attachment_out(request_id: int, v: GivenValue) -> AttachmentOut:
    return AttachmentOut(
        field=v.name,
        filename=v.value,
        content_type=v.content_type,
        size=v.size,
        sha256=v.sha256,
        role=v.role,
        entered_at=v.entered_at,
        url=absolute_url("api_requests.attachment_download", request_id=request_id, name=v.name) if v.stored else None,
    )


def _request_out(
    r: SigningRequest, given: tuple[GivenValue, ...] = (), texted: texting.TextState | None = None
) -> SigningRequestOut:
    """The request as the API gives it, with what its signers filled in (``field_values.given_values``) and how its
    link went (``texting.text_states``)."""
    kept = r.purged_at is None
    channel, text_state, text_reason = texting.channel_cells(texted)
    assert r.row_number is not None  # every request is a row of its file
    return SigningRequestOut(
        id=r.id,
        row_number=r.row_number,
        email=r.email if kept else None,
        name=r.name if kept else None,
        status=r.status,
        status_changed_at=r.status_changed_at,
        sent_at=r.sent_at,
        opened_at=r.opened_at,
        signed_at=r.signed_at,
        declined_at=r.declined_at,
        decline_reason=r.decline_reason,
        reminder_count=r.reminder_count,
        expires_at=r.expires_at,
        complained_at=r.complained_at,
        error=r.error_message,
        purged_at=r.purged_at,
        fields={v.name: v.value for v in given},
        attachments=[_attachment_out(r.id, v) for v in given if v.is_attachment],
        phone=r.phone if kept else None,
        channel=channel,
        text_state=text_state,
        text_reason=text_reason,
    )


def _batch_view(batch_id: int) -> dashboard.BatchView:
    view = dashboard.batch_view(db.session, batch_id=batch_id)
    if view is None:
        raise ApiError("No batch with this id.", 404)
    return view


@bp.get("/batches")
@operation("List batches", tag="Batches", query=BatchListQuery, responses={200: BatchPage}, errors=(400,))
def list_batches():
    """The batches the key's user may see, newest first."""
    query = parse_query(BatchListQuery)
    try:
        after = keyset.decode(query.cursor, datetime, int) if query.cursor else None
    except keyset.CursorError as exc:
        raise ApiError(str(exc), 422, code="invalid_cursor") from None
    listing = dashboard.list_batches(db.session, user=g.api_user, q=query.q, per_page=query.limit, after=after)
    last = listing.rows[-1].batch if listing.rows and listing.has_next else None
    kept = policies(db.session, [row.batch.id for row in listing.rows])
    return answer(
        BatchPage(
            items=[_batch_out(row, kept[row.batch.id]) for row in listing.rows],
            next_cursor=keyset.encode(last.created_at, last.id) if last else None,
        )
    )


@bp.get("/batches/<int:batch_id>")
@operation("One batch with its counts per status", tag="Batches", responses={200: BatchOut}, errors=(404,))
def get_batch(batch_id: int):
    """Poll this to follow a batch's progress: `counts` move as the workers render, send and recipients sign."""
    return answer(_batch_out(_batch_view(batch_id), policies(db.session, [batch_id])[batch_id]))


@bp.get("/batches/<int:batch_id>/requests")
@operation(
    "List a batch's requests", tag="Batches", query=RequestListQuery, responses={200: RequestPage}, errors=(400, 404)
)
def list_requests(batch_id: int):
    """One page of the batch's requests, filtered and sorted like the staff dashboard; `waiting_for=<role>` lists
    those still waiting for that party's signature."""
    query = parse_query(RequestListQuery)
    _batch_view(batch_id)
    try:
        page = recipients_table.recipients_page(
            db.session, batch_id=batch_id, flt=query.to_filter(), cursor=query.cursor, limit=query.limit
        )
    except DashboardError as exc:
        raise ApiError(str(exc), 422, code="invalid_cursor") from None
    ids = [r.id for r in page.items]
    given = field_values.given_values(db.session, batch_id=batch_id, request_ids=ids)
    texts = texting.text_states(db.session, request_ids=ids)
    return answer(
        RequestPage(
            items=[_request_out(r, given.get(r.id, ()), texts.get(r.id)) for r in page.items],
            next_cursor=page.next_cursor,
        )
    )


@bp.get("/batches/<int:batch_id>/export.csv")
@operation(
    "Download the batch's requests as CSV",
    tag="Batches",
    query=RecipientFilterQuery,
    responses={200: "text/csv"},
    errors=(400, 404),
)
def export_csv(batch_id: int):
    """UTF-8 with a BOM (Excel opens it as is); cells that a spreadsheet would run as formulas are quoted.

    The recipients file's own columns (`contract_number`, `position` …) follow the usual ones (a name the CSV uses
    itself gets `file_` before it). A batch whose template names parties besides the recipient
    (`{{ signature_<role> }}`) then adds, for each role, `recipient` first, then the others by name, `<role>_email`,
    `<role>_status`, `<role>_invited_at`, `<role>_opened_at`, `<role>_signed_at` and `<role>_declined_at`:
    `status` is the request's (`signed` once every party signed), `<role>_status` the party's (`waiting`,
    `invited`, `opened`, `signed`, `declined`)."""
    query = parse_query(RecipientFilterQuery)
    _batch_view(batch_id)
    return csv_response(batch_id, query.to_filter())

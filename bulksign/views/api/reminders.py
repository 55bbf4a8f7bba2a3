"""JSON API for staff actions after dispatch: remind now, resend with a new link, correct an address."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, cast

from flask import Blueprint, g
from pydantic import BaseModel, ConfigDict, Field, RootModel

from bulksign.batches.address_changes import MAX_NOTE, change_email
from bulksign.batches.bulk_actions import run_staff_action
from bulksign.batches.countersign_digests import send_digests_now
from bulksign.batches.progress import BatchActionError
from bulksign.batches.resend import MAX_EXTEND_DAYS, resend_with_new_link
from bulksign.core.extensions import db
from bulksign.models import RECIPIENT_ROLE, SigningRequest, utcnow
from bulksign.views.api.approval import AddressChangeOut, change_out
from bulksign.views.api.common import ApiError, RequestId, answer, operation, parse_body
from bulksign.work.pipeline import enqueue_sends

bp = Blueprint("api_reminders", __name__, url_prefix="/api/v1")

#: One call reminds at most this many listed requests; ``all_unsigned`` has no limit.
MAX_IDS = 100_000
#: Why a resend gave no new link, where its reason needs more than the reason's name.
RESEND_REFUSED = {
    None: "This request cannot get a new link now.",
    "address_change_pending": "A change of this address waits for approval: approving it sends the new link to the "
    "new address (see /batches/{batch_id}/address-changes).",
}


#: A party's role, as the template's ``roles`` name it.
RoleName = Field(
    None,
    max_length=40,
    pattern=r"^[a-z0-9_]+$",
    description="The party to act for, one of the template's `roles` (e.g. `employer`): it is reminded, or gets a "
    "new link, with its own link. Default: the recipient, as for a batch of one signer.",
)


class _Remind(BaseModel):
    model_config = ConfigDict(extra="forbid")
    force: bool = Field(False, description="Remind even within an hour of the previous reminder.")
    role: str | None = RoleName


class RemindListed(_Remind):
    request_ids: list[RequestId] = Field(min_length=1, max_length=MAX_IDS, description="The requests to remind.")


class RemindAllUnsigned(_Remind):
    all_unsigned: Literal[True] = Field(description="Remind everyone in the batch who has not signed yet.")


class RemindBody(RootModel[RemindListed | RemindAllUnsigned]):
    """Either the listed requests or all unsigned ones."""


class Reminded(BaseModel):
    queued: int = Field(description="Reminders queued now.")
    skipped: dict[str, int] = Field(description="Reason → requests not reminded for it (e.g. `too_soon`, `signed`).")
    in_background: int = Field(description="Requests a background job goes on to remind.")


class DigestsSent(BaseModel):
    queued: int = Field(description="Digests queued now: one per countersigner of the batch with documents ready.")


class ResendBody(BaseModel):
    extend_days: int | None = Field(
        None,
        ge=1,
        le=MAX_EXTEND_DAYS,
        description="Move the deadline this many days beyond today (the recipient's resend only).",
    )
    role: str | None = RoleName


#: What a resent request's status may be.
ResentStatus = Literal["generated", "sent", "opened", "bounced"]


class Resent(BaseModel):
    resent: int
    request_id: int
    role: str = Field(description="The party that got the new link.")
    status: ResentStatus = Field(
        description="The request's status: `generated` (the recipient's new invitation is queued); for another "
        "party the request's status is unchanged (its new invitation is queued), or back to `sent` or `opened` when "
        "that party's returned invitation had bounced it. Still `bounced` when another party's returned invitation "
        "stands too (its `error` names who is left): the party's new invitation is queued all the same, and the "
        "request goes on once the last of them is resent."
    )
    expires_at: datetime | None = Field(description="The new link's deadline.")


class EmailBody(BaseModel):
    email: str = Field(max_length=254, description="The corrected address.")
    role: str | None = Field(
        None,
        max_length=40,
        pattern=r"^[a-z0-9_]+$",
        description="The party whose address this is, one of the template's `roles` (e.g. `manager`, from the "
        "row's `manager_email`, or the batch's fixed `employer`). Default: the recipient.",
    )
    note: str | None = Field(
        None,
        max_length=MAX_NOTE,
        description="For the approver, when the change waits for approval: why the address changes.",
    )


class EmailChanged(BaseModel):
    request_id: int
    role: str = Field(description="The party whose address changed (or would).")
    email: str = Field(description="The party's address now: the old one while the change waits for approval.")
    changed: bool = Field(description="The address changed now; false when it already was this one, or waits.")
    status: Literal["changed", "unchanged", "waiting_for_approval"] = Field(
        description="`changed`, `unchanged` (it already was this address; asking for the address it has also "
        "takes back a change waiting for approval), or `waiting_for_approval` (202): the batch's team requires "
        "approval, so the change waits in `pending_change` for a manager of the team or an admin who did not ask "
        "for it; nothing is sent to the new address until then, and a resend to this party is refused meanwhile "
        "(409 `address_change_pending`). Approving it sends the new link there."
    )
    pending_change: AddressChangeOut | None = Field(description="The change waiting for approval, if it waits.")


@bp.post("/batches/<int:batch_id>/remind")
@operation(
    "Remind recipients (or another party) now",
    tag="Batch actions",
    body=RemindBody,
    responses={202: Reminded},
    errors=(400, 403, 404, 422),
    idempotent=True,
)
def remind(batch_id: int):
    """A manual reminder counts towards the batch's schedule; within an hour of the previous one only with `force`.
    A `role` whose party is served by its countersigner's digest gets that digest, one for all its documents."""
    selection = parse_body(
        RemindBody,
        usage=f'Send a JSON object: {{"request_ids": [1, 2]}} (at most {MAX_IDS:,} '
        'request ids) or {"all_unsigned": true} (and "force": true to remind '
        "within the hour).",
    ).root
    ids = selection.request_ids if isinstance(selection, RemindListed) else None
    try:
        # Past INLINE_LIMIT requests this runs as a job; ``in_background`` then says how many it goes through.
        outcome = run_staff_action(
            db.session,
            action="remind",
            batch_id=batch_id,
            request_ids=ids,
            selector=None if ids is not None else "not_signed",
            user=g.api_user,
            now=utcnow(),
            force=selection.force,
            role=selection.role,
        )
    except BatchActionError as exc:
        raise ApiError(exc.message, exc.status) from None
    return answer(Reminded(queued=outcome.done, skipped=outcome.skipped, in_background=outcome.in_background), 202)


@bp.post("/batches/<int:batch_id>/countersign-digests")
@operation(
    "Send the countersigners' digests now",
    tag="Batch actions",
    responses={202: DigestsSent},
    errors=(403, 404),
    idempotent=True,
)
def countersign_digests(batch_id: int):
    """A party whose address waits on several documents of the batch gets one digest with one link instead of a
    mail per document, at most once per `COUNTERSIGN_DIGEST_HOURS` while more arrive; this sends one to each
    now."""
    try:
        sent = send_digests_now(db.session, batch_id=batch_id, user=g.api_user, now=utcnow())
    except BatchActionError as exc:
        raise ApiError(exc.message, exc.status) from None
    return answer(DigestsSent(queued=sent), 202)


@bp.post("/requests/<int:request_id>/resend")
@operation(
    "Resend with a new signing link",
    tag="Requests",
    body=ResendBody,
    body_optional=True,
    responses={202: Resent},
    errors=(400, 403, 404, 409, 422),
    idempotent=True,
)
def resend(request_id: int):
    """The old link stops working; an expired or bounced request is sent again (optionally with a later deadline).
    With `role`, that party of a document several sign gets a new link and invitation instead, while its step is
    open (the request's state is unchanged), or when its own invitation bounced the request (after correcting its
    address: the request goes back to `sent` or `opened`); the recipient of such a document gets one while it has not signed and
    nobody declined. A party served by its countersigner's digest has no link of its own to renew: 409, reason
    `countersign_digest` (remind it instead: its digest goes again). A request another party's returned invitation
    bounced gets no new link for its recipient: 409, reason `party_bounced` (correct that party's address and resend
    with its `role`). When the invitations of several parties bounced, each is corrected and resent in turn: the
    request stays `bounced` (`status`, its `error` naming those left) until the last of them is resent. While a
    change of the party's address waits for approval: 409, reason `address_change_pending` (its approval sends the
    new link)."""
    body = parse_body(ResendBody, optional=True)
    try:
        result = resend_with_new_link(
            db.session,
            request_ids=[request_id],
            user=g.api_user,
            now=utcnow(),
            extend_days=body.extend_days,
            role=body.role,
        )
    except BatchActionError as exc:
        raise ApiError(exc.message, exc.status) from None
    if result.skipped.get("not_found"):
        raise ApiError("No request with this id.", 404)
    if not result.resent:
        reason = next(iter(result.skipped))
        raise ApiError(RESEND_REFUSED.get(reason, RESEND_REFUSED[None]), 409, details={"reason": reason})
    db.session.commit()
    enqueue_sends(result.mail_ids)
    return answer(
        Resent(
            resent=result.resent,
            request_id=request_id,
            role=body.role or RECIPIENT_ROLE,
            status=cast(ResentStatus, db.session.get_one(SigningRequest, request_id).status),
            expires_at=result.deadlines[0] if result.deadlines else None,
        ),
        202,
    )


@bp.post("/requests/<int:request_id>/email")
@operation(
    "Correct a recipient's (or another party's) address",
    tag="Requests",
    body=EmailBody,
    responses={200: EmailChanged, 202: EmailChanged},
    errors=(400, 403, 404, 409, 422),
)
def update_email(request_id: int):
    """Before the request is signed or cancelled; a bounced one can then be resent. With `role`, that party's
    address (e.g. a mistyped line manager's) while it has not signed or declined (409 after; 404 for a role the
    request does not have): resend with the same `role` to send its new link there. When another party's
    invitation bounced, the request is `bounced` and its `error` names that party: correct its address, then
    resend to it, and the request goes back to `sent` or `opened` (the others' signatures stay) once every party
    whose invitation bounced is resent. An address that cannot receive mail is refused (422). In a team that
    requires approval, once the batch was approved, the change waits for a second look (202, `status`
    `waiting_for_approval`): see `/batches/{batch_id}/address-changes`."""
    body = parse_body(EmailBody)
    role = body.role or RECIPIENT_ROLE
    try:
        change = change_email(
            db.session,
            request_id=request_id,
            new_email=body.email,
            user=g.api_user,
            now=utcnow(),
            role=role,
            note=body.note,
        )
    except BatchActionError as exc:
        # The body is well-formed by now: what the domain refuses (an unusable address) is content, not syntax.
        raise ApiError(exc.message, 422 if exc.status == 400 else exc.status) from None
    db.session.commit()
    if change.pending is not None:
        waiting = change_out(change.pending)
        return answer(
            EmailChanged(
                request_id=request_id,
                role=role,
                email=change.old_email,
                changed=False,
                status="waiting_for_approval",
                pending_change=waiting,
            ),
            202,
        )
    return answer(
        EmailChanged(
            request_id=request_id,
            role=role,
            email=change.new_email,
            changed=change.changed,
            status="changed" if change.changed else "unchanged",
            pending_change=None,
        )
    )

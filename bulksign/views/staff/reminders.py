"""Staff actions from the batch page: remind now, resend with a new link, correct an address (the form fields:
docs/architecture/views.md)."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_babel import ngettext
from flask_login import current_user

from bulksign.batches.address_changes import change_email
from bulksign.batches.bulk_actions import run_staff_action
from bulksign.batches.corrections import (
    CORRECTION_ANSWERS,
    CorrectionAsked,
    CorrectionOutcome,
    correct_request,
    decide_correction,
    queue_follow_up,
)
from bulksign.batches.countersign_digests import send_digests_now
from bulksign.batches.manual_reminders import SELECTORS
from bulksign.batches.progress import BatchActionError
from bulksign.core.extensions import db
from bulksign.models import RECIPIENT_ROLE, Batch, SigningRequest, utcnow
from bulksign.views._forms import extend_days_field
from bulksign.views._results import background_message, reminders_done, resend_done

bp = Blueprint("reminders", __name__)


def _ids() -> list[int] | None:
    raw = request.form.getlist("request_ids")
    if not raw:
        return None
    if not all(value.isdigit() for value in raw):
        abort(400, description=_("The selection contains an invalid row id."))
    return [int(value) for value in raw]


def _role() -> str | None:
    """The party a remind or resend is for; none given: the recipient."""
    return request.form.get("role") or None


def _answer(batch_id: int, message: str, category: str, *, send_anyway: dict | None = None):
    """The result as an HTMX partial (with a "send anyway" form when offered) or a flash on the batch page."""
    if request.headers.get("HX-Request"):
        html = render_template(
            "reminders/_result.html", message=message, category=category, batch_id=batch_id, send_anyway=send_anyway
        )
        # The open request panel asks for itself again: the new address, deadline or count shows at once.
        return html, {"HX-Trigger": "request-changed"}
    flash(message, category)
    return redirect(url_for("batches.detail", batch_id=batch_id))


def _refused(batch_id: int, exc: BatchActionError):
    db.session.rollback()
    if exc.status == 404:
        abort(404)
    if request.headers.get("HX-Request"):
        return render_template("reminders/_result.html", message=exc.message, category="error"), exc.status
    flash(str(exc.message), "error")
    return redirect(url_for("batches.detail", batch_id=batch_id))


@bp.post("/batches/<int:batch_id>/remind")
def remind(batch_id: int):
    ids, selector = _ids(), request.form.get("selector") or None
    if selector is not None and selector not in SELECTORS:
        abort(400, description=_("Unknown selection."))
    if ids is None and selector is None:
        return _answer(batch_id, _("Select recipients, or choose all who have not signed / not opened."), "error")
    force = request.form.get("force") == "1"
    try:
        # Past INLINE_LIMIT requests this runs as a job.
        outcome = run_staff_action(
            db.session,
            action="remind",
            batch_id=batch_id,
            request_ids=ids,
            selector=None if ids is not None else selector,
            force=force,
            role=_role(),
            user=current_user._get_current_object(),
            now=utcnow(),
        )
    except BatchActionError as exc:
        return _refused(batch_id, exc)
    if outcome.in_background:
        return _answer(batch_id, background_message(outcome.in_background), "info")
    message, category, offer = reminders_done(outcome.done, outcome.skipped)
    # "Send anyway" repeats the same choice with the hour's wait lifted.
    send_anyway = (
        {"request_ids": ids or [], "selector": selector if ids is None else None, "role": _role()} if offer else None
    )
    return _answer(batch_id, message, category, send_anyway=send_anyway)


def _resend(batch_id: int, ids: list[int] | None):
    if not ids:
        return _answer(batch_id, _("Select the recipients who should get a new link."), "error")
    try:
        outcome = run_staff_action(
            db.session,
            action="resend",
            batch_id=batch_id,
            request_ids=ids,
            user=current_user._get_current_object(),
            now=utcnow(),
            extend_days=extend_days_field(),
            role=_role(),
        )
    except BatchActionError as exc:
        return _refused(batch_id, exc)
    if outcome.in_background:
        return _answer(batch_id, background_message(outcome.in_background), "info")
    return _answer(
        batch_id,
        *resend_done(
            outcome.done,
            outcome.skipped,
            deadlines=outcome.deadlines,
            batch=db.session.get(Batch, batch_id),
            still_bounced=outcome.still_bounced,
        ),
    )


@bp.post("/batches/<int:batch_id>/countersign-digests")
def countersign_digests(batch_id: int):
    """Each countersigner of the batch with documents ready gets their digest now."""
    try:
        sent = send_digests_now(db.session, batch_id=batch_id, user=current_user._get_current_object(), now=utcnow())
    except BatchActionError as exc:
        return _refused(batch_id, exc)
    if not sent:
        return _answer(batch_id, _("No countersigner has documents waiting now."), "info")
    return _answer(batch_id, ngettext("%(num)s digest queued.", "%(num)s digests queued.", sent), "success")


@bp.post("/batches/<int:batch_id>/resend")
def resend_selected(batch_id: int):
    return _resend(batch_id, _ids())


def _request_or_404(request_id: int) -> SigningRequest:
    found = db.session.get(SigningRequest, request_id)
    if found is None:
        abort(404)
    return found


@bp.post("/requests/<int:request_id>/resend")
def resend_one(request_id: int):
    return _resend(_request_or_404(request_id).batch_id, [request_id])


def _held(change) -> str:
    """What the asker reads when the change waits for approval."""
    if change.role == RECIPIENT_ROLE:
        return _(
            "The change from %(old)s to %(new)s waits for approval by a manager of the team or an admin: nothing "
            "goes to %(new)s until then, and approving it sends the new link there.",
            old=change.old_email,
            new=change.new_email,
        )
    return _(
        "The change of the %(role)s's address from %(old)s to %(new)s waits for approval by a manager of the team "
        "or an admin: nothing goes to %(new)s until then, and approving it sends the new link there.",
        role=change.role,
        old=change.old_email,
        new=change.new_email,
    )


@bp.post("/requests/<int:request_id>/email")
def update_email(request_id: int):
    batch_id = _request_or_404(request_id).batch_id
    role = _role() or RECIPIENT_ROLE
    try:
        change = change_email(
            db.session,
            request_id=request_id,
            new_email=request.form.get("email", ""),
            user=current_user,
            now=utcnow(),
            role=role,
            note=request.form.get("note"),
        )
    except BatchActionError as exc:
        return _refused(batch_id, exc)
    db.session.commit()
    if change.pending is not None:
        return _answer(batch_id, _held(change), "info")
    if not change.changed:
        return _answer(batch_id, _("The address is unchanged."), "info")
    if role != RECIPIENT_ROLE:
        return _answer(
            batch_id,
            _(
                "The %(role)s's address changed from %(old)s to %(new)s. Resend to them to send a new link there.",
                role=role,
                old=change.old_email,
                new=change.new_email,
            ),
            "success",
        )
    return _answer(
        batch_id,
        _(
            "Address changed from %(old)s to %(new)s. Resend to send a new link there.",
            old=change.old_email,
            new=change.new_email,
        ),
        "success",
    )


def _asked() -> CorrectionAsked:
    """The correction form: ``value-<column>``, ``name-<role>`` and ``email-<role>`` inputs, and the note."""
    form = request.form

    def given(prefix: str) -> dict[str, str]:
        return {k.removeprefix(prefix): v for k, v in form.items() if k.startswith(prefix)}

    return CorrectionAsked(
        note=form.get("note", ""), values=given("value-"), names=given("name-"), emails=given("email-")
    )


@bp.post("/requests/<int:request_id>/correction")
def correct(request_id: int):
    batch_id = _request_or_404(request_id).batch_id
    try:
        result = correct_request(db.session, request_id=request_id, asked=_asked(), user=current_user, now=utcnow())
    except BatchActionError as exc:
        return _refused(batch_id, exc)
    db.session.commit()
    queue_follow_up(result)
    applied = result.outcome == CorrectionOutcome.APPLIED
    return _answer(batch_id, str(CORRECTION_ANSWERS[result.outcome]), "success" if applied else "info")


@bp.post("/batches/<int:batch_id>/corrections/<int:correction_id>")
def decide(batch_id: int, correction_id: int):
    try:
        result = decide_correction(
            db.session,
            batch_id=batch_id,
            correction_id=correction_id,
            user=current_user,
            now=utcnow(),
            approve=request.form.get("decision") == "approve",
            reason=request.form.get("reason", ""),
        )
    except BatchActionError as exc:
        return _refused(batch_id, exc)
    db.session.commit()
    queue_follow_up(result)
    return _answer(batch_id, str(CORRECTION_ANSWERS[result.outcome]), "success")

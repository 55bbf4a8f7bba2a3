"""Approving or rejecting a batch that waits for approval, and the sample documents an approver opens first; and
the changes of where its documents go asked after it was approved (``address_approval``)."""

from __future__ import annotations

import random

from babel import Locale
from flask import Blueprint, Response, abort, current_app, flash, redirect, render_template, request, url_for
from flask_babel import get_locale, ngettext
from flask_babel import gettext as _
from flask_login import current_user

from bulksign.batches import address_approval, approval, row_preview
from bulksign.batches import correction_panel as correction_panels
from bulksign.batches.address_changes import needs_approval
from bulksign.core.extensions import db
from bulksign.models import utcnow
from bulksign.people import access
from bulksign.views._results import REASONS
from bulksign.work.pipeline import enqueue_sends

bp = Blueprint("approval", __name__, url_prefix="/batches")


def _back(batch_id: int):
    return redirect(url_for("batches.detail", batch_id=batch_id), 303)


def _refused(exc: approval.ApprovalError, batch_id: int):
    if exc.status == 404:
        abort(404)
    flash(str(exc.message), "error")
    return _back(batch_id)


@bp.post("/<int:batch_id>/approve")
def approve(batch_id: int):
    try:
        decision = approval.approve(db.session, batch_id=batch_id, user=current_user, now=utcnow())
    except approval.ApprovalError as exc:
        return _refused(exc, batch_id)
    flash(
        ngettext(
            "Approved: its %(num)s document is being prepared and sent.",
            "Approved: its %(num)s documents are being prepared and sent.",
            decision.requests,
        )
        if decision.requests
        else _("Approved."),
        "success",
    )
    return _back(batch_id)


@bp.post("/<int:batch_id>/reject")
def reject(batch_id: int):
    try:
        approval.reject(
            db.session, batch_id=batch_id, user=current_user, reason=request.form.get("reason", ""), now=utcnow()
        )
    except approval.ApprovalError as exc:
        return _refused(exc, batch_id)
    enqueue_sends(approval.rejection_notices(db.session, batch_id=batch_id))
    flash(_("Rejected: nothing of it is sent, and its creator is told why."), "success")
    return _back(batch_id)


@bp.get("/<int:batch_id>/samples")
def find_samples(batch_id: int):
    """The batch's rows the approver asked for: by name, row number or address (``q``), or a few at random."""
    try:
        batch = access.batch_for_read(db.session, batch_id=batch_id, user=current_user)
    except access.Refused:
        abort(404)
    found = row_preview.find_requests(
        db.session,
        batch_id=batch.id,
        query=request.args.get("q", ""),
        shuffle=request.args.get("shuffle") == "1",
        rng=random.SystemRandom(),
    )
    return render_template("batches/_samples.html", batch=batch, found=found, query=request.args.get("q", ""))


@bp.get("/<int:batch_id>/samples/<int:request_id>.pdf")
def sample(batch_id: int, request_id: int):
    """A sample document rendered now for its real row, for the approver's eyes (never stored or mailed)."""
    try:
        batch = access.batch_for_read(db.session, batch_id=batch_id, user=current_user)
    except access.Refused:
        abort(404)
    try:
        pdf = approval.sample_document(
            db.session, batch=batch, request_id=request_id, timeout=current_app.config["PDF_TIMEOUT_SECONDS"]
        )
    except LookupError:
        abort(404)
    except approval.ApprovalError as exc:
        abort(exc.status, description=str(exc.message))
    return Response(
        pdf,
        mimetype="application/pdf",
        headers={"Content-Disposition": f'inline; filename="sample-{request_id}.pdf"', "Cache-Control": "no-store"},
    )


def _back_to_changes(batch_id: int):
    return redirect(url_for("batches.detail", batch_id=batch_id, _anchor="address-changes"), 303)


def _approved_message(decision: address_approval.ChangeDecision) -> str:
    new = decision.change.new_email
    if decision.mail_ids:
        return _(
            "Approved: the address is now %(new)s and a new link went there; the old link no longer works.", new=new
        )
    if decision.not_sent in ("not_sent", "not_started"):
        return _("Approved: the address is now %(new)s; its invitation goes there when its turn comes.", new=new)
    return _(
        "Approved: the address is now %(new)s. No new link went now: %(why)s.",
        new=new,
        why=REASONS.get(decision.not_sent or "", decision.not_sent),
    )


@bp.post("/<int:batch_id>/address-changes/<int:change_id>/approve")
def approve_change(batch_id: int, change_id: int):
    try:
        decision = address_approval.approve_change(
            db.session, batch_id=batch_id, change_id=change_id, user=current_user, now=utcnow()
        )
    except approval.ApprovalError as exc:
        db.session.rollback()
        if exc.status == 404:
            abort(404)
        flash(str(exc.message), "error")
        return _back_to_changes(batch_id)
    db.session.commit()
    enqueue_sends(decision.mail_ids)
    flash(_approved_message(decision), "success")
    return _back_to_changes(batch_id)


@bp.post("/<int:batch_id>/address-changes/<int:change_id>/reject")
def reject_change(batch_id: int, change_id: int):
    try:
        decision = address_approval.reject_change(
            db.session,
            batch_id=batch_id,
            change_id=change_id,
            user=current_user,
            reason=request.form.get("reason", ""),
            now=utcnow(),
        )
    except approval.ApprovalError as exc:
        db.session.rollback()
        if exc.status == 404:
            abort(404)
        flash(str(exc.message), "error")
        return _back_to_changes(batch_id)
    db.session.commit()
    flash(_("Rejected: the address stays %(old)s.", old=decision.change.old_email), "success")
    return _back_to_changes(batch_id)


def init_app(app) -> None:
    @app.template_global()
    def batch_approval(batch):
        """What the batch page shows of its approval (``batches/_approval.html``)."""
        return approval.page(db.session, batch=batch, user=current_user)

    @app.template_global()
    def address_changes(batch, request_id=None):
        """The batch's (or one request's) address changes waiting for approval
        (``batches/_address_changes.html``)."""
        return address_approval.waiting_changes(db.session, batch=batch, user=current_user, request_id=request_id)

    @app.template_global()
    def correction_panel(row):
        """What a request's panel shows of corrections (``reminders/_correction.html``)."""
        return correction_panels.correction_panel(db.session, request=row, user=current_user)

    @app.template_filter("language_name")
    def language_name(code: str) -> str:
        """A language's name in the page's language ("Russian", "русский")."""
        return Locale.parse(code).get_display_name(str(get_locale())) or code

    @app.template_global()
    def address_changes_held(batch) -> bool:
        """Whether a change of where this batch's documents go waits for approval (the forms ask for a note)."""
        return needs_approval(db.session, batch=batch)

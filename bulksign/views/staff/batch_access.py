"""Who sees a batch besides its team, and who is told about it: share with a user, set the notice address."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, request, url_for
from flask_babel import gettext as _
from flask_login import current_user

from bulksign.batches.batch_access import access_panel, set_notice_address
from bulksign.core.extensions import db
from bulksign.models import utcnow
from bulksign.people import access

bp = Blueprint("batch_access", __name__, url_prefix="/batches")


def _back(batch_id: int):
    return redirect(url_for("batches.detail", batch_id=batch_id), 303)


@bp.post("/<int:batch_id>/shares")
def share(batch_id: int):
    user = access.share_batch(
        db.session, batch_id=batch_id, email=request.form.get("email", ""), user=current_user, now=utcnow()
    )
    db.session.commit()
    flash(_("%(email)s can now see this batch.", email=user.email), "success")
    return _back(batch_id)


@bp.post("/<int:batch_id>/shares/<int:user_id>/remove")
def unshare(batch_id: int, user_id: int):
    access.unshare_batch(db.session, batch_id=batch_id, user_id=user_id, user=current_user)
    db.session.commit()
    flash(_("The batch is no longer shared with that user."), "success")
    return _back(batch_id)


@bp.post("/<int:batch_id>/notices")
def notices(batch_id: int):
    batch = set_notice_address(
        db.session,
        batch_id=batch_id,
        choice=request.form.get("notify_to"),
        email=request.form.get("notify_email"),
        user=current_user,
    )
    db.session.commit()
    flash(
        _("Notices about this batch go to %(email)s.", email=batch.notify_email)
        if batch.notify_email
        else _("Notices about this batch go to its owner."),
        "success",
    )
    return _back(batch_id)


def init_app(app) -> None:
    @app.template_global()
    def batch_access(batch):
        """The batch's team, notice address and shares, for the batch page (``batches/_access.html``)."""
        return access_panel(db.session, batch=batch, user=current_user)

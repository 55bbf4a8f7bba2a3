"""Who sees a batch besides its team, who is told about it, and what it may cost: share with a user, set the
notice address, change the cap on text messages."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, request, url_for
from flask_babel import format_decimal, ngettext
from flask_babel import gettext as _
from flask_login import current_user

from bulksign.batches.batch_access import access_panel, set_notice_address
from bulksign.batches.text_cap import TextCapError, change_text_cap, read_cap
from bulksign.core.extensions import db
from bulksign.models import utcnow
from bulksign.people import access
from bulksign.work.pipeline import enqueue_sends

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


@bp.post("/<int:batch_id>/text-cap")
def text_cap(batch_id: int):
    try:
        changed = change_text_cap(
            db.session,
            batch_id=batch_id,
            cap=read_cap(request.form.get("text_cap", "")),
            user=current_user,
            now=utcnow(),
        )
    except TextCapError as exc:
        db.session.rollback()
        flash(str(exc.message), "error")
        return _back(batch_id)
    db.session.commit()
    enqueue_sends(list(changed.released))
    flash(
        ngettext(
            "The batch may now send %(cap)s text messages; %(num)s held back goes out now.",
            "The batch may now send %(cap)s text messages; %(num)s held back go out now.",
            len(changed.released),
            cap=format_decimal(changed.cap),
        )
        if changed.released
        else _("The batch may now send %(cap)s text messages.", cap=format_decimal(changed.cap)),
        "success",
    )
    return _back(batch_id)


def init_app(app) -> None:
    @app.template_global()
    def batch_access(batch):
        """The batch's team, notice address and shares, for the batch page (``batches/_access.html``)."""
        return access_panel(db.session, batch=batch, user=current_user)

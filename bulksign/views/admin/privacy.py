"""Admin page of retention and erasure: each team's keeping periods, what the next purge removes, legal holds, and
erasing a person."""

from __future__ import annotations

from collections.abc import Callable

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user

from bulksign.batches import retention
from bulksign.batches.erasure import erase_person
from bulksign.core.extensions import db
from bulksign.documents.storage import get_storage
from bulksign.models import Batch, Team, utcnow
from bulksign.people.auth import admin_required

bp = Blueprint("privacy", __name__, url_prefix="/admin/privacy")


@bp.before_request
@admin_required
def _admins_only():
    return None


def _page(*, status: int = 200, erasure=None, erased_email: str = "", error: str | None = None):
    now = utcnow()
    return render_template(
        "admin/privacy.html",
        teams=retention.team_policies(db.session),
        due=retention.preview(db.session, now=now),
        holds=retention.holds(db.session),
        erasure=erasure,
        erased_email=erased_email,
        error=error,
        max_days=retention.MAX_DAYS,
    ), status


@bp.get("/")
def index():
    return _page()


@bp.post("/teams/<int:team_id>")
def set_team(team_id: int):
    team = db.session.get(Team, team_id) or abort(404)
    try:
        signed = retention.check_days(
            request.form.get("keep_signed_days"), name=_("Keep signed documents"), allow_forever=True
        )
        unsigned = retention.check_days(request.form.get("keep_unsigned_days"), name=_("Keep unsigned requests"))
    except retention.RetentionError as exc:
        return _page(status=422, error=str(exc.message))
    assert unsigned is not None  # check_days gives None only where allow_forever
    retention.set_team_retention(
        db.session, team=team, keep_signed_days=signed, keep_unsigned_days=unsigned, now=utcnow()
    )
    db.session.commit()
    flash(_("Retention of %(team)s saved.", team=team.name), "success")
    return redirect(url_for("privacy.index"), 303)


@bp.post("/holds")
def place_hold():
    batch = db.session.get(Batch, request.form.get("batch_id", type=int) or 0)
    if batch is None:
        return _page(status=422, error=_("No batch with this number."))
    said = _("%(batch)s is on legal hold: nothing of it is deleted until the hold is lifted.", batch=batch.name)
    return _change_hold(batch, retention.place_hold, said=said)


@bp.post("/holds/lift")
def lift_hold():
    # The batch by a form field, not the path: admins reach every batch, ``reach``'s per-team 404 is not theirs.
    batch = db.session.get(Batch, request.form.get("batch_id", type=int) or 0) or abort(404)
    return _change_hold(batch, retention.lift_hold, said=_("The legal hold of %(batch)s is lifted.", batch=batch.name))


def _change_hold(batch: Batch, change: Callable[..., None], *, said: str):
    """Place or lift the batch's hold (``change``, which checks the form's reason), commit, and say ``said``; a
    refused reason shows the page again with why."""
    try:
        change(db.session, batch_id=batch.id, reason=request.form.get("reason", ""), by=current_user, now=utcnow())
    except retention.RetentionError as exc:
        return _page(status=422, error=str(exc.message))
    db.session.commit()
    flash(said, "success")
    return redirect(url_for("privacy.index"), 303)


@bp.post("/erase")
def erase():
    email = request.form.get("email", "").strip()[:254]
    if "@" not in email:
        return _page(status=422, error=_("Give the email address of the person to erase."))
    if request.form.get("confirm") != "1":
        return _page(status=422, error=_("Tick the box to confirm: an erasure cannot be undone."))
    erasure = erase_person(db.session, storage=get_storage(), email=email, by=current_user, now=utcnow())
    db.session.commit()
    return _page(erasure=erasure, erased_email=email)

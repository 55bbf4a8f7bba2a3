"""Admin page of the suppression list: see and search the addresses no mail goes to, lift an entry."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user

from bulksign.core.extensions import db
from bulksign.models import utcnow
from bulksign.people.auth import admin_required
from bulksign.recipients import suppressions

bp = Blueprint("suppressions", __name__, url_prefix="/admin/suppressions")


@bp.before_request
@admin_required
def _admins_only():
    return None


@bp.get("/")
def index():
    q = request.args.get("q", "").strip()[:200]
    after = request.args.get("after", type=int)
    page = suppressions.list_in_force(db.session, q=q, after=after if after and after > 0 else None)
    return render_template("admin/suppressions.html", page=page, q=q, describe=suppressions.describe)


@bp.post("/lift")
def lift():
    email = request.form.get("email", "")
    try:
        suppressions.lift(db.session, email=email, user=current_user, now=utcnow())
    except suppressions.SuppressionNotFound:
        flash(_("%(email)s is not on the suppression list.", email=email), "error")
        return redirect(url_for("suppressions.index"), 303)
    db.session.commit()
    flash(_("%(email)s can be mailed again. Retry its failed invitations from the batch page.", email=email), "success")
    return redirect(url_for("suppressions.index", q=request.form.get("q") or None), 303)

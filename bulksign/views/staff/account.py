"""The user's own account: the display name mails and pages call them by, and their password."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user, login_user

from bulksign.core.extensions import db
from bulksign.people import access
from bulksign.people.users import MAX_DISPLAY_NAME, MIN_PASSWORD_LENGTH, UserError, change_password, set_display_name

bp = Blueprint("account", __name__, url_prefix="/account")


def _page(*, status: int = 200, name_error: str | None = None, password_error: str | None = None):
    return render_template(
        "account/index.html",
        teams=access.teams_of(db.session, user=current_user),
        name=request.form.get("display_name", current_user.display_name or ""),
        name_error=name_error,
        password_error=password_error,
        max_name=MAX_DISPLAY_NAME,
        min_length=MIN_PASSWORD_LENGTH,
    ), status


@bp.get("/")
def index():
    return _page()


@bp.post("/name")
def set_name():
    try:
        changed = set_display_name(db.session, user=current_user, name=request.form.get("display_name", ""))
    except UserError as exc:
        db.session.rollback()
        return _page(status=422, name_error=str(exc))
    db.session.commit()
    if changed:
        flash(
            _("Recipients now read “%(name)s” in the mails of your batches.", name=current_user.shown_name), "success"
        )
    return redirect(url_for("account.index"))


@bp.post("/password")
def set_password():
    user = current_user._get_current_object()
    try:
        change_password(
            db.session,
            user=user,
            current=request.form.get("current", ""),
            password=request.form.get("password", ""),
            repeat=request.form.get("repeat", ""),
        )
    except UserError as exc:
        db.session.rollback()
        return _page(status=422, password_error=str(exc))
    db.session.commit()
    # The new password ends every login made with the old one (``User.get_id``), this one too: log in again here.
    login_user(user)
    flash(_("Your password is changed. Other browsers logged in with the old one are logged out."), "success")
    return redirect(url_for("account.index"))

"""Staff login, logout and language choice."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, current_app, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user, login_required, login_user, logout_user

from bulksign.core.extensions import db, limiter
from bulksign.models import utcnow
from bulksign.people.auth import public
from bulksign.people.users import authenticate

bp = Blueprint("auth", __name__, url_prefix="/auth")


def _safe_next(target: str | None) -> str:
    """Only same-site paths: a login link must not bounce the user to another site."""
    if target and target.startswith("/") and not target.startswith("//") and not urlsplit(target).netloc:
        return target
    return url_for("main.dashboard")


@bp.route("/login", methods=["GET", "POST"])
@public
@limiter.limit(lambda: current_app.config["LOGIN_RATE_LIMIT"], methods=["POST"])
def login():
    if current_user.is_authenticated:
        return redirect(url_for("main.dashboard"))
    error = None
    if request.method == "POST":
        user = authenticate(
            db.session, email=request.form.get("email", ""), password=request.form.get("password", ""), now=utcnow()
        )
        if user is not None:
            db.session.commit()
            login_user(user, remember=bool(request.form.get("remember")))
            return redirect(_safe_next(request.args.get("next")))
        error = _("Wrong email or password.")
    return render_template("auth/login.html", error=error, email=request.form.get("email", "")), (401 if error else 200)


@bp.post("/logout")
@login_required
def logout():
    # The cookie goes, and so does what it was worth: a copy of the one-year "remember me" cookie (another
    # device, a stolen one) no longer logs anyone in. This ends the user's other sessions too.
    current_user.logouts += 1
    db.session.commit()
    logout_user()
    flash(_("You are logged out."), "info")
    return redirect(url_for("auth.login"))


@bp.post("/language")
@login_required
def set_language():
    language = request.form.get("language")
    if language in current_app.config["LANGUAGES"]:
        current_user.locale = language
        db.session.commit()
    return redirect(_safe_next(request.form.get("next")))

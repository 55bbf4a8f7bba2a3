"""Staff login, logout, language choice and "forgot password" (a mailed link that sets a new one)."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, current_app, flash, redirect, render_template, request, url_for
from flask_babel import get_locale
from flask_babel import gettext as _
from flask_login import current_user, login_required, login_user, logout_user

from bulksign.core.extensions import db, limiter
from bulksign.models import utcnow
from bulksign.people import password_resets
from bulksign.people.auth import public
from bulksign.people.users import MIN_PASSWORD_LENGTH, UserError, authenticate

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


def _login_rate_limit() -> str:
    return current_app.config["LOGIN_RATE_LIMIT"]


@bp.route("/forgot", methods=["GET", "POST"])
@public
@limiter.limit(_login_rate_limit, methods=["POST"])
def forgot_password():
    if request.method == "POST":
        password_resets.request_reset(
            db.session,
            email=request.form.get("email", ""),
            locale=str(get_locale() or "en"),
            secret=current_app.config["SECRET_KEY"],
            now=utcnow(),
        )
        # The same words whether or not the address has an account: the page tells no one who works here.
        return render_template("auth/forgot.html", sent=True, email=request.form.get("email", "")[:254])
    return render_template("auth/forgot.html", sent=False, email=request.args.get("email", "")[:254])


#: What the reset page says of a link that no longer sets a password (``password_resets.ResetLink.status``).
_DEAD_LINK = {
    "expired": lambda: _(
        "This link has expired: a link works for %(minutes)s minutes. Ask for a new one below.",
        minutes=int(password_resets.LINK_TTL.total_seconds() // 60),
    ),
    "spent": lambda: _(
        "This link was used already, or a newer link was asked for since, or the password was changed. "
        "Ask for a new one below if you still need it."
    ),
    "unknown": lambda: _(
        "This link is not valid. Check that you opened the whole link from the mail, or ask for a new one below."
    ),
}


@bp.route("/reset/<token>", methods=["GET", "POST"])
@public
@limiter.limit(_login_rate_limit, methods=["POST"])
def reset_password(token: str):
    secret, now = current_app.config["SECRET_KEY"], utcnow()
    error = None
    if request.method == "POST":
        try:
            password_resets.complete_reset(
                db.session,
                token=token,
                password=request.form.get("password", ""),
                repeat=request.form.get("repeat", ""),
                secret=secret,
                now=now,
            )
        except password_resets.ResetRefused as exc:
            return _dead_link(exc.link.status)
        except UserError as exc:
            db.session.rollback()
            error = str(exc)
        else:
            db.session.commit()
            flash(_("Your new password is set. Log in with it."), "success")
            return redirect(url_for("auth.login"))
    link = password_resets.check_link(db.session, token=token, secret=secret, now=now)
    if link.status != "valid":
        return _dead_link(link.status)
    return render_template("auth/reset.html", user=link.user, error=error, min_length=MIN_PASSWORD_LENGTH), (
        422 if error else 200
    )


def _dead_link(status: str):
    return render_template("auth/reset_dead.html", message=_DEAD_LINK[status]()), 410 if status != "unknown" else 404

"""Admin pages: users and API keys, teams and roles, outgoing webhooks, and the mails caught by the SMTP catcher."""

from __future__ import annotations

import secrets
from pathlib import Path

from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user
from sqlalchemy import select
from werkzeug.wrappers import Response

from bulksign.core.extensions import db
from bulksign.integrations import webhooks_out
from bulksign.integrations.webhook_delivery import DeliveryStatus, recent_deliveries
from bulksign.integrations.webhook_events import EVENTS
from bulksign.mail.devmail import list_caught, mailbox_folder, read_caught
from bulksign.models import ApiKey, Team, User, utcnow
from bulksign.people.access_audit import recent_changes
from bulksign.people.auth import admin_required
from bulksign.people.teams import (
    TeamError,
    add_member,
    create_team,
    remove_member,
    set_require_approval,
    teams_with_members,
)
from bulksign.people.users import (
    ROLES,
    UserError,
    create_api_key,
    create_user,
    normalise_email,
    revoke_api_key,
    set_disabled,
    set_display_name,
    set_password,
    set_role,
)
from bulksign.signing.invitations import without_open_pixels

bp = Blueprint("admin", __name__, url_prefix="/admin")


@bp.before_request
@admin_required
def _admins_only():
    return None


def _mailbox() -> Path:
    return mailbox_folder(current_app.config["VAR_DIR"])


def _refused(endpoint: str, error: Exception | str) -> Response:
    """Undo what the refused change began and go back to ``endpoint``, saying what to correct."""
    db.session.rollback()
    flash(str(error), "error")
    return redirect(url_for(endpoint))


def _done(endpoint: str, message: str) -> Response:
    """Keep the change and go back to ``endpoint``, saying what it did."""
    db.session.commit()
    flash(message, "success")
    return redirect(url_for(endpoint))


#: Access changes shown on the users page; the teams page shows (and filters) more.
RECENT_ON_USERS_PAGE = 10


@bp.get("/")
def index():
    users = db.session.scalars(select(User).order_by(User.email)).all()
    keys = db.session.scalars(select(ApiKey).order_by(ApiKey.created_at.desc())).all()
    return render_template(
        "admin/index.html",
        users=users,
        keys=keys,
        teams=db.session.scalars(select(Team).order_by(Team.name)).all(),
        changes=recent_changes(db.session, limit=RECENT_ON_USERS_PAGE),
    )


def _user_or_404(user_id: int) -> User:
    return db.session.get(User, user_id) or abort(404)


@bp.post("/users")
def create_staff():
    try:
        user = create_user(
            db.session,
            email=request.form.get("email", ""),
            password=request.form.get("password", ""),
            role=request.form.get("role", "staff"),
            now=utcnow(),
            by=current_user,
            name=request.form.get("name"),
        )
        team_id = request.form.get("team_id", type=int)
        if team_id is not None:
            add_member(db.session, team=_team_or_404(team_id), user=user, by=current_user, now=utcnow())
    except UserError as exc:
        return _refused("admin.index", exc)
    return _done(
        "admin.index", _("Account %(email)s created. Give them the password; they can log in now.", email=user.email)
    )


@bp.post("/users/<int:user_id>/name")
def rename_user(user_id: int):
    user = _user_or_404(user_id)
    try:
        set_display_name(db.session, user=user, name=request.form.get("display_name", ""))
    except UserError as exc:
        return _refused("admin.index", exc)
    return _done("admin.index", _("%(email)s is now called “%(name)s”.", email=user.email, name=user.shown_name))


@bp.post("/users/<int:user_id>/password")
def reset_password(user_id: int):
    user = _user_or_404(user_id)
    password = request.form.get("password", "").strip() or secrets.token_urlsafe(12)
    try:
        set_password(db.session, user=user, password=password)
    except UserError as exc:
        return _refused("admin.index", exc)
    db.session.commit()
    # Shown once, on the next page only; it is not stored anywhere but as a hash.
    return render_template(
        "admin/shown_once.html",
        title=_("New password for %(email)s", email=user.email),
        secret=password,
        hint=_("Give it to the user; it is not shown again."),
    )


@bp.post("/users/<int:user_id>/disabled")
def toggle_disabled(user_id: int):
    user = _user_or_404(user_id)
    try:
        set_disabled(db.session, user=user, disabled=request.form.get("disabled") == "1", by=current_user)
    except UserError as exc:
        return _refused("admin.index", exc)
    return _done(
        "admin.index",
        _("%(email)s can no longer log in or use API keys.", email=user.email)
        if user.disabled
        else _("%(email)s can log in again.", email=user.email),
    )


@bp.post("/users/<int:user_id>/api-keys")
def new_api_key(user_id: int):
    user = _user_or_404(user_id)
    created = create_api_key(db.session, user=user, name=request.form.get("name", "").strip()[:100], now=utcnow())
    db.session.commit()
    return render_template(
        "admin/shown_once.html",
        title=_("API key for %(email)s", email=user.email),
        secret=created.secret,
        hint=_('Copy it now: it is shown only once. Send it as "Authorization: Bearer <key>".'),
    )


@bp.post("/api-keys/<int:key_id>/revoke")
def revoke_key(key_id: int):
    if revoke_api_key(db.session, key_id=key_id, now=utcnow()) is None:
        abort(404)
    return _done("admin.index", _("The API key is revoked; programs using it are refused from now on."))


@bp.get("/webhooks")
def webhooks():
    status = request.args.get("status", "")
    shown = DeliveryStatus(status) if status in tuple(DeliveryStatus) else None
    return render_template(
        "admin/webhooks.html",
        endpoints=webhooks_out.endpoints(db.session),
        deliveries=recent_deliveries(db.session, status=shown),
        events=EVENTS,
        status=status,
        teams=db.session.scalars(select(Team).order_by(Team.name)).all(),
    )


@bp.post("/webhooks")
def create_webhook():
    try:
        endpoint = webhooks_out.create_endpoint(
            db.session,
            url=request.form.get("url", ""),
            events=request.form.getlist("events"),
            user_id=current_user.id,
            team_id=request.form.get("team_id", type=int),
            now=utcnow(),
        )
    except webhooks_out.WebhookError as exc:
        return _refused("admin.webhooks", exc)
    db.session.commit()
    return render_template(
        "admin/shown_once.html",
        title=_("Signing secret for %(url)s", url=endpoint.url),
        secret=endpoint.secret,
        hint=_(
            "Each delivery carries X-Bulksign-Signature: sha256=HMAC-SHA256(secret, body). Keep the secret to check it."
        ),
        back=url_for("admin.webhooks"),
    )


@bp.post("/webhooks/<int:endpoint_id>/active")
def toggle_webhook(endpoint_id: int):
    endpoint = webhooks_out.set_active(
        db.session, endpoint_id=endpoint_id, active=request.form.get("active") == "1"
    ) or abort(404)
    return _done(
        "admin.webhooks",
        _("Endpoint enabled.") if endpoint.active else _("Endpoint paused: no new deliveries are made for it."),
    )


@bp.get("/mailbox")
def mailbox():
    q = request.args.get("q", "").strip()[:200]
    try:
        page = list_caught(_mailbox(), before=request.args.get("before") or None, q=q)
    except ValueError:
        abort(400, description=_("This page link is broken. Go back to the newest mail."))
    return render_template("admin/mailbox.html", page=page, q=q, paged=bool(request.args.get("before")))


@bp.get("/mailbox/<name>")
def caught_mail(name: str):
    message = read_caught(_mailbox(), name)
    if message is None:
        abort(404)
    html = message.get_body(preferencelist=("html",))
    plain = message.get_body(preferencelist=("plain",))
    attachments = [part.get_filename() for part in message.iter_attachments()]
    return render_template(
        "admin/caught_mail.html",
        message=message,
        name=name,
        # The admin reading a caught invitation must not load its pixel: that would be "Email opened" on the
        # recipient's audit certificate, at the admin's time.
        html=without_open_pixels(html=html.get_content(), secret=current_app.config["SECRET_KEY"]) if html else None,
        plain=plain.get_content() if plain else None,
        attachments=attachments,
    )


@bp.get("/teams")
def teams():
    # ?user= and ?team= narrow the access changes to one person or one team (links in the tables set them).
    user_email, team_name = request.args.get("user", "")[:254], request.args.get("team", "")[:100]
    return render_template(
        "admin/teams.html",
        rows=teams_with_members(db.session),
        changes=recent_changes(db.session, user_email=user_email, team_name=team_name),
        user_filter=user_email,
        team_filter=team_name,
        users=db.session.scalars(select(User).order_by(User.email)).all(),
        roles=ROLES,
    )


def _team_or_404(team_id: int) -> Team:
    return db.session.get(Team, team_id) or abort(404)


@bp.post("/teams")
def create_team_page():
    try:
        team = create_team(
            db.session,
            name=request.form.get("name", ""),
            now=utcnow(),
            require_approval=request.form.get("require_approval") == "1",
        )
    except TeamError as exc:
        return _refused("admin.teams", exc)
    return _done("admin.teams", _("Team %(name)s created. Add its members below.", name=team.name))


@bp.post("/teams/<int:team_id>/approval")
def team_approval(team_id: int):
    team = _team_or_404(team_id)
    required = request.form.get("require_approval") == "1"
    set_require_approval(db.session, team=team, required=required)
    return _done(
        "admin.teams",
        _("New batches of %(team)s now wait for a manager's or an admin's approval.", team=team.name)
        if required
        else _("New batches of %(team)s now go out without approval.", team=team.name),
    )


@bp.post("/teams/<int:team_id>/members")
def add_team_member(team_id: int):
    team = _team_or_404(team_id)
    email = normalise_email(request.form.get("email", ""))
    user = db.session.scalar(select(User).where(User.email == email))
    if user is None:
        return _refused("admin.teams", _("No user with the email %(email)s.", email=email))
    added = add_member(db.session, team=team, user=user, by=current_user, now=utcnow())
    return _done(
        "admin.teams",
        _("%(email)s is now in %(team)s.", email=user.email, team=team.name)
        if added
        else _("%(email)s was already in %(team)s.", email=user.email, team=team.name),
    )


@bp.post("/teams/<int:team_id>/members/<int:user_id>/remove")
def remove_team_member(team_id: int, user_id: int):
    team, user = _team_or_404(team_id), _user_or_404(user_id)
    remove_member(db.session, team=team, user=user, by=current_user, now=utcnow())
    return _done(
        "admin.teams",
        _(
            "%(email)s left %(team)s; they no longer see its batches and templates (their own stay theirs).",
            email=user.email,
            team=team.name,
        ),
    )


@bp.post("/users/<int:user_id>/role")
def change_role(user_id: int):
    user = _user_or_404(user_id)
    try:
        changed = set_role(db.session, user=user, role=request.form.get("role", ""), by=current_user, now=utcnow())
    except UserError as exc:
        return _refused("admin.teams", exc)
    return _done(
        "admin.teams",
        _("%(email)s is now %(role)s.", email=user.email, role=user.role)
        if changed
        else _("%(email)s was %(role)s already.", email=user.email, role=user.role),
    )

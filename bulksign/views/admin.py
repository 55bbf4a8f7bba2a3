"""Admin pages: overview, and the mails caught by the embedded SMTP catcher."""
from __future__ import annotations

from pathlib import Path

from flask import Blueprint, abort, current_app, render_template
from sqlalchemy import select

from ..auth import admin_required
from ..devmail import list_caught, read_caught
from ..extensions import db
from ..models import User

bp = Blueprint("admin", __name__, url_prefix="/admin")


@bp.before_request
@admin_required
def _admins_only():
    return None


def _mailbox() -> Path:
    return Path(current_app.config["VAR_DIR"]) / "mailbox"


@bp.get("/")
def index():
    users = db.session.scalars(select(User).order_by(User.email)).all()
    return render_template("admin/index.html", users=users)


@bp.get("/mailbox")
def mailbox():
    return render_template("admin/mailbox.html", mails=list_caught(_mailbox()))


@bp.get("/mailbox/<name>")
def caught_mail(name: str):
    message = read_caught(_mailbox(), name)
    if message is None:
        abort(404)
    html = message.get_body(preferencelist=("html",))
    plain = message.get_body(preferencelist=("plain",))
    attachments = [part.get_filename() for part in message.iter_attachments()]
    return render_template(
        "admin/caught_mail.html", message=message, name=name,
        html=html.get_content() if html else None, plain=plain.get_content() if plain else None,
        attachments=attachments,
    )

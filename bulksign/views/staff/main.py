"""The staff home page and the navigation every staff page shares."""

from __future__ import annotations

from flask import Blueprint, Flask, current_app, redirect, render_template, url_for
from flask_babel import lazy_gettext as _l
from flask_login import current_user
from sqlalchemy import select

from bulksign.batches import versions
from bulksign.batches.home import home
from bulksign.core.extensions import db
from bulksign.models import Batch, utcnow
from bulksign.people import access
from bulksign.people.auth import public
from bulksign.views._live import live_tag, tagged, unchanged

bp = Blueprint("main", __name__)

#: (endpoint, label, admins only). Links whose endpoint is not registered are left out.
NAVIGATION = (
    ("main.dashboard", _l("Dashboard"), False),
    ("batches.index", _l("Batches"), False),
    ("doc_templates.index", _l("Templates"), False),
    ("admin.index", _l("Admin"), True),
    ("rq_dashboard.queues_overview", _l("Queues"), True),
)


#: Headings of the attention tiles on the home page.
ATTENTION_LABELS = {
    "approval": _l("waiting for your approval"),
    "failed": _l("failed"),
    "bounced": _l("bounced"),
    "expiring": _l("expire within 24 hours"),
    "declined": _l("declined"),
}


@bp.get("/")
def dashboard():
    visible = select(Batch.id).where(access.batch_filter(current_user))
    return render_template(
        "main/dashboard.html",
        home=home(db.session, now=utcnow(), batch_ids=visible, user=current_user),
        attention_labels=ATTENTION_LABELS,
        can_create="uploads.new" in current_app.view_functions,
    )


@bp.get("/home/live")
def live():
    """The home page's counts and bars, polled: 304 while the batches it counts stand (and within the minute, which
    "expire within 24 hours" reads)."""
    now = utcnow()
    visible = select(Batch.id).where(access.batch_filter(current_user))
    tag = live_tag(*versions.fingerprint(db.session, batch_ids=visible), now.strftime("%Y%m%d%H%M"))
    if (same := unchanged(tag)) is not None:
        return same
    html = render_template(
        "main/_home.html",
        home=home(db.session, now=now, batch_ids=visible),
        attention_labels=ATTENTION_LABELS,
        etag=tag,
    )
    return tagged(html, tag)


@bp.get("/favicon.ico")
@public
def favicon():
    # Browsers ask for /favicon.ico before reading the page's <link rel="icon">: no 404 in every log.
    return redirect(url_for("static", filename="favicon.svg"), 301)


def init_app(app: Flask) -> None:
    @app.context_processor
    def _navigation():
        def nav_links():
            is_admin = current_user.is_authenticated and current_user.is_admin
            return [
                (endpoint, label)
                for endpoint, label, admin_only in NAVIGATION
                if endpoint in current_app.view_functions and (is_admin or not admin_only)
            ]

        return {"nav_links": nav_links}

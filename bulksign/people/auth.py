"""Who may see what. Default deny: every endpoint needs a logged-in user unless marked ``@public``.

API blueprints (names starting with ``api``) authenticate with ``Authorization: Bearer <key>``
instead of the session cookie, and answer JSON.
"""

from __future__ import annotations

import hmac
from functools import wraps

from flask import Flask, abort, current_app, g, jsonify, redirect, request, url_for
from flask_babel import lazy_gettext as _l
from flask_login import current_user

from bulksign.core.extensions import db, login_manager
from bulksign.models import User, utcnow
from bulksign.people.users import api_key_for_secret

#: Staff pages: scripts and styles from this site only (the vendored htmx, dashboard.js, staff.js), no inline
#: script; inline style attributes stay (the progress bar's widths, htmx's indicator style).
STAFF_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "object-src 'none'; form-action 'self'; base-uri 'none'; frame-ancestors 'self'"
)


def public(view):
    """Mark a view as open to anonymous visitors (login, signing, verification, tracking, health)."""
    view._bulksign_public = True
    return view


def admin_required(view):
    """Only admins; staff get 403, anonymous visitors the login page."""

    @wraps(view)
    def wrapped(*args, **kwargs):
        if not current_user.is_authenticated:
            return login_manager.unauthorized()
        if not current_user.is_admin:
            abort(403)
        return view(*args, **kwargs)

    return wrapped


#: ``app.extensions`` key: names of the blueprints the factory registered with ``api=True``.
API_BLUEPRINTS = "bulksign.api_blueprints"


def is_api_request() -> bool:
    """Whether the request is for an API blueprint: bearer key authentication, JSON errors."""
    # By path too: a URL no route matches (``/api/v1/batches/-1``) has no blueprint, and still wants JSON.
    return request.blueprint in current_app.extensions[API_BLUEPRINTS] or request.path.startswith("/api/")


def _authenticate_api() -> None:
    header = request.headers.get("Authorization", "")
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        abort(401)

    key = api_key_for_secret(db.session, secret=secret.strip(), now=utcnow())
    if key is None:
        abort(401)
    db.session.commit()
    g.api_user = user = key.user
    # Idempotency keys are kept per API key, so the key is remembered along with its user.
    g.api_key_id = key.id
    # current_user for this request only. login_user() would write the session: every API answer carried a
    # staff login cookie that kept working in the web UI after the key was revoked.
    g._login_user = user


def init_app(app: Flask) -> None:
    login_manager.init_app(app)
    login_manager.login_view = "auth.login"
    login_manager.login_message = _l("Please log in to see this page.")
    login_manager.session_protection = "strong"

    @login_manager.user_loader
    def load_user(user_id: str) -> User | None:
        raw_id = user_id.partition(":")[0]
        user = db.session.get(User, int(raw_id)) if raw_id.isdigit() else None
        # A session made before a password change names the old password's stamp: it is over.
        return user if user is not None and hmac.compare_digest(user.get_id(), user_id) else None

    @app.before_request
    def _default_deny():
        if request.endpoint is None or request.endpoint == "static":
            return None
        view = current_app.view_functions.get(request.endpoint)
        if getattr(view, "_bulksign_public", False):
            return None
        if is_api_request():
            _authenticate_api()
            return None
        if not current_user.is_authenticated:
            if request.headers.get("HX-Request"):
                # A polling fragment after the session ended: send the whole page to the login.
                response = jsonify(error="login required")
                response.status_code = 401
                response.headers["HX-Redirect"] = url_for("auth.login", next=request.full_path)
                return response
            return redirect(url_for("auth.login", next=request.full_path))
        return None

    @app.after_request
    def _security_headers(response):
        # Staff pages carry one-click actions (cancel a batch, revoke a key): no other site may frame them
        # (clickjacking). Same-origin framing stays: the template page shows its PDF preview in an iframe.
        response.headers.setdefault("X-Frame-Options", "SAMEORIGIN")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        # Recipient pages set their own, stricter policy first, rq-dashboard's pages their own looser one.
        response.headers.setdefault("Content-Security-Policy", STAFF_CSP)
        if current_app.config.get("HSTS"):
            response.headers.setdefault("Strict-Transport-Security", current_app.config["HSTS"])
        view = current_app.view_functions.get(request.endpoint) if request.endpoint not in (None, "static") else None
        if view is not None and not getattr(view, "_bulksign_public", False):
            # Staff pages and API answers show recipients' names, addresses and data: no cache keeps a copy.
            response.headers["Cache-Control"] = "no-store"
            response.headers.pop("Expires", None)
        return response

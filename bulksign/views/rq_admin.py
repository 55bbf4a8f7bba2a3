"""rq-dashboard at /admin/rq, for admins only (its pages, static files and JSON alike)."""
from __future__ import annotations

from flask import Flask, abort, request
from flask_login import current_user


def init_app(app: Flask) -> None:
    import rq_dashboard
    from rq_dashboard.web import setup_rq_connection

    from ..extensions import csrf

    app.register_blueprint(rq_dashboard.blueprint, url_prefix="/admin/rq")
    # rq-dashboard 0.9 no longer connects on its first request: connect it here.
    setup_rq_connection(app)
    # Its buttons post without a CSRF token; only admins reach it (checked below).
    csrf.exempt(rq_dashboard.blueprint)

    @app.before_request
    def _rq_dashboard_admins_only():
        # Runs after the default-deny hook, which already sent anonymous visitors to the login page.
        if request.blueprint == "rq_dashboard" and not (current_user.is_authenticated and current_user.is_admin):
            abort(403)
        return None

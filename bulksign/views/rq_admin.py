"""rq-dashboard at /admin/rq, for admins only (its pages, static files and JSON alike)."""
from __future__ import annotations

from urllib.parse import urlsplit

from flask import Flask, abort, request
from flask_login import current_user


def init_app(app: Flask) -> None:
    import rq_dashboard
    from rq_dashboard.web import setup_rq_connection

    from ..extensions import csrf
    from ..redis_client import connect

    app.register_blueprint(rq_dashboard.blueprint, url_prefix="/admin/rq")
    # rq-dashboard 0.9 no longer connects on its first request: connect it here.
    setup_rq_connection(app)
    # Then it uses the app's own factory, so it follows a Sentinel failover like everything else.
    app.redis_conn = connect(app.config["REDIS_URL"])
    # Its buttons post without a CSRF token; only admins reach it (checked below).
    csrf.exempt(rq_dashboard.blueprint)

    @app.before_request
    def _rq_dashboard_admins_only():
        # Runs after the default-deny hook, which already sent anonymous visitors to the login page.
        if request.blueprint != "rq_dashboard":
            return None
        if not (current_user.is_authenticated and current_user.is_admin):
            abort(403)
        # Without a CSRF token, a cross-site request is told apart by its Origin (browsers send it on every
        # POST); "requeue all" also answers GET, which a mere link from another site could trigger.
        # Hosts only: behind a TLS-terminating proxy the scheme the app sees is not the browser's.
        origin = request.headers.get("Origin")
        if request.method not in ("GET", "HEAD") and origin is not None and urlsplit(origin).netloc != request.host:
            abort(403)
        if request.endpoint == "rq_dashboard.requeue_all" and request.method != "POST":
            abort(405)
        return None

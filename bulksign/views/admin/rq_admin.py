"""rq-dashboard at /admin/rq, for admins only (its pages, static files and JSON alike), under a policy of its own."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Flask, abort, current_app, request
from flask_login import current_user

from bulksign.core.extensions import csrf, get_redis

#: rq-dashboard's pages build their tables with underscore's ``_.template``, which compiles with ``new Function``
#: (eval), from inline scripts: only its pages allow both, and still load nothing from other sites. Every other
#: page keeps the staff policy (``people.auth.STAFF_CSP``), which forbids them.
RQ_DASHBOARD_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; object-src 'none'; form-action 'self'; base-uri 'none'; frame-ancestors 'self'"
)


def init_app(app: Flask) -> None:
    import rq_dashboard
    from rq_dashboard.web import setup_rq_connection

    app.register_blueprint(rq_dashboard.blueprint, url_prefix="/admin/rq")
    # rq-dashboard 0.9 no longer connects on its first request: connect it here.
    setup_rq_connection(app)
    # Then it uses the app's own connection, so it follows a Sentinel failover like everything else.
    app.redis_conn = get_redis(app)  # type: ignore[attr-defined]  # rq-dashboard's own attribute
    # Its buttons post without a CSRF token; only admins reach it (checked below).
    csrf.exempt(rq_dashboard.blueprint)
    # A blueprint's after-request hooks run before the app's, whose security headers only set what is unset.
    app.after_request_funcs.setdefault(rq_dashboard.blueprint.name, []).append(_own_policy)

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
        _names_something(request.view_args or {})
        return None


def _own_policy(response):
    response.headers["Content-Security-Policy"] = RQ_DASHBOARD_CSP
    return response


#: The registries rq-dashboard can list; any other name in its URLs crashes it.
REGISTRIES = frozenset({"queued", "failed", "deferred", "started", "finished", "scheduled", "canceled"})


def _names_something(args: dict) -> None:
    """404 for an rq-dashboard URL naming an instance, queue, registry, job or page that is not there
    (rq-dashboard itself answers those with a 500)."""
    from rq import Queue
    from rq.job import Job

    instances = current_app.config.get("RQ_DASHBOARD_REDIS_URL")
    count = 1 if isinstance(instances, str) else len(instances or ())
    redis = get_redis()
    if "instance_number" in args and not 0 <= args["instance_number"] < count:
        abort(404)
    if args.get("registry_name") is not None and args["registry_name"] not in REGISTRIES:
        abort(404)
    if args.get("order") is not None and args["order"] not in ("asc", "dsc"):
        abort(404)
    for number in ("per_page", "page"):
        if number in args and not (str(args[number]).isdigit() and 0 < int(args[number]) <= 10_000):
            abort(404)
    if args.get("queue_name") is not None and args["queue_name"] not in {q.name for q in Queue.all(connection=redis)}:
        abort(404)
    if "job_id" in args and not Job.exists(args["job_id"], connection=redis):
        abort(404)

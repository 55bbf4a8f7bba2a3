"""Bulksign: send thousands of personalised documents for e-signature and follow each to the end."""
from __future__ import annotations

from types import ModuleType

from flask import Flask

from bulksign.core.config import BASE_DIR, load_config

#: What error reports name as the release (``bulksign@<version>``).
__version__ = "1.0.0"


def create_app(config: dict | None = None) -> Flask:
    """Build the app: settings from the environment (then ``config``), extensions, blueprints, CLI."""
    app = Flask(
        __name__,
        static_folder=str(BASE_DIR / "static"),
        template_folder=str(BASE_DIR / "templates"),
    )
    app.config.update(load_config(config))

    from bulksign.core import error_tracking, logs
    from bulksign.ops import telemetry
    logs.init_app(app)
    error_tracking.init_app(app)
    telemetry.init_app(app)

    from bulksign.people import auth, users
    from bulksign.views import errors
    from bulksign.core import i18n
    from bulksign.core.extensions import csrf, db, limiter, mail, migrate

    db.init_app(app)
    migrate.init_app(app, db, directory=str(BASE_DIR / "migrations"), render_as_batch=True)
    mail.init_app(app)
    errors.guard_forms(app)
    errors.guard_json(app)
    csrf.init_app(app)
    limiter.init_app(app)
    i18n.init_app(app)
    auth.init_app(app)
    users.configure(method=app.config["PASSWORD_HASH_METHOD"])

    _register_blueprints(app)

    from bulksign import cli
    from bulksign.work import queues
    from bulksign.core import sqlite
    # Every process (web, worker, scheduler, CLI): a job renamed or moved fails here, not when its job runs.
    queues.load_jobs()
    errors.init_app(app)
    cli.init_app(app)
    sqlite.init_app(app)
    return app


def _register_blueprints(app: Flask) -> None:
    """Every view module, listed: ``api=True`` is the security decision (bearer key instead of session, no CSRF)."""
    from bulksign.views.admin import pages as admin, metrics, rq_admin, suppressions
    from bulksign.views.api import common as api, batch_actions as api_batch_actions, dashboard as api_dashboard, docs as api_docs, reminders as api_reminders, suppressions as api_suppressions, templates as api_templates, uploads as api_uploads
    from bulksign.views.staff import auth, batch_access, dashboard, doc_templates, main, reminders, uploads
    from bulksign.views import brand, health, reach, webhooks_in as webhooks
    from bulksign.views.recipient import signing, tracking, verify
    from bulksign.people.auth import API_BLUEPRINTS

    app.extensions[API_BLUEPRINTS] = set()
    _register(app, admin)
    _register(app, api, api=True)
    _register(app, api_batch_actions, api=True)
    _register(app, api_dashboard, api=True)
    _register(app, api_docs, api=True)
    _register(app, api_reminders, api=True)
    _register(app, api_suppressions, api=True)
    _register(app, api_templates, api=True)
    _register(app, api_uploads, api=True)
    _register(app, auth)
    _register(app, batch_access)
    _register(app, brand)
    _register(app, dashboard)
    _register(app, doc_templates)
    _register(app, health)
    _register(app, main)
    _register(app, metrics)
    _register(app, reach)
    _register(app, reminders)
    _register(app, rq_admin)
    _register(app, signing)
    _register(app, suppressions)
    _register(app, tracking)
    _register(app, uploads)
    _register(app, verify)
    _register(app, webhooks)


def _register(app: Flask, module: ModuleType, *, api: bool = False) -> None:
    """Register the module's ``bp`` (if any) and run its ``init_app`` (if any)."""
    from bulksign.people.auth import API_BLUEPRINTS
    from bulksign.core.extensions import csrf
    from bulksign.views.api.common import limit_per_key

    if hasattr(module, "bp"):
        app.register_blueprint(module.bp)
        if api:
            # API calls carry a bearer key, not an ambient cookie: CSRF cannot apply to them.
            app.extensions[API_BLUEPRINTS].add(module.bp.name)
            csrf.exempt(module.bp)
            limit_per_key(module.bp)
    if hasattr(module, "init_app"):
        module.init_app(app)

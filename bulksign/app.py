"""The app factory: settings, extensions, every blueprint (the security decision for each), the CLI, error pages.

The top of the layers: it imports the views, the CLI and the job registry, which import the domain packages.
"""

from __future__ import annotations

from types import ModuleType

from flask import Flask

from bulksign import cli
from bulksign.core import error_tracking, i18n, logs, sqlite
from bulksign.core.config import BASE_DIR, load_config
from bulksign.core.extensions import csrf, db, limiter, mail, migrate
from bulksign.mail import dkim_signing
from bulksign.ops import telemetry
from bulksign.people import auth, users
from bulksign.people.auth import API_BLUEPRINTS
from bulksign.views import brand, confirm, errors, health, reach, webhooks_in, word_converter
from bulksign.views.admin import metrics, privacy, rq_admin, suppressions
from bulksign.views.admin import pages as admin
from bulksign.views.api import approval as api_approval
from bulksign.views.api import batch_actions, common, docs
from bulksign.views.api import corrections as api_corrections
from bulksign.views.api import dashboard as api_dashboard
from bulksign.views.api import evidence as api_evidence
from bulksign.views.api import exports as api_exports
from bulksign.views.api import privacy as api_privacy
from bulksign.views.api import reminders as api_reminders
from bulksign.views.api import requests as api_requests
from bulksign.views.api import suppressions as api_suppressions
from bulksign.views.api import templates as api_templates
from bulksign.views.api import uploads as api_uploads
from bulksign.views.api.common import limit_per_key
from bulksign.views.recipient import (
    countersign,
    recipient_headers,
    short_links,
    signing,
    signing_codes,
    signing_documents,
    tracking,
    verify,
)
from bulksign.views.staff import (
    account,
    approval,
    batch_access,
    dashboard,
    doc_templates,
    evidence,
    main,
    party_preview,
    reminders,
    row_preview,
    uploads,
    word_check,
)
from bulksign.views.staff import auth as staff_auth
from bulksign.work import queues


def create_app(config: dict | None = None) -> Flask:
    """Build the app: settings from the environment (then ``config``), extensions, blueprints, CLI."""
    app = Flask(
        __name__,
        static_folder=str(BASE_DIR / "static"),
        template_folder=str(BASE_DIR / "templates"),
    )
    app.config.update(load_config(config))
    dkim_signing.init_app(app)

    logs.init_app(app)
    error_tracking.init_app(app)
    telemetry.init_app(app)

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

    # Every process (web, worker, scheduler, CLI): a job renamed or moved fails here, not when its job runs.
    queues.load_jobs()
    errors.init_app(app)
    cli.init_app(app)
    sqlite.init_app(app)
    return app


#: Every view module with a blueprint or an ``init_app``, by audience.
STAFF_VIEWS = (
    account,
    approval,
    staff_auth,
    batch_access,
    dashboard,
    doc_templates,
    evidence,
    main,
    reminders,
    row_preview,
    uploads,
    party_preview,
    word_check,
)
#: ``signing_codes`` and ``signing_documents`` add their routes to ``signing``'s blueprint.
RECIPIENT_VIEWS = (
    recipient_headers,
    signing,
    signing_codes,
    signing_documents,
    countersign,
    short_links,
    tracking,
    verify,
)
ADMIN_VIEWS = (admin, metrics, privacy, rq_admin, suppressions)
SHARED_VIEWS = (brand, confirm, health, reach, webhooks_in, word_converter)
#: The API's: ``api=True`` is the security decision (a bearer key instead of the session, no CSRF).
API_VIEWS = (
    common,
    api_approval,
    api_corrections,
    api_dashboard,
    api_evidence,
    api_exports,
    api_privacy,
    api_reminders,
    api_requests,
    api_suppressions,
    api_templates,
    api_uploads,
    batch_actions,
    docs,
)


def _register_blueprints(app: Flask) -> None:
    """Every view module, listed above; the API's with ``api=True``."""
    app.extensions[API_BLUEPRINTS] = set()
    for module in (*STAFF_VIEWS, *RECIPIENT_VIEWS, *ADMIN_VIEWS, *SHARED_VIEWS):
        _register(app, module)
    for module in API_VIEWS:
        _register(app, module, api=True)


def _register(app: Flask, module: ModuleType, *, api: bool = False) -> None:
    """Register the module's ``bp`` (if any) and run its ``init_app`` (if any)."""
    if hasattr(module, "bp"):
        app.register_blueprint(module.bp)
        if api:
            # API calls carry a bearer key, not an ambient cookie: CSRF cannot apply to them.
            app.extensions[API_BLUEPRINTS].add(module.bp.name)
            csrf.exempt(module.bp)
            limit_per_key(module.bp)
    if hasattr(module, "init_app"):
        module.init_app(app)

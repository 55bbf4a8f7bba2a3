"""Bulksign: send thousands of personalised documents for e-signature and follow each to the end."""
from __future__ import annotations

import importlib
import pkgutil

from flask import Flask

from .config import BASE_DIR, load_config

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

    from . import error_tracking, logs, telemetry
    logs.init_app(app)
    error_tracking.init_app(app)
    telemetry.init_app(app)

    from . import auth, errors, i18n, users
    from .extensions import csrf, db, limiter, mail, migrate

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

    from . import cli, sqlite
    errors.init_app(app)
    cli.init_app(app)
    sqlite.init_app(app)
    return app


def _register_blueprints(app: Flask) -> None:
    """Every module in ``bulksign.views`` that defines ``bp`` is registered (and may define ``init_app``)."""
    from . import views
    from .extensions import csrf
    from .views.api import limit_per_key

    for info in sorted(pkgutil.iter_modules(views.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{views.__name__}.{info.name}")
        if hasattr(module, "bp"):
            app.register_blueprint(module.bp)
            # API calls carry a bearer key, not an ambient cookie: CSRF cannot apply to them.
            if module.bp.name.startswith("api"):
                csrf.exempt(module.bp)
                limit_per_key(module.bp)
        if hasattr(module, "init_app"):
            module.init_app(app)

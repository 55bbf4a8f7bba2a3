"""Extension objects, created unbound and attached to the app in ``create_app``."""

from __future__ import annotations

import time

from flask import Flask, current_app
from flask_babel import Babel
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_login import LoginManager
from flask_mail import Mail
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect
from redis import Redis
from sqlalchemy import MetaData
from sqlalchemy.orm import Session

from bulksign.core.redis_client import connect

# Deterministic constraint names so Alembic migrations read the same on PostgreSQL and SQLite.
naming_convention = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class _Database(SQLAlchemy):
    """Flask-SQLAlchemy, its ``session`` typed as the ``Session`` it stands for: the scoped session passes every
    call to the request's own session, and the domain's functions take a ``Session``."""

    session: Session  # type: ignore[assignment]


db = _Database(metadata=MetaData(naming_convention=naming_convention))
migrate = Migrate()
login_manager = LoginManager()
mail = Mail()
csrf = CSRFProtect()
limiter = Limiter(key_func=get_remote_address, default_limits=[])


def seconds_until_limit_resets() -> int:
    """For a 429's ``Retry-After``: when the limit this request hit lets it through again (at least 1 s)."""
    current = limiter.current_limit
    return max(1, int(current.reset_at - time.time())) if current else 60


babel = Babel()


def get_redis(app: Flask | None = None) -> Redis:
    """The app's Redis connection (one pool per process; a plain server or the Sentinel master), with timeouts.

    The only caller of ``redis_client.connect``: queues, throttle, telemetry and rq-dashboard share its pool.
    ``app`` is for set-up code that runs outside an app context; otherwise the current app's.
    """
    app = app or current_app
    if "bulksign_redis" not in app.extensions:
        app.extensions["bulksign_redis"] = connect(app.config["REDIS_URL"])
    return app.extensions["bulksign_redis"]

"""SQLite as the embedded default: WAL and a busy timeout so web, worker and scheduler share one file, and
``lower()`` folded as Python folds, as on PostgreSQL. More in docs/architecture/core.md."""

from __future__ import annotations

from flask import Flask
from sqlalchemy import event
from sqlalchemy.engine import Engine

from bulksign.core.extensions import db


def init_app(app: Flask) -> None:
    if not app.config["SQLALCHEMY_DATABASE_URI"].startswith("sqlite"):
        return

    with app.app_context():
        engine: Engine = db.engine

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection, _record):
        # Deterministic: the indexes on lower(email) are built with it (a migration rebuilt the older ones).
        dbapi_connection.create_function("lower", 1, _lower, deterministic=True)
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=10000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()


def _lower(value):
    return value.lower() if isinstance(value, str) else value

"""SQLite as the embedded default: WAL and a busy timeout so web, worker and scheduler share one file."""

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
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=10000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

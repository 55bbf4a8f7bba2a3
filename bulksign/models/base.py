"""What every table module shares: the big-table id type, ``utcnow`` and the UTC timestamp column type."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

from sqlalchemy import BigInteger, CursorResult, DateTime, Executable, Integer, TypeDecorator
from sqlalchemy.orm import Session

from bulksign.core.extensions import db

if TYPE_CHECKING:
    from flask_sqlalchemy.model import Model as _FlaskModel
    from sqlalchemy.orm import DeclarativeBase

    class Model(_FlaskModel, DeclarativeBase):
        """What the type checker sees of ``db.Model``: SQLAlchemy's typed declarative base, with Flask-SQLAlchemy's
        ``query``; at run time it is ``db.Model`` itself."""

else:
    Model = db.Model

# SQLite only auto-increments INTEGER PRIMARY KEY; PostgreSQL gets BIGINT for the big tables.
BigId = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    return datetime.now(UTC)


def rows_changed(session: Session, statement: Executable) -> int:
    """How many rows an UPDATE or DELETE changed: what a compare-and-set writer reads to know whether it won."""
    return cast(CursorResult, session.execute(statement)).rowcount


class UTCDateTime(TypeDecorator):
    """Timestamps stored as UTC and always read back timezone-aware, on PostgreSQL and SQLite."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is not None:
            if value.tzinfo is None:
                raise ValueError("naive datetime given; pass an aware UTC time")
            value = value.astimezone(UTC)
        return value

    def process_result_value(self, value, dialect):
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value

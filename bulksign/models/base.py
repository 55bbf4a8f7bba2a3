"""What every table module shares: the big-table id type, ``utcnow`` and the UTC timestamp column type."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import BigInteger

from bulksign.core.extensions import db

# SQLite only auto-increments INTEGER PRIMARY KEY; PostgreSQL gets BIGINT for the big tables.
BigId = BigInteger().with_variant(db.Integer(), "sqlite")


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(db.TypeDecorator):
    """Timestamps stored as UTC and always read back timezone-aware, on PostgreSQL and SQLite."""

    impl = db.DateTime(timezone=True)
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

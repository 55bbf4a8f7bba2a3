"""When the scheduler last polled: written on every poll, read by ``/metrics`` (an alert fires when it stops)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

from redis import Redis

KEY = "bulksign:scheduler:last_tick"


def record_tick(redis: Redis, *, now: datetime) -> None:
    """Note that the scheduler polled at ``now``."""
    redis.set(KEY, repr(now.timestamp()))


def last_tick(redis: Redis) -> datetime | None:
    """When the scheduler last polled, or None if it never did (since Redis last lost its data)."""
    raw = cast("bytes | None", redis.get(KEY))
    return datetime.fromtimestamp(float(raw), UTC) if raw else None

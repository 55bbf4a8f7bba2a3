"""Whether the mail server can be reached: noted by the mail workers, read by ``/readyz``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

from redis import Redis

KEY = "bulksign:mail_server:down"
#: A note that no failed connection refreshed for this long is dropped.
FORGET_AFTER = timedelta(minutes=15)
#: ``/readyz`` reports an outage once it has lasted this long (a restart of the server is not one).
TOO_LONG = timedelta(minutes=5)


@dataclass(frozen=True)
class Outage:
    #: The first failed connection of the outage.
    since: datetime
    #: The last failure, in words.
    reason: str


def record_down(redis: Redis, *, now: datetime, reason: str) -> None:
    """Note a connection that could not be opened (the outage's start is kept)."""
    with redis.pipeline(transaction=True) as pipe:
        pipe.hsetnx(KEY, "since", repr(now.timestamp()))
        pipe.hset(KEY, "reason", reason)
        pipe.expire(KEY, int(FORGET_AFTER.total_seconds()))
        pipe.execute()


def record_reached(redis: Redis) -> None:
    """A connection opened: whatever outage was noted is over."""
    redis.delete(KEY)


def current_outage(redis: Redis) -> Outage | None:
    """The outage noted by the mail workers, if any."""
    note = cast(dict[bytes, bytes], redis.hgetall(KEY))
    if not note or b"since" not in note:
        return None
    return Outage(
        since=datetime.fromtimestamp(float(note[b"since"]), UTC),
        reason=note.get(b"reason", b"").decode("utf-8", "replace"),
    )

"""Times as people read them: in the batch's time zone and language (recipients), or the viewer's language."""

from __future__ import annotations

import logging
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from babel.dates import format_datetime

from bulksign.core.logs import log

logger = logging.getLogger(__name__)


def zone_of(batch) -> ZoneInfo:
    """The batch's time zone; UTC (logged) when the stored name is unknown to this machine."""
    try:
        return ZoneInfo(batch.timezone or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        log(logger, logging.WARNING, "unknown batch time zone, using UTC", batch_id=batch.id, timezone=batch.timezone)
        return ZoneInfo("UTC")


def batch_time(at: datetime | None, batch, *, locale: str | None = None, with_time: bool = True) -> str:
    """``at`` in the batch's zone and (by default) language, e.g. "10 декабря 2026 г., 17:00 (Europe/Moscow)"."""
    if at is None:
        return ""
    zone = zone_of(batch)
    text = format_datetime(
        at, "d MMMM y, HH:mm" if with_time else "d MMMM y", tzinfo=zone, locale=locale or batch.language or "en"
    )
    return f"{text} ({zone.key})" if with_time else text


def zone_names() -> list[str]:
    """Every IANA zone name this machine knows, sorted, for the time-zone picker (UTC first)."""
    names = sorted(
        n for n in available_timezones() if "/" in n and not n.startswith(("Etc/", "SystemV/", "posix/", "right/"))
    )
    return ["UTC", *names]

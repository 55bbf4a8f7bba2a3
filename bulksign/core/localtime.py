"""Times as people read them: in the batch's time zone and language (recipients), or the viewer's language."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from babel.core import get_global
from babel.dates import format_datetime, get_timezone_location

from bulksign.core.logs import log
from bulksign.core.messages import N_

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


#: The time-zone picker's groups, in its order: the first part of a zone's name → the group's label.
ZONE_REGIONS = {
    "Europe": N_("Europe"),
    "America": N_("America"),
    "Asia": N_("Asia"),
    "Africa": N_("Africa"),
    "Australia": N_("Australia"),
    "Pacific": N_("Pacific"),
    "Atlantic": N_("Atlantic"),
    "Indian": N_("Indian Ocean"),
    "Antarctica": N_("Antarctica"),
    "Arctic": N_("Arctic"),
}


@functools.cache
def canonical_zones() -> tuple[str, ...]:
    """The zones people live in, one name each: CLDR's canonical zones (Babel's data) that this machine knows, in the
    picker's regions, so without the backward aliases (``US/Eastern``, ``Asia/Calcutta``, ``Europe/Kiev``), the
    ``Etc/`` offsets and the duplicates that make up a third of ``available_timezones()``."""
    known = available_timezones()
    return tuple(sorted(z for z in get_global("zone_territories") if z in known and z.split("/")[0] in ZONE_REGIONS))


def canonical_zone(name: str) -> str:
    """The picker's name for the zone ``name`` is another name of ("US/Eastern" → "America/New_York"); UTC stays UTC."""
    if name in ("UTC", "Etc/UTC"):
        return "UTC"
    return get_global("zone_aliases").get(name, name)


@dataclass(frozen=True)
class ZoneGroup:
    label: N_
    #: (zone name, its city in the reader's language), by city.
    zones: tuple[tuple[str, str], ...]


@functools.cache
def zone_groups(*, locale: str) -> tuple[ZoneGroup, ...]:
    """The canonical zones by region for the time-zone picker, each named by its city in ``locale`` ("Берлин");
    UTC, in no region, is the picker's own first choice."""
    by_region: dict[str, list[tuple[str, str]]] = {region: [] for region in ZONE_REGIONS}
    for zone in canonical_zones():
        by_region[zone.split("/")[0]].append((zone, get_timezone_location(zone, locale=locale, return_city=True)))
    return tuple(
        ZoneGroup(ZONE_REGIONS[region], tuple(sorted(zones, key=lambda z: z[1].casefold())))
        for region, zones in by_region.items()
        if zones
    )

"""Reachability of the database and Redis, for /healthz and for a clear message at start."""

from __future__ import annotations

from dataclasses import dataclass

from redis import Redis
from sqlalchemy import text
from sqlalchemy.engine import Engine


@dataclass(frozen=True)
class ServiceReport:
    #: name → "ok" or the reason it failed, e.g. {"database": "ok", "redis": "connection refused"}.
    checks: dict[str, str]

    @property
    def ok(self) -> bool:
        return all(v == "ok" for v in self.checks.values())

    def problems(self) -> list[str]:
        variable = {"database": "DATABASE_URL", "redis": "REDIS_URL"}
        return [
            f"{variable[name]}: {name} is not reachable ({reason})"
            for name, reason in self.checks.items()
            if reason != "ok"
        ]


def check_services(*, db_engine: Engine, redis: Redis) -> ServiceReport:
    """Ask the database and Redis one trivial question each."""
    checks: dict[str, str] = {}
    try:
        with db_engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:  # any driver error means unreachable for this purpose
        checks["database"] = _reason(exc)
    try:
        redis.ping()
        checks["redis"] = "ok"
    except Exception as exc:
        checks["redis"] = _reason(exc)
    return ServiceReport(checks=checks)


def _reason(exc: Exception) -> str:
    first_line = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return (first_line[0] if first_line else type(exc).__name__)[:200]

"""The global mail throttle: one limiter in Redis shared by every worker on every host."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from redis import Redis

KEY = "bulksign:throttle:mail"

# KEYS[1]: the theoretical arrival time (µs). ARGV: interval µs, now µs or "" for Redis TIME.
_GCRA = """
local interval = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat > now then
  return {0, tat - now, now}
end
-- The key outlives its use by a minute (a passed test clock may run slower than real time).
redis.call('SET', KEYS[1], now + interval, 'PX', math.ceil(interval / 1000) + 60000)
return {1, 0, now}
"""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    #: How long to wait before asking again (0 when allowed).
    wait_seconds: float
    #: The limiter's clock when it decided (µs); what a check of the rate must count by.
    at_us: int = 0


class MailThrottle:
    """At most ``rate`` sends in any ``window_seconds`` (``rate`` 0: no limit)."""

    def __init__(self, redis: Redis, *, rate: int, window_seconds: float = 60, key: str = KEY):
        self.redis, self.rate, self.key = redis, rate, key
        # Rounded up: rounding down would let one extra send into a window.
        self.interval_us = math.ceil(window_seconds * 1_000_000 / rate) if rate else 0
        self._script = redis.register_script(_GCRA)

    def try_acquire(self, *, now_us: int | None = None) -> Decision:
        """Claim a send slot now, or say how long until the next one; ``now_us`` replaces Redis's clock in tests."""
        if not self.rate:
            return Decision(True, 0.0)
        allowed, wait_us, at_us = self._script(
            keys=[self.key], args=[self.interval_us, "" if now_us is None else now_us]
        )
        return Decision(bool(allowed), int(wait_us) / 1_000_000, int(at_us))

    def acquire(
        self,
        *,
        max_wait_seconds: float,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        stop: threading.Event | None = None,
    ) -> Decision:
        """Wait (sleeping) for a slot for at most ``max_wait_seconds``; the last decision says whether one was won.

        ``stop``: once set, the wait ends at once without a slot (the process is shutting down).
        """
        deadline = clock() + max_wait_seconds
        while True:
            decision = self.try_acquire()
            remaining = deadline - clock()
            if decision.allowed or remaining <= 0 or (stop is not None and stop.is_set()):
                return decision
            if stop is not None:
                stop.wait(min(decision.wait_seconds, remaining))
            else:
                sleep(min(decision.wait_seconds, remaining))

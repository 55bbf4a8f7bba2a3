"""The global mail throttle under contention: the most sends in any window, and the mean rate.

Several senders (threads with their own Redis connections, as separate workers would have)
ask for slots as fast as they can; every granted slot is timed by the limiter's own clock.
Full run: R = 100 per 60 s for 3 minutes. Small run: the same rule scaled to 50 per 2 s for 6 s
(the limiter takes the window as a parameter; the figure names say which window was used).
"""

from __future__ import annotations

import threading
import time

from bench import Figure


def max_in_window(times_us: list[int], window_us: int) -> int:
    """The highest number of events in any half-open window [t, t + window)."""
    times_us = sorted(times_us)
    best, start = 0, 0
    for end, t in enumerate(times_us):
        while t - times_us[start] >= window_us:
            start += 1
        best = max(best, end - start + 1)
    return best


def contend(
    redis_url: str, *, rate: int, window_seconds: float, duration: float, senders: int, key: str = "bench"
) -> list[int]:
    """``senders`` threads, each with its own connection, take every slot they can for ``duration`` s.

    Returns the limiter's clock (µs) of every granted slot.
    """
    from redis import Redis

    from bulksign.mail.throttle import MailThrottle

    granted: list[int] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + duration

    def sender() -> None:
        throttle = MailThrottle(Redis.from_url(redis_url), rate=rate, window_seconds=window_seconds, key=key)
        while time.monotonic() < stop_at:
            decision = throttle.acquire(max_wait_seconds=max(0.0, stop_at - time.monotonic()))
            if decision.allowed:
                with lock:
                    granted.append(decision.at_us)

    threads = [threading.Thread(target=sender) for _ in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=duration + 30)
    return granted


def run(*, small: bool) -> list[Figure]:
    from tests.support.services import RedisServer

    rate, window, duration, senders = (50, 2.0, 6.0, 6) if small else (100, 60.0, 180.0, 8)
    server = RedisServer()
    server.start()
    try:
        granted = contend(server.url, rate=rate, window_seconds=window, duration=duration, senders=senders)
    finally:
        server.stop()

    span = f"{window:g}-s window" + (" (scaled: small run)" if small else "")
    peak = max_in_window(granted, int(window * 1_000_000))
    # Mean over whole windows only: the first window starts with the first grant.
    mean_per_window = len(granted) / (duration / window)
    return [
        Figure(f"most sends in any {span}, R={rate}, {senders} senders", peak, "sends", f"≤ {rate}", peak <= rate),
        Figure(
            f"mean rate per {span}, R={rate}",
            mean_per_window,
            f"sends/{window:g} s",
            f"≥ {0.95 * rate:g}",
            mean_per_window >= 0.95 * rate,
            mean_per_window / rate,
            f"R = {rate}",
        ),
    ]

"""The global mail throttle: never more than R sends in any window, however many workers ask."""

from __future__ import annotations

import threading
import time

from redis import Redis

from bench.bench_throttle import contend, max_in_window
from bulksign.mail.throttle import MailThrottle


def test_the_limiter_spaces_sends_evenly_with_a_passed_clock(redis_server):
    throttle = MailThrottle(Redis.from_url(redis_server.url), rate=60, window_seconds=60, key="t:clock")
    second = 1_000_000
    assert throttle.try_acquire(now_us=100 * second).allowed
    refused = throttle.try_acquire(now_us=100 * second + second // 2)
    assert not refused.allowed and abs(refused.wait_seconds - 0.5) < 1e-6
    assert throttle.try_acquire(now_us=101 * second).allowed


def test_a_simulated_minute_of_eager_senders_never_exceeds_r_in_any_window(redis_server):
    rate, window = 100, 60
    redis = Redis.from_url(redis_server.url)
    redis.delete("t:minute")
    throttle = MailThrottle(redis, rate=rate, window_seconds=window, key="t:minute")
    granted = []
    # Ten senders asking every 50 ms for three simulated minutes.
    for tick in range(int(180 / 0.05)):
        now_us = int(tick * 0.05 * 1_000_000)
        for _sender in range(10):
            if throttle.try_acquire(now_us=now_us).allowed:
                granted.append(now_us)
    assert max_in_window(granted, window * 1_000_000) <= rate
    assert len(granted) >= 0.95 * rate * 3


def test_concurrent_workers_sharing_redis_stay_under_the_rate(redis_server):
    # A scaled window (2 s for 40 sends) keeps the test short; the rule is the same as 100 per 60 s.
    rate, window = 40, 2.0
    Redis.from_url(redis_server.url).delete("t:real")
    granted = contend(redis_server.url, rate=rate, window_seconds=window, duration=4.0, senders=6, key="t:real")
    assert max_in_window(granted, int(window * 1_000_000)) <= rate
    assert len(granted) >= 0.9 * rate * 2


def test_rate_zero_means_no_limit(redis_server):
    throttle = MailThrottle(Redis.from_url(redis_server.url), rate=0, key="t:off")
    assert all(throttle.try_acquire().allowed for _ in range(1000))


def test_a_send_job_waits_for_the_throttle_instead_of_failing(make_app, smtp):
    from bulksign.core.extensions import db
    from bulksign.models import OutgoingMail
    from bulksign.work.pipeline import enqueue_renders
    from tests.support.batches import make_batch, request_ids, requests_of, run_worker
    from tests.support.clock import NOW

    app = make_app(MAIL_RATE_PER_MINUTE=5, MAIL_RATE_WINDOW_SECONDS=1)
    with app.app_context():
        batch = make_batch(now=NOW, recipients=8)
        enqueue_renders(request_ids(batch))
        run_worker(app, "pdf")
        started = time.monotonic()
        run_worker(app, "mail")
        assert time.monotonic() - started >= 1.2  # 8 sends at 5 per second: the 6th waited
        assert {r.status for r in requests_of(batch)} == {"sent"}
        assert {m.attempts for m in db.session.query(OutgoingMail).filter_by(kind="invitation")} == {1}


def test_a_stop_request_ends_the_wait_for_a_slot_without_one(redis_server):
    throttle = MailThrottle(Redis.from_url(redis_server.url), rate=1, window_seconds=60, key="t:stop")
    assert throttle.try_acquire().allowed
    stop = threading.Event()
    stop.set()  # SIGTERM came: waiting the minute for the next slot would hold the worker's exit
    assert not throttle.acquire(max_wait_seconds=120, stop=stop).allowed

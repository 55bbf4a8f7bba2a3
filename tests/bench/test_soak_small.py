"""The whole system under chaos, CI-sized: real processes, 600 recipients, nothing lost (see bench/soak.py)."""

from __future__ import annotations

import pytest

from bench.soak import SoakConfig, format_rows, run_soak

pytestmark = pytest.mark.slow(seconds=240)  # the CI soak: 3-4 minutes


def test_a_batch_survives_killed_workers_a_redis_restart_and_an_smtp_outage(capsys):
    rows = run_soak(SoakConfig.small())
    with capsys.disabled():
        print("\n" + format_rows(rows))
    failed = [row for row in rows if row[3] is False]
    assert not failed, failed

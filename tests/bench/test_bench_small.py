"""Every benchmark still runs: each bench/bench_*.py at its CI size (figures are printed, not asserted)."""

from __future__ import annotations

import importlib

import pytest

from bench.__main__ import discover, format_table

pytestmark = pytest.mark.slow(seconds=45)


@pytest.mark.parametrize("name", discover())
def test_benchmark_runs_small_and_reports_figures(name, capsys):
    figures = importlib.import_module(f"bench.{name}").run(small=True)
    assert figures and all(f.value >= 0 for f in figures)
    with capsys.disabled():
        print("\n" + format_table([(name, f) for f in figures]))


def test_a_bench_stops_waiting_once_every_request_is_generated_or_failed_and_says_why(app):
    import time

    from sqlalchemy import update

    from bench import wait_for_requests
    from bulksign.core.extensions import db
    from bulksign.models import SigningRequest
    from tests.support.batchdata import batch_in_states
    from tests.support.clock import NOW

    batch = batch_in_states(db.session, statuses=["generated", "failed", "failed", "bounced"], now=NOW)
    db.session.execute(
        update(SigningRequest).where(SigningRequest.status == "failed").values(error_message="could not convert")
    )
    db.session.commit()
    mine = SigningRequest.batch_id == batch.id
    started = time.monotonic()
    settled = wait_for_requests(mine, total=4, goal="generated", deadline=started + 60)
    assert time.monotonic() - started < 5
    assert (settled.reached, settled.stopped, settled.pending) == (1, 3, 0)
    assert settled.problems() == (
        " (3 stopped: 2 failed: could not convert; 1 bounced: The mailbox does not exist (550 5.1.1).)"
    )
    # Work still on its way is waited for, up to the deadline, and said.
    batch_in_states(db.session, statuses=["pending"], now=NOW, name="Later")
    waiting = wait_for_requests(
        SigningRequest.status.in_(["generated", "pending"]), total=2, goal="generated", deadline=time.monotonic() + 0.5
    )
    assert (waiting.reached, waiting.pending) == (1, 1) and waiting.problems() == " (1 still pending at the deadline)"

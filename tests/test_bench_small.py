"""Every benchmark still runs: each bench/bench_*.py at its CI size (figures are printed, not asserted)."""
from __future__ import annotations

import importlib

import pytest

from bench.__main__ import discover, format_table

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", discover())
def test_benchmark_runs_small_and_reports_figures(name, capsys):
    figures = importlib.import_module(f"bench.{name}").run(small=True)
    assert figures and all(f.value >= 0 for f in figures)
    with capsys.disabled():
        print("\n" + format_table([(name, f) for f in figures]))

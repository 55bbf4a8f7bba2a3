"""Bounded slices of id sets: one SQL statement takes at most 65,535 bind parameters (PostgreSQL's
protocol limit), and a statement with tens of thousands of them is slow to build and to plan anyway."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

#: Ids per ``IN (...)``: far below the protocol limit, and a lock set small enough to hold briefly.
SLICE = 1000


def slices(items: Sequence[T], size: int = SLICE) -> Iterator[list[T]]:
    """``items`` in consecutive lists of at most ``size``."""
    for start in range(0, len(items), size):
        yield list(items[start : start + size])

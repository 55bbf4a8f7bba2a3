"""Time for the tests: rules that take ``now`` get this fixed instant."""

from __future__ import annotations

from datetime import UTC, datetime

#: A fixed instant for rules that take ``now``.
NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)

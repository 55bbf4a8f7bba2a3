"""Opaque keyset cursors: the sort values of the last row of a page, so the next page starts right after it.
More in docs/architecture/core.md."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime

from bulksign.core.errors import BulksignError


class CursorError(BulksignError):
    """The cursor is not one this list handed out; the message says what to do."""

    def __init__(self):
        super().__init__("The page cursor is not valid; start again from the first page.")


def encode(*values: str | int | datetime) -> str:
    """A cursor for the row after one with these sort values (datetimes as ISO text)."""
    raw = [v.isoformat() if isinstance(v, datetime) else v for v in values]
    return base64.urlsafe_b64encode(json.dumps(raw, separators=(",", ":")).encode()).decode().rstrip("=")


def decode(cursor: str, *kinds: type) -> tuple:
    """The values of ``cursor``, each of the given type (``int``, ``str`` or ``datetime``); CursorError otherwise."""
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise CursorError() from None
    if not isinstance(raw, list) or len(raw) != len(kinds):
        raise CursorError()
    values = []
    for kind, value in zip(kinds, raw):
        if kind is datetime:
            try:
                value = datetime.fromisoformat(value)
            except (TypeError, ValueError):
                raise CursorError() from None
        # bool is an int in Python, not a row id; ids beyond 64 bits are no row's.
        elif (
            type(value) is not kind
            or isinstance(value, int)
            and not 0 <= value < 2**63
            or isinstance(value, str)
            and "\x00" in value
        ):
            raise CursorError()
        values.append(value)
    return tuple(values)

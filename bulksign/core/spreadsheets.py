"""Cells that Excel or LibreOffice would run as formulas, and how to keep them plain text."""

from __future__ import annotations

#: A cell starting with one of these is a formula to a spreadsheet (tab and CR too, via DDE tricks).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def formula_safe(text: str) -> str:
    """The text, prefixed with an apostrophe when a spreadsheet would otherwise evaluate it."""
    return "'" + text if text.startswith(FORMULA_START) else text

"""Cells that Excel or LibreOffice would run as formulas, and the one CSV writer that keeps every cell plain text.
More in docs/architecture/core.md."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from datetime import datetime
from typing import IO

#: What a spreadsheet may split a line on, besides the separator it was told.
SEPARATORS = ",;\t\r\n"
#: A cell starting with one of these is a formula to a spreadsheet (tab and CR too, via DDE tricks).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
#: Where an apostrophe goes: before a leading tab or CR, and before a formula sign (spaces before it) at the start
#: or after any separator.
_STARTS = re.compile(r"^(?=[\t\r])|(^|[,;\t\r\n])(?=[ \u00a0]*[=+\-@])")


def formula_safe(text: str) -> str:
    """The text with an apostrophe before each place a spreadsheet could start a formula: its start, and after each
    of ``SEPARATORS``."""
    return _STARTS.sub(r"\1'", text)


def cell_text(value) -> str:
    """A value as a guarded cell: None empty, a moment in ISO 8601 to the second, anything else ``formula_safe``."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    return formula_safe(str(value))


class GuardedWriter:
    """``csv.writer`` whose every cell goes through ``cell_text`` and is quoted: what every CSV we write uses."""

    def __init__(self, fh: IO[str]):
        self._writer = csv.writer(fh, quoting=csv.QUOTE_ALL)

    def writerow(self, cells: Iterable) -> None:
        self._writer.writerow([cell_text(cell) for cell in cells])

    def writerows(self, rows: Iterable[Iterable]) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(fh: IO[str]) -> GuardedWriter:
    """The CSV writer for any file people open in a spreadsheet (exports, manifests, error files, rows left out)."""
    return GuardedWriter(fh)

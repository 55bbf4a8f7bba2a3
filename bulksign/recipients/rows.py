"""A recipients file as rows of text, whatever its format: the rows, the error that refuses a file, and the
limits every reader keeps."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from bulksign.core.errors import BulksignError, Message
from bulksign.core.messages import N_, N_plural

#: A bigger file is refused before any work: split it into several batches.
MAX_ROWS = 200_000
MAX_COLUMNS = 200
#: Rows a file may reach, blank ones included: a sheet claiming row 1,048,576 is refused at that row, not read to it.
MAX_FILE_ROWS = MAX_ROWS + 1
#: Reading and checking one file may take this long; below gunicorn's 30 s, so a request is answered, not killed.
MAX_READ_SECONDS = 20.0


class UploadError(BulksignError):
    """The file cannot be read at all; ``message``: an ``N_`` message, or text a view translated already."""

    def __init__(self, message: Message, status: int | None = None, *, field: str | None = None):
        super().__init__(message, field=field, status=status)


class Row(NamedTuple):
    """One record of the file, its cells as text."""

    #: Excel row number (CSV: the record's number).
    number: int
    cells: list[str]
    #: CSV: the line the record starts on (values with line breaks make it differ from ``number``).
    line: int | None = None
    #: Why the record as read cannot be trusted (a quote left open), for a row error.
    problem: N_ | None = None
    #: .xlsx: the stored value of each cell its number format shows otherwise (cell index → ``120000`` where the
    #: cell shows ``120 000 ₽``), for a template that asks for ``<column>_raw``.
    raw: dict[int, str] | None = None


@dataclass(frozen=True)
class Table:
    """A file opened for reading: its format as detected, and its records as they are read."""

    file_format: str
    encoding: str | None
    delimiter: str | None
    #: Every record, blank ones included.
    rows: Iterator[Row]


def too_many_rows(reached: int | None = None) -> UploadError:
    if reached:
        return UploadError(
            N_plural(
                "The file has more than %(n)s row (blank rows count too): it reaches row %(row)s. "
                "Split it into several batches, and delete empty rows at its end.",
                "The file has more than %(n)s rows (blank rows count too): it reaches row %(row)s. "
                "Split it into several batches, and delete empty rows at its end.",
                MAX_ROWS,
                n=f"{MAX_ROWS:,}",
                row=f"{reached:,}",
            ),
            413,
        )
    return UploadError(
        N_plural(
            "The file has more than %(n)s row (blank rows count too). Split it into several batches, "
            "and delete empty rows at its end.",
            "The file has more than %(n)s rows (blank rows count too). Split it into several batches, "
            "and delete empty rows at its end.",
            MAX_ROWS,
            n=f"{MAX_ROWS:,}",
        ),
        413,
    )


def out_of_time() -> UploadError:
    return UploadError(
        N_(
            "The file took longer than %(n)s s to read. Split it into several smaller files, or save it as CSV.",
            n=f"{MAX_READ_SECONDS:g}",
        ),
        413,
    )


def column_letter(index: int) -> str:
    """The spreadsheet letter of a 0-based column index (0 → A, 26 → AA)."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


#: Other spellings of the recognised columns, after normalisation.
ALIASES = {
    "e_mail": "email",
    "email_address": "email",
    "mail": "email",
    "full_name": "name",
    "phone_number": "phone",
    "telephone": "phone",
    "tel": "phone",
    "mobile": "phone",
}

_HEADER_NOISE = re.compile(r"[\s\-]+")


def normalise_header(name: str) -> str:
    """A column header as the checks compare it: lower case, spaces and dashes as ``_``, known aliases resolved."""
    key = _HEADER_NOISE.sub("_", name.strip().lower()).strip("_")
    return ALIASES.get(key, key)

"""Reading a recipients file: CSV or XLSX as a stream of rows of text, refused early when it cannot be read."""

from __future__ import annotations

import codecs
import csv
import io
import time as clock
from collections.abc import Iterator
from pathlib import PurePosixPath

from bulksign.core.messages import N_, N_plural
from bulksign.recipients import rows
from bulksign.recipients.rows import (
    MAX_FILE_ROWS,
    Row,
    Table,
    UploadError,
    normalise_header,
    out_of_time,
    too_many_rows,
)
from bulksign.recipients.workbooks import xlsx_rows

CSV_EXTENSIONS = frozenset({".csv", ".txt", ".tsv"})
XLSX_EXTENSIONS = frozenset({".xlsx", ".xlsm"})
DELIMITERS = (",", ";", "\t")


def _extension(filename: str) -> str:
    return PurePosixPath((filename or "").replace("\\", "/")).suffix.lower()


def open_table(data: bytes, *, filename: str, language: str = "en") -> Table:
    """The file's rows, read as they are iterated; raises UploadError at once for a file that cannot be read. An
    .xlsx cell reads as its number format shows it in ``language``; a CSV's as typed.

    Iterating past MAX_READ_SECONDS from now raises UploadError too: checking the rows counts.
    """
    deadline = clock.monotonic() + rows.MAX_READ_SECONDS
    ext = _extension(filename)
    if ext == ".xls" or data.startswith(b"\xd0\xcf\x11\xe0"):
        raise UploadError(
            N_("This is an old Excel .xls file. Save it as .xlsx (Excel Workbook) or as CSV and upload that."), 415
        )
    if ext not in CSV_EXTENSIONS | XLSX_EXTENSIONS:
        if not ext:
            raise UploadError(N_("Upload a .csv or .xlsx file (this one has no extension)."), 415)
        raise UploadError(N_("Upload a .csv or .xlsx file (this one has %(ext)s).", ext=ext), 415)
    if not data.strip(b" \t\r\n\xef\xbb\xbf\x00"):
        raise UploadError(N_("The file is empty."))
    if data.startswith(b"PK\x03\x04"):
        return Table("xlsx", None, None, xlsx_rows(data, deadline, language=language))
    if ext in XLSX_EXTENSIONS:
        raise UploadError(
            N_("This file is named .xlsx but is not an Excel workbook. Save it again from Excel, or upload it as .csv.")
        )
    text, encoding = _decode(data)
    delimiter = _detect_delimiter(text)
    if ext == ".txt":
        _refuse_untabular_text(text, delimiter=delimiter)
    _refuse_too_many_records(text, delimiter)
    return Table("csv", encoding, delimiter, _csv_rows(text, delimiter, deadline))


def _decode(data: bytes) -> tuple[str, str]:
    """The file's text and the encoding it was read with: UTF-8 (BOM or not), UTF-16 with a BOM, CP1251, CP1252."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16"), "utf-16"
        except UnicodeDecodeError:
            raise UploadError(N_("The file claims to be UTF-16 text but is not. Save it again as CSV UTF-8.")) from None
    _refuse_binary(data)
    body = data[3:] if data.startswith(codecs.BOM_UTF8) else data
    try:
        return body.decode("utf-8"), "utf-8-sig" if body is not data else "utf-8"
    except UnicodeDecodeError as exc:
        # Well-formed UTF-8 characters as common as broken bytes: UTF-8 with some foreign lines.
        lenient = body[: exc.start + 65536].decode("utf-8", errors="replace")  # all valid up to exc.start
        broken = lenient.count("\ufffd")
        well_formed = len(lenient) - len(lenient.encode("ascii", errors="ignore")) - broken
        if body is not data or (well_formed and well_formed * 2 >= broken):
            line = body.count(b"\n", 0, exc.start) + 1
            raise UploadError(
                N_(
                    "The file mixes text encodings: line %(line)s is not UTF-8 although other lines "
                    'are. Open it in a spreadsheet and save it again as "CSV UTF-8".',
                    line=line,
                )
            ) from None
    encoding = _guess_single_byte(body)
    try:
        return body.decode(encoding), encoding
    except UnicodeDecodeError:
        raise UploadError(N_('The file\'s text encoding is not recognised. Save it again as "CSV UTF-8".')) from None


def _refuse_binary(data: bytes) -> None:
    head = data[:65536]
    controls = sum(1 for b in head if b < 0x20 and b not in (0x09, 0x0A, 0x0D))
    if b"\x00" in head or controls * 100 > len(head):
        raise UploadError(N_("This does not look like a CSV or Excel file (it contains binary data)."))


def _guess_single_byte(data: bytes) -> str:
    """CP1251 when letters above 0xC0 come in runs (Cyrillic words), else CP1252 (accents in Latin words)."""
    letters = in_runs = 0
    previous_high = False
    for i, b in enumerate(data[:262144]):
        high = b >= 0xC0
        if high:
            letters += 1
            nxt = data[i + 1] if i + 1 < len(data) else 0
            if previous_high or nxt >= 0xC0:
                in_runs += 1
        previous_high = high
    if any(b in data for b in (b"\x81", b"\x8d", b"\x8f", b"\x90", b"\x9d")):
        return "cp1251"  # bytes CP1252 leaves undefined
    return "cp1251" if letters and in_runs * 2 > letters else "cp1252"


def _detect_delimiter(text: str) -> str:
    """The delimiter that splits the first lines into the most columns, consistently."""
    sample = text[:65536].splitlines()[:50]
    best, best_score = ",", (0.0, 1)
    for delimiter in DELIMITERS:
        try:
            records = [r for r in csv.reader(sample, delimiter=delimiter) if r]
        except csv.Error:
            continue
        if not records or len(records[0]) < 2:
            continue
        width = len(records[0])
        score = (sum(len(r) == width for r in records) / len(records), width)
        if score > best_score:
            best, best_score = delimiter, score
    return best


def _refuse_untabular_text(text: str, *, delimiter: str) -> None:
    """Refuse a .txt whose first line is one column: a note or a list, not a table. A .txt is read as CSV (Excel's
    "Unicode Text" is tab-separated); a real one separates its header's columns, and a one-column .csv is still
    read."""
    try:
        for record in csv.reader(text[:65536].splitlines()[:50], delimiter=delimiter):
            if any(cell.strip() for cell in record):
                # A list of addresses under an e-mail header is a one-column table all the same.
                if len(record) > 1 or normalise_header(record[0]) == "email":
                    return
                break
    except csv.Error:
        return  # a table with a broken record: the row-by-row read names it
    raise UploadError(
        N_(
            "This is not a CSV or XLSX file: its first line has no comma, semicolon or tab between columns. "
            "Save the list from a spreadsheet as CSV or Excel Workbook (.xlsx) and upload that."
        ),
        415,
    )


def _refuse_too_many_records(text: str, delimiter: str) -> None:
    """Count the records first (bare csv.reader, a tenth of a check's cost) so a too-long file is refused at once."""
    if text.count("\n") < MAX_FILE_ROWS:
        return
    try:
        for number, _ in enumerate(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter), start=1):
            if number > MAX_FILE_ROWS:
                raise too_many_rows()
    except csv.Error:
        return  # the row-by-row read names the broken row


def _quote_problem(lines: list[str], cells: list[str], delimiter: str, width: int, start: int) -> N_ | None:
    """Why a record spread over several lines is a quote left open rather than a value with line breaks."""
    try:
        for _ in csv.reader(lines, delimiter=delimiter, strict=True):
            pass
    except csv.Error as exc:
        if "end of data" in str(exc):
            return N_plural(
                "Line %(line)s: a quote opens here and is never closed, so the %(n)s line after it became "
                "part of one value. Close the quote or remove it.",
                "Line %(line)s: a quote opens here and is never closed, so the %(n)s lines after it became "
                "part of one value. Close the quote or remove it.",
                len(lines) - 1,
                line=f"{start:,}",
                n=f"{len(lines) - 1:,}",
            )
    for cell in cells:
        if "\n" not in cell and "\r" not in cell:
            continue
        for inner in cell.splitlines()[1:]:
            # A line inside the value that reads as a whole row of the file: rows were swallowed.
            if width > 1 and len(next(csv.reader([inner], delimiter=delimiter), [])) >= width:
                return N_plural(
                    "Line %(line)s: a quoted value runs over %(n)s line and takes in what look like other "
                    'rows ("%(text)s"). Check the quotes on line %(line)s.',
                    "Line %(line)s: a quoted value runs over %(n)s lines and takes in what look like other "
                    'rows ("%(text)s"). Check the quotes on line %(line)s.',
                    len(lines),
                    line=f"{start:,}",
                    n=f"{len(lines):,}",
                    text=inner[:60],
                )
    return None


def _csv_rows(text: str, delimiter: str, deadline: float) -> Iterator[Row]:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    lines: list[str] | None = None  # split only for a file with a record over several lines
    number = 0
    width = 0
    while True:
        start = reader.line_num + 1
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise UploadError(
                N_(
                    "Row %(row)s (line %(line)s) cannot be read as CSV (%(error)s). Check the quotes in that row.",
                    row=number + 1,
                    line=f"{start:,}",
                    error=str(exc),
                )
            ) from None
        number += 1
        if number > MAX_FILE_ROWS:
            raise too_many_rows()
        if number % 1000 == 0 and clock.monotonic() > deadline:
            raise out_of_time()
        if not width and any(c.strip() for c in cells):
            width = len(cells)
        problem = None
        if reader.line_num > start:
            if lines is None:
                lines = io.StringIO(text, newline="").readlines()
            problem = _quote_problem(lines[start - 1 : reader.line_num], cells, delimiter, width, start)
        yield Row(number, cells, start, problem)

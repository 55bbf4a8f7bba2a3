"""Reading a recipients file: CSV or XLSX as a stream of rows of text, refused early when it cannot be read.

Nothing here trusts the file: an unreadable upload raises UploadError (a 4xx for the views). CSV is
decoded (UTF-8, UTF-16, CP1251/CP1252) and its delimiter detected; a quote left open is reported on
its row. An .xlsx is checked for zip bombs and counted before it is read, then streamed cell by
cell. Cell text is kept as text: a formula such as ``=HYPERLINK(...)`` is never evaluated.
"""

from __future__ import annotations

import codecs
import csv
import io
import time as clock
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import PurePosixPath
from typing import NamedTuple

from bulksign.core import zip_archives
from bulksign.core.messages import N_

#: A bigger file is refused before any work: split it into several batches.
MAX_ROWS = 200_000
MAX_COLUMNS = 200
#: Rows a file may reach, blank ones included: a sheet claiming row 1,048,576 is refused at that row, not read to it.
MAX_FILE_ROWS = MAX_ROWS + 1
#: Cells an .xlsx sheet may hold, empty formatted ones included (a full sheet of 200 columns would need 40 million).
MAX_CELLS = 4_000_000
#: What an .xlsx may unpack to, and how much bigger than packed one part may be (Apache POI refuses beyond
#: 100 too): 2.2 MB that unpack to 1.5 GB of empty rows kept a web worker busy for its whole timeout.
MAX_UNPACKED_BYTES = 256 * 1024 * 1024
MAX_COMPRESSION_RATIO = 100
_ZIP_LIMITS = zip_archives.Limits(parts=10_000, part_bytes=MAX_UNPACKED_BYTES, total_bytes=MAX_UNPACKED_BYTES)
#: Reading and checking one file may take this long; below gunicorn's 30 s, so a request is answered, not killed.
MAX_READ_SECONDS = 20.0
CSV_EXTENSIONS = frozenset({".csv", ".txt", ".tsv"})
XLSX_EXTENSIONS = frozenset({".xlsx", ".xlsm"})
DELIMITERS = (",", ";", "\t")


class UploadError(ValueError):
    """The file cannot be read at all; ``status`` is the HTTP status to answer with."""

    def __init__(self, message, status: int = 400):
        super().__init__(message)
        #: An ``N_`` message (or text already translated by a view): ``str()`` it where it is shown.
        self.message = message
        self.status = status


class Row(NamedTuple):
    """One record of the file, its cells as text."""

    #: Excel row number (CSV: the record's number).
    number: int
    cells: list[str]
    #: CSV: the line the record starts on (values with line breaks make it differ from ``number``).
    line: int | None = None
    #: Why the record as read cannot be trusted (a quote left open), for a row error.
    problem: str | None = None


@dataclass(frozen=True)
class Table:
    """A file opened for reading: its format as detected, and its records as they are read."""

    file_format: str
    encoding: str | None
    delimiter: str | None
    #: Every record, blank ones included.
    rows: Iterator[Row]


def _extension(filename: str) -> str:
    return PurePosixPath((filename or "").replace("\\", "/")).suffix.lower()


def _too_many_rows(reached: int | None = None) -> UploadError:
    if reached:
        return UploadError(
            N_(
                "The file has more than %(n)s rows (blank rows count too): it reaches row %(row)s. "
                "Split it into several batches, and delete empty rows at its end.",
                n=f"{MAX_ROWS:,}",
                row=f"{reached:,}",
            ),
            413,
        )
    return UploadError(
        N_(
            "The file has more than %(n)s rows (blank rows count too). Split it into several batches, "
            "and delete empty rows at its end.",
            n=f"{MAX_ROWS:,}",
        ),
        413,
    )


def _out_of_time() -> UploadError:
    return UploadError(
        N_(
            "The file took longer than %(n)s s to read. Split it into several smaller files, or save it as CSV.",
            n=f"{MAX_READ_SECONDS:g}",
        ),
        413,
    )


def open_table(data: bytes, *, filename: str) -> Table:
    """The file's rows, read as they are iterated; raises UploadError at once for a file that cannot be read.

    Iterating past MAX_READ_SECONDS from now raises UploadError too: checking the rows counts.
    """
    deadline = clock.monotonic() + MAX_READ_SECONDS
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
        return Table("xlsx", None, None, _xlsx_rows(data, deadline))
    if ext in XLSX_EXTENSIONS:
        raise UploadError(
            N_("This file is named .xlsx but is not an Excel workbook. Save it again from Excel, or upload it as .csv.")
        )
    text, encoding = _decode(data)
    delimiter = _detect_delimiter(text)
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


def _refuse_too_many_records(text: str, delimiter: str) -> None:
    """Count the records first (bare csv.reader, a tenth of a check's cost) so a too-long file is refused at once."""
    if text.count("\n") < MAX_FILE_ROWS:
        return
    try:
        for number, _ in enumerate(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter), start=1):
            if number > MAX_FILE_ROWS:
                raise _too_many_rows()
    except csv.Error:
        return  # the row-by-row read names the broken row


def _quote_problem(lines: list[str], cells: list[str], delimiter: str, width: int, start: int) -> N_ | None:
    """Why a record spread over several lines is a quote left open rather than a value with line breaks."""
    try:
        for _ in csv.reader(lines, delimiter=delimiter, strict=True):
            pass
    except csv.Error as exc:
        if "end of data" in str(exc):
            return N_(
                "Line %(line)s: a quote opens here and is never closed, so the %(n)s lines after it became "
                "part of one value. Close the quote or remove it.",
                line=f"{start:,}",
                n=f"{len(lines) - 1:,}",
            )
    for cell in cells:
        if "\n" not in cell and "\r" not in cell:
            continue
        for inner in cell.splitlines()[1:]:
            # A line inside the value that reads as a whole row of the file: rows were swallowed.
            if width > 1 and len(next(csv.reader([inner], delimiter=delimiter), [])) >= width:
                return N_(
                    "Line %(line)s: a quoted value runs over %(n)s lines and takes in what look like other "
                    'rows ("%(text)s"). Check the quotes on line %(line)s.',
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
            raise _too_many_rows()
        if number % 1000 == 0 and clock.monotonic() > deadline:
            raise _out_of_time()
        if not width and any(c.strip() for c in cells):
            width = len(cells)
        problem = None
        if reader.line_num > start:
            if lines is None:
                lines = io.StringIO(text, newline="").readlines()
            problem = _quote_problem(lines[start - 1 : reader.line_num], cells, delimiter, width, start)
        yield Row(number, cells, start, problem)


def _refuse_zip_bombs(data: bytes) -> None:
    """Check what the workbook's parts unpack to before openpyxl opens it: first what their headers declare (a clear
    message for a sheet formatted to its end), then what they really inflate to, as a stream (a header may lie,
    and zipfile would believe it)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            parts = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        raise _unreadable_workbook() from None
    for part in parts:
        if part.file_size > 1024 * 1024 and part.file_size > MAX_COMPRESSION_RATIO * max(part.compress_size, 1):
            raise UploadError(
                N_(
                    "The workbook is mostly empty space: its part %(part)s unpacks to %(n)s times its "
                    "size (empty rows or columns formatted to the end of the sheet?). Delete the unused "
                    "rows and columns, or save the sheet as CSV.",
                    part=part.filename[:80],
                    n=f"{part.file_size // part.compress_size:,}",
                ),
                413,
            )
    unpacked = sum(part.file_size for part in parts)
    if unpacked > MAX_UNPACKED_BYTES:
        raise UploadError(
            N_(
                "The workbook unpacks to %(mb)s MB; the limit is %(limit)s MB. Split it into several "
                "files, or save it as CSV.",
                mb=f"{unpacked / 1024 / 1024:,.0f}",
                limit=MAX_UNPACKED_BYTES // 1024 // 1024,
            ),
            413,
        )
    try:
        # The declared sizes passed: a part that inflates past its own is a lie, refused as it passes it.
        zip_archives.check(data, limits=_ZIP_LIMITS)
    except zip_archives.ArchiveRefused:
        raise _unreadable_workbook() from None


def _unreadable_workbook() -> UploadError:
    return UploadError(N_("The workbook could not be read. Save it again from Excel as .xlsx, or as CSV."))


def _count_tags(source, tags: tuple[bytes, ...], limit: int) -> bool:
    """Whether the XML part holds more than ``limit`` of these start tags, counted as it unpacks (no parsing)."""
    count, tail = 0, b""
    while chunk := source.read(1 << 20):
        window = tail + chunk
        count += sum(window.count(tag) for tag in tags)
        if count > limit:
            return True
        tail = window[-(min(map(len, tags)) - 1) :]  # shorter than any tag: no tag is counted twice
    return False


def _xlsx_rows(data: bytes, deadline: float) -> Iterator[Row]:
    _refuse_zip_bombs(data)
    from openpyxl.reader.excel import ExcelReader
    from openpyxl.styles.stylesheet import apply_stylesheet
    from openpyxl.worksheet._reader import CELL_TAG, ROW_TAG, WorkSheetParser
    from openpyxl.xml.constants import SHARED_STRINGS
    from openpyxl.xml.functions import iterparse

    # Untrusted workbooks fail in many ways inside openpyxl/zipfile/XML: each is "cannot read", never a 500.
    # openpyxl's own row iterator pads every row to the claimed dimension (A1:XFD1048576: 17 billion cells) and
    # parses a whole row before yielding it; this loop counts every row and cell as the XML streams past instead.
    archive = None
    try:
        # openpyxl's load_workbook parses every sheet in full when one has no <dimension>: its parts are used
        # here without that pass, and rows are counted on the raw XML first, so that a too-long sheet is refused
        # in a tenth of the time reading it would take.
        reader = ExcelReader(io.BytesIO(data), read_only=True, data_only=False)
        archive = reader.archive
        reader.read_manifest()
        strings = reader.package.find(SHARED_STRINGS)
        if strings is not None:
            with archive.open(strings.PartName[1:]) as source:
                if _count_tags(source, (b"<si>", b"<si "), MAX_CELLS):
                    raise UploadError(
                        N_(
                            "The workbook has more than %(n)s different texts. Split it into several "
                            "files, or save it as CSV.",
                            n=f"{MAX_CELLS:,}",
                        ),
                        413,
                    )
        reader.read_strings()
        reader.read_workbook()
        apply_stylesheet(archive, reader.wb)
        sheet_path = next(
            rel.target
            for _, rel in reader.parser.find_sheets()
            if rel.target in reader.valid_files and "chartsheet" not in rel.Type
        )
        with archive.open(sheet_path) as source:
            if _count_tags(source, (b"<row ", b"<row>", b"<row/>"), MAX_FILE_ROWS):  # blank rows too
                raise _too_many_rows()
        with archive.open(sheet_path) as source:
            cells = _XlsxCells(
                WorkSheetParser(
                    source,
                    reader.shared_strings,
                    data_only=False,
                    epoch=reader.wb.epoch,
                    date_formats=reader.wb._date_formats,
                    timedelta_formats=reader.wb._timedelta_formats,
                )
            )
            rows = number = 0
            values: dict[int, str] = {}
            for _, element in iterparse(source):
                if element.tag == CELL_TAG:
                    if cells.count % 1000 == 0 and clock.monotonic() > deadline:
                        raise _out_of_time()
                    column, text = cells.read(element)
                    if text:
                        if column > MAX_COLUMNS + 1:
                            raise UploadError(
                                N_(
                                    "Cell %(cell)s has a value, beyond the limit of %(n)s columns. "
                                    "Delete the columns after %(last)s, or save the sheet as CSV.",
                                    cell=element.get("r") or column_letter(column - 1),
                                    n=MAX_COLUMNS,
                                    last=column_letter(MAX_COLUMNS - 1),
                                ),
                                413,
                            )
                        values[column] = text
                    element.clear()
                elif element.tag == ROW_TAG:
                    rows += 1
                    number = int(element.get("r") or number + 1)
                    if number > MAX_FILE_ROWS or rows > MAX_FILE_ROWS:
                        raise _too_many_rows(max(number, rows))
                    element.clear()
                    cells.next_row(number)
                    yield Row(number, [values.get(i, "") for i in range(1, max(values, default=0) + 1)])
                    values = {}
    except UploadError:
        raise
    except Exception:  # noqa: BLE001 - see above
        raise _unreadable_workbook() from None
    finally:
        if archive is not None:
            archive.close()


class _XlsxCells:
    """Reads one ``<c>`` element to (column, text), counting every cell against MAX_CELLS.

    Plain text and numbers take a short path (openpyxl's ``parse_cell`` builds objects per inline string: ten
    times slower); formulas and dates go through openpyxl, which knows shared formulas and date styles.
    """

    def __init__(self, parser):
        from openpyxl.utils.cell import column_index_from_string
        from openpyxl.worksheet._reader import FORMULA_TAG, INLINE_STRING, SHEET_MAIN_NS, VALUE_TAG

        self.parser = parser
        self._column_index = column_index_from_string
        self.count = 0
        self.column = 0
        self._formula, self._inline, self._value = FORMULA_TAG, INLINE_STRING, VALUE_TAG
        self._text, self._run = f"{{{SHEET_MAIN_NS}}}t", f"{{{SHEET_MAIN_NS}}}r"

    def next_row(self, number: int) -> None:
        self.column = 0
        self.parser.row_counter = number

    def read(self, element) -> tuple[int, str]:
        self.count += 1
        if self.count > MAX_CELLS:
            raise UploadError(
                N_(
                    "The sheet has more than %(n)s cells, empty formatted ones included. Delete the "
                    "unused rows and columns, or save it as CSV.",
                    n=f"{MAX_CELLS:,}",
                ),
                413,
            )
        reference = element.get("r")
        self.column = self._column_index(reference.rstrip("0123456789")) if reference else self.column + 1
        kind = element.get("t", "n")
        if kind == "inlineStr":
            block = element.find(self._inline)
            if block is None:
                return self.column, ""
            if len(block) == 1:  # plain text, no formatted runs
                return self.column, (block[0].text or "") if block[0].tag == self._text else ""
            return self.column, (block.findtext(self._text) or "") + "".join(
                run.findtext(self._text) or "" for run in block.iterfind(self._run)
            )
        value = element.findtext(self._value)
        if element.find(self._formula) is None and value is not None:
            if kind == "s":
                return self.column, str(self.parser.shared_strings[int(value)])
            if kind in ("str", "e"):
                return self.column, value
            if kind == "n" and int(element.get("s", 0)) not in self.parser.date_formats:
                return self.column, _cell_text(float(value) if "." in value or "e" in value.lower() else int(value))
        elif value is None and element.find(self._formula) is None:
            return self.column, ""
        self.parser.col_counter = self.column - 1
        return self.column, _cell_text(self.parser.parse_cell(element)["value"])


def _cell_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # phone numbers and ids stored as numbers
    if isinstance(value, datetime):
        return value.date().isoformat() if value.time() == time(0) else value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def column_letter(index: int) -> str:
    """The spreadsheet letter of a 0-based column index (0 → A, 26 → AA)."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters

"""Recipient files: read CSV or XLSX as a stream, check every row against a template, report what is wrong.

Nothing here trusts the file: an unreadable upload raises UploadError (a 4xx for the views), and
everything row-level becomes a RowError with the row number the user sees in Excel (header = 1).
Cell text is kept as text: a formula such as ``=HYPERLINK(...)`` is never evaluated.
"""
from __future__ import annotations

import codecs
import csv
import io
import json
import re
import secrets
import time as clock
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time
from functools import lru_cache
from pathlib import PurePosixPath
from typing import NamedTuple

from email_validator import EmailNotValidError, validate_email

from .messages import N_
from .signature_box import SIGNATURE_VARIABLE
from .spreadsheets import formula_safe
from .storage import Storage, StorageError

#: Errors kept for the page and the API; the counts cover all of them, the CSV report lists all.
MAX_ERRORS_KEPT = 100
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
#: Reading and checking one file may take this long; below gunicorn's 30 s, so a request is answered, not killed.
MAX_READ_SECONDS = 20.0
#: Longest value per recognised column; template variables get MAX_VALUE_CHARS.
COLUMN_LIMITS = {"email": 254, "name": 300, "phone": 50}
MAX_VALUE_CHARS = 2000
#: Columns every request has; only ``email`` is required.
BUILTIN_COLUMNS = ("email", "name", "phone")
#: Other spellings of the recognised columns, after normalisation.
ALIASES = {"e_mail": "email", "email_address": "email", "mail": "email", "full_name": "name",
           "phone_number": "phone", "telephone": "phone", "tel": "phone", "mobile": "phone"}
CSV_EXTENSIONS = frozenset({".csv", ".txt", ".tsv"})
XLSX_EXTENSIONS = frozenset({".xlsx", ".xlsm"})
DELIMITERS = (",", ";", "\t")

_FORMULA_START = ("=", "+", "-", "@")
_SIMPLE_LOCAL = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*\Z")
_HEADER_NOISE = re.compile(r"[\s\-]+")
_UPLOAD_ID = re.compile(r"[0-9a-f]{32}\Z")


class UploadError(ValueError):
    """The file cannot be read at all; ``status`` is the HTTP status to answer with."""

    def __init__(self, message, status: int = 400):
        super().__init__(message)
        #: An ``N_`` message (or text already translated by a view): ``str()`` it where it is shown.
        self.message = message
        self.status = status


@dataclass(frozen=True)
class RowError:
    #: Row number as Excel shows it (the header is row 1).
    row: int
    #: The column as written in the file's header (or the template variable when it is missing).
    column: str
    #: What is wrong, translated when shown (``N_``).
    message: N_
    #: The row's values as read, for the errors CSV (column header → value).
    values: dict = field(default_factory=dict, compare=False)
    #: For a misspelt mail domain: (domain as written, domain meant), which staff may accept or keep.
    typo: tuple[str, str] | None = None


@dataclass(frozen=True)
class Recipient:
    row_number: int
    email: str
    name: str
    phone: str | None
    #: Values by template variable name.
    data: dict


@dataclass(frozen=True)
class SuppressedRow:
    """A valid row whose address is on the suppression list: its request will not be mailed."""

    row: int
    email: str
    #: The entry: where it came from (``suppressions.SOURCES``), what the provider said, since when.
    source: str
    reason: str
    since: datetime


#: A lookup of suppression entries in force: addresses → entries by lower-cased address (each with
#: ``source``, ``reason`` and ``created_at``), e.g. ``suppressions.in_force_among`` bound to a session.
SuppressionLookup = Callable[[list[str]], Mapping[str, object]]


@dataclass(frozen=True)
class ValidationReport:
    #: Non-empty data rows in the file.
    total_rows: int
    valid_rows: int
    invalid_rows: int
    #: The first errors (MAX_ERRORS_KEPT unless asked otherwise); ``error_count`` counts them all.
    errors: tuple[RowError, ...]
    error_count: int
    #: Translated when shown (``N_``).
    warnings: tuple[N_, ...]
    #: The header as written in the file.
    columns: tuple[str, ...]
    #: Template variables (or ``email``) without a column: no row can be used.
    missing_columns: tuple[str, ...]
    #: ``csv`` or ``xlsx``; encoding and delimiter as detected for CSV.
    file_format: str
    encoding: str | None = None
    delimiter: str | None = None
    #: The valid rows, only when asked for (``keep_rows=True``).
    recipients: tuple[Recipient, ...] = field(default=(), repr=False)
    #: Valid rows whose address is on the suppression list (the first MAX_ERRORS_KEPT), when a lookup was given;
    #: ``suppressed_count`` counts them all.
    suppressed: tuple[SuppressedRow, ...] = ()
    suppressed_count: int = 0

    @property
    def errors_truncated(self) -> bool:
        return self.error_count > len(self.errors)

    def as_dict(self) -> dict:
        """The JSON shape of the API."""
        return {
            "total_rows": self.total_rows, "valid_rows": self.valid_rows, "invalid_rows": self.invalid_rows,
            "error_count": self.error_count,
            "errors": [{"row": e.row, "column": e.column, "message": str(e.message),
                        **({"suggestion": e.typo[1]} if e.typo else {})} for e in self.errors],
            "warnings": [str(w) for w in self.warnings], "columns": list(self.columns),
            "missing_columns": list(self.missing_columns), "file_format": self.file_format,
            "encoding": self.encoding, "delimiter": self.delimiter,
            "suppressed_count": self.suppressed_count,
            "suppressed": [{"row": r.row, "email": r.email, "source": r.source, "reason": r.reason,
                            "since": r.since.isoformat()} for r in self.suppressed],
        }


# --- reading -----------------------------------------------------------------------------------

class _Row(NamedTuple):
    #: Excel row number (CSV: the record's number).
    number: int
    cells: list[str]
    #: CSV: the line the record starts on (values with line breaks make it differ from ``number``).
    line: int | None = None
    #: Why the record as read cannot be trusted (a quote left open), for a row error.
    problem: str | None = None


@dataclass(frozen=True)
class _Table:
    file_format: str
    encoding: str | None
    delimiter: str | None
    #: Every record, blank ones included.
    rows: Iterator[_Row]


def _extension(filename: str) -> str:
    return PurePosixPath((filename or "").replace("\\", "/")).suffix.lower()


def _too_many_rows(reached: int | None = None) -> UploadError:
    if reached:
        return UploadError(N_("The file has more than %(n)s rows (blank rows count too): it reaches row %(row)s. "
                              "Split it into several batches, and delete empty rows at its end.",
                              n=f"{MAX_ROWS:,}", row=f"{reached:,}"), 413)
    return UploadError(N_("The file has more than %(n)s rows (blank rows count too). Split it into several batches, "
                          "and delete empty rows at its end.", n=f"{MAX_ROWS:,}"), 413)


def _out_of_time() -> UploadError:
    return UploadError(N_("The file took longer than %(n)s s to read. Split it into several smaller files, or save "
                          "it as CSV.", n=f"{MAX_READ_SECONDS:g}"), 413)


def _open_table(data: bytes, filename: str, deadline: float) -> _Table:
    ext = _extension(filename)
    if ext == ".xls" or data.startswith(b"\xd0\xcf\x11\xe0"):
        raise UploadError(N_("This is an old Excel .xls file. Save it as .xlsx (Excel Workbook) or as CSV and "
                             "upload that."), 415)
    if ext not in CSV_EXTENSIONS | XLSX_EXTENSIONS:
        if not ext:
            raise UploadError(N_("Upload a .csv or .xlsx file (this one has no extension)."), 415)
        raise UploadError(N_("Upload a .csv or .xlsx file (this one has %(ext)s).", ext=ext), 415)
    if not data.strip(b" \t\r\n\xef\xbb\xbf\x00"):
        raise UploadError(N_("The file is empty."))
    if data.startswith(b"PK\x03\x04"):
        return _Table("xlsx", None, None, _xlsx_rows(data, deadline))
    if ext in XLSX_EXTENSIONS:
        raise UploadError(N_("This file is named .xlsx but is not an Excel workbook. Save it again from Excel, "
                             "or upload it as .csv."))
    text, encoding = _decode(data)
    delimiter = _detect_delimiter(text)
    _refuse_too_many_records(text, delimiter)
    return _Table("csv", encoding, delimiter, _csv_rows(text, delimiter, deadline))


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
        lenient = body[:exc.start + 65536].decode("utf-8", errors="replace")  # all valid up to exc.start
        broken = lenient.count("\ufffd")
        well_formed = len(lenient) - len(lenient.encode("ascii", errors="ignore")) - broken
        if body is not data or (well_formed and well_formed * 2 >= broken):
            line = body.count(b"\n", 0, exc.start) + 1
            raise UploadError(N_("The file mixes text encodings: line %(line)s is not UTF-8 although other lines "
                                 "are. Open it in a spreadsheet and save it again as \"CSV UTF-8\".", line=line)) from None
    encoding = _guess_single_byte(body)
    try:
        return body.decode(encoding), encoding
    except UnicodeDecodeError:
        raise UploadError(N_("The file's text encoding is not recognised. Save it again as \"CSV UTF-8\".")) from None


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
            return N_("Line %(line)s: a quote opens here and is never closed, so the %(n)s lines after it became "
                      "part of one value. Close the quote or remove it.", line=f"{start:,}", n=f"{len(lines) - 1:,}")
    for cell in cells:
        if "\n" not in cell and "\r" not in cell:
            continue
        for inner in cell.splitlines()[1:]:
            # A line inside the value that reads as a whole row of the file: rows were swallowed.
            if width > 1 and len(next(csv.reader([inner], delimiter=delimiter), [])) >= width:
                return N_("Line %(line)s: a quoted value runs over %(n)s lines and takes in what look like other "
                          "rows (\"%(text)s\"). Check the quotes on line %(line)s.", line=f"{start:,}",
                          n=f"{len(lines):,}", text=inner[:60])
    return None


def _csv_rows(text: str, delimiter: str, deadline: float) -> Iterator[_Row]:
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
            raise UploadError(N_("Row %(row)s (line %(line)s) cannot be read as CSV (%(error)s). Check the quotes in "
                                 "that row.", row=number + 1, line=f"{start:,}", error=str(exc))) from None
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
            problem = _quote_problem(lines[start - 1:reader.line_num], cells, delimiter, width, start)
        yield _Row(number, cells, start, problem)


def _refuse_zip_bombs(data: bytes) -> None:
    """Check what the workbook's parts unpack to before opening it; zipfile stops a part at its declared size."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            parts = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        raise UploadError(N_("The workbook could not be read. Save it again from Excel as .xlsx, or as CSV.")) from None
    unpacked = 0
    for part in parts:
        unpacked += part.file_size
        if part.file_size > 1024 * 1024 and part.file_size > MAX_COMPRESSION_RATIO * max(part.compress_size, 1):
            raise UploadError(N_("The workbook is mostly empty space: its part %(part)s unpacks to %(n)s times its "
                                 "size (empty rows or columns formatted to the end of the sheet?). Delete the unused "
                                 "rows and columns, or save the sheet as CSV.", part=part.filename[:80],
                                 n=f"{part.file_size // part.compress_size:,}"), 413)
    if unpacked > MAX_UNPACKED_BYTES:
        raise UploadError(N_("The workbook unpacks to %(mb)s MB; the limit is %(limit)s MB. Split it into several "
                             "files, or save it as CSV.", mb=f"{unpacked / 1024 / 1024:,.0f}",
                             limit=MAX_UNPACKED_BYTES // 1024 // 1024), 413)


def _count_tags(source, tags: tuple[bytes, ...], limit: int) -> bool:
    """Whether the XML part holds more than ``limit`` of these start tags, counted as it unpacks (no parsing)."""
    count, tail = 0, b""
    while chunk := source.read(1 << 20):
        window = tail + chunk
        count += sum(window.count(tag) for tag in tags)
        if count > limit:
            return True
        tail = window[-(min(map(len, tags)) - 1):]  # shorter than any tag: no tag is counted twice
    return False


def _xlsx_rows(data: bytes, deadline: float) -> Iterator[_Row]:
    _refuse_zip_bombs(data)
    from openpyxl.reader.excel import ExcelReader
    from openpyxl.styles.stylesheet import apply_stylesheet
    from openpyxl.xml.constants import SHARED_STRINGS
    from openpyxl.worksheet._reader import CELL_TAG, ROW_TAG, WorkSheetParser
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
                    raise UploadError(N_("The workbook has more than %(n)s different texts. Split it into several "
                                         "files, or save it as CSV.", n=f"{MAX_CELLS:,}"), 413)
        reader.read_strings()
        reader.read_workbook()
        apply_stylesheet(archive, reader.wb)
        sheet_path = next(rel.target for _, rel in reader.parser.find_sheets()
                          if rel.target in reader.valid_files and "chartsheet" not in rel.Type)
        with archive.open(sheet_path) as source:
            if _count_tags(source, (b"<row ", b"<row>", b"<row/>"), MAX_FILE_ROWS):  # blank rows too
                raise _too_many_rows()
        with archive.open(sheet_path) as source:
            cells = _XlsxCells(WorkSheetParser(source, reader.shared_strings, data_only=False, epoch=reader.wb.epoch,
                                               date_formats=reader.wb._date_formats,
                                               timedelta_formats=reader.wb._timedelta_formats))
            rows = number = 0
            values: dict[int, str] = {}
            for _, element in iterparse(source):
                if element.tag == CELL_TAG:
                    if cells.count % 1000 == 0 and clock.monotonic() > deadline:
                        raise _out_of_time()
                    column, text = cells.read(element)
                    if text:
                        if column > MAX_COLUMNS + 1:
                            raise UploadError(N_("Cell %(cell)s has a value, beyond the limit of %(n)s columns. "
                                                 "Delete the columns after %(last)s, or save the sheet as CSV.",
                                                 cell=element.get('r') or _column_letter(column - 1), n=MAX_COLUMNS,
                                                 last=_column_letter(MAX_COLUMNS - 1)), 413)
                        values[column] = text
                    element.clear()
                elif element.tag == ROW_TAG:
                    rows += 1
                    number = int(element.get("r") or number + 1)
                    if number > MAX_FILE_ROWS or rows > MAX_FILE_ROWS:
                        raise _too_many_rows(max(number, rows))
                    element.clear()
                    cells.next_row(number)
                    yield _Row(number, [values.get(i, "") for i in range(1, max(values, default=0) + 1)])
                    values = {}
    except UploadError:
        raise
    except Exception:  # noqa: BLE001 - see above
        raise UploadError(N_("The workbook could not be read. Save it again from Excel as .xlsx, or as CSV.")) from None
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
            raise UploadError(N_("The sheet has more than %(n)s cells, empty formatted ones included. Delete the "
                                 "unused rows and columns, or save it as CSV.", n=f"{MAX_CELLS:,}"), 413)
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
                run.findtext(self._text) or "" for run in block.iterfind(self._run))
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


# --- checking ----------------------------------------------------------------------------------

def _normalise_header(name: str) -> str:
    key = _HEADER_NOISE.sub("_", name.strip().lower()).strip("_")
    return ALIASES.get(key, key)


def _column_letter(index: int) -> str:
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


def _popular_typos() -> dict[str, str]:
    popular = ("gmail.com", "googlemail.com", "yahoo.com", "hotmail.com", "outlook.com", "icloud.com",
               "yandex.ru", "rambler.ru", "protonmail.com", "hotmail.co.uk", "yahoo.co.uk")
    # Real domains a generated "typo" could hit; never flag them.
    real = {"mail.com", "mil.ru", "gmx.com", "yandex.com", "outlook.de", "hotmail.de", "live.com"}
    typos: dict[str, str] = {}
    for domain in popular:
        label, _, rest = domain.partition(".")
        variants = set()
        for i in range(len(label)):
            variants.add(label[:i] + label[i + 1:])                       # gmal
            variants.add(label[:i] + label[i] + label[i:])                # gmaail
            if i + 1 < len(label):
                variants.add(label[:i] + label[i + 1] + label[i] + label[i + 2:])  # gmial
        for variant in variants - {label}:
            typos[f"{variant}.{rest}"] = domain
        for tld_typo in ({"com": ("con", "cmo", "comm", "cpm", "vom", "xom", "om", "co", "c0m"),
                          "ru": ("ry", "ri", "rj", "tu", "ur", "rus")}.get(rest, ())):
            typos[f"{label}.{tld_typo}"] = domain
    typos.update({"yahho.com": "yahoo.com", "gnail.com": "gmail.com", "gmaul.com": "gmail.com",
                  "hotnail.com": "hotmail.com", "mail.ry": "mail.ru", "mail.ri": "mail.ru", "mail.rj": "mail.ru",
                  "mail.tu": "mail.ru", "mial.ru": "mail.ru", "maill.ru": "mail.ru", "mali.ru": "mail.ru",
                  "mail.r": "mail.ru", "yndex.ru": "yandex.ru", "yandeks.ru": "yandex.ru", "bk.ry": "bk.ru",
                  "lits.ru": "list.ru", "inbox.ry": "inbox.ru"})
    return {typo: right for typo, right in typos.items() if typo not in real and typo not in popular}


#: Misspelt big mail domains → the domain meant; an address there would bounce.
DOMAIN_TYPOS = _popular_typos()


@lru_cache(maxsize=4096)
def _checked_domain(domain: str) -> str:
    """The normalised domain, checked once per distinct domain by email-validator."""
    return validate_email(f"x@{domain}", check_deliverability=False).domain


def check_email(value: str, *, domain_choices: Mapping[str, str] | None = None) -> tuple[str | None, N_ | None]:
    """(normalised address, None) or (None, message); suggests the domain meant for an obvious typo.

    ``domain_choices`` are staff's answers to earlier suggestions: misspelt domain → the domain to use
    (the suggestion accepted, or the domain as written kept).
    """
    local, at, domain = value.rpartition("@")
    try:
        if at and len(value) <= 254 and len(local) <= 64 and _SIMPLE_LOCAL.match(local):
            address = f"{local}@{_checked_domain(domain)}"  # the common case: one full check per domain
        else:
            address = validate_email(value, check_deliverability=False).normalized
    except EmailNotValidError as exc:
        return None, N_("Not a valid email address: %(reason)s", reason=str(exc))
    local, _, domain = address.rpartition("@")
    meant = DOMAIN_TYPOS.get(domain.lower())
    if meant:
        chosen = (domain_choices or {}).get(domain.lower())
        if chosen in (meant, domain.lower()):
            return f"{local}@{chosen}", None
        return None, N_("The domain looks misspelt: did you mean %(address)s?", address=f"{local}@{meant}")
    return address, None


@dataclass(frozen=True)
class _Columns:
    #: (cell index, template variable or builtin, header as written)
    used: tuple[tuple[int, str, str], ...]
    width: int
    header: tuple[str, ...]
    missing: tuple[str, ...]
    errors: tuple[RowError, ...]
    warnings: tuple[str, ...]


def _match_header(header_row: int, cells: list[str], variables: Iterable[str]) -> _Columns:
    header = [c.strip() for c in cells]
    while header and not header[-1]:
        header.pop()
    if len(header) > MAX_COLUMNS:
        raise UploadError(N_("The file has %(n)s columns; the limit is %(limit)s.", n=len(header), limit=MAX_COLUMNS))
    # ``{{ signature }}`` is the signature's place in the document, never a column.
    wanted = {_normalise_header(v): v for v in variables if v != SIGNATURE_VARIABLE}
    for builtin in BUILTIN_COLUMNS:
        wanted.setdefault(builtin, builtin)
    used, errors, warnings, seen = [], [], [], {}
    for index, title in enumerate(header):
        if not title:
            warnings.append(N_("Column %(letter)s has no name in the header; its values are ignored.",
                               letter=_column_letter(index)))
            continue
        key = _normalise_header(title)
        if key in seen:
            errors.append(RowError(header_row, title, N_(
                "The column \"%(column)s\" appears twice (columns %(first)s and %(second)s). Keep one.",
                column=title, first=_column_letter(seen[key]), second=_column_letter(index))))
            continue
        seen[key] = index
        if key in wanted:
            used.append((index, wanted[key], title))
        else:
            warnings.append(N_("The column \"%(column)s\" is not used by the template; it is ignored.", column=title))
    required = {_normalise_header(v) for v in variables if v != SIGNATURE_VARIABLE} - {"name", "phone"} | {"email"}
    missing = sorted(wanted[k] for k in required if k not in seen)
    for name in missing:
        message = (N_("The column \"email\" is missing: every recipient needs an email address.") if name == "email"
                   else N_("The column \"%(column)s\" is missing: the template uses {{ %(column)s }}.", column=name))
        errors.append(RowError(header_row, name, message))
    return _Columns(tuple(used), len(header), tuple(header), tuple(missing), tuple(errors), tuple(warnings))


class _Collector:
    """Counts and keeps errors while rows stream past."""

    def __init__(self, max_errors: int | None):
        self.max_errors = max_errors
        self.kept: list[RowError] = []
        self.count = 0

    def add(self, error: RowError) -> None:
        self.count += 1
        if self.max_errors is None or len(self.kept) < self.max_errors:
            self.kept.append(error)


def validate_recipients(data: bytes, *, filename: str, variables: Iterable[str], keep_rows: bool = False,
                        max_errors: int | None = MAX_ERRORS_KEPT,
                        domain_choices: Mapping[str, str] | None = None,
                        suppressed: SuppressionLookup | None = None) -> ValidationReport:
    """Read the file and check every row against the template's variables; raises UploadError if unreadable.

    ``domain_choices``: misspelt domain → the domain staff chose for it (see ``check_email``).
    ``suppressed``: a lookup of the suppression list; the valid rows it knows are reported (a warning:
    batch creation keeps them, not mailed).
    """
    variables = list(variables)
    table = _open_table(data, filename, clock.monotonic() + MAX_READ_SECONDS)
    rows = table.rows
    for header_row, cells, _, _ in rows:
        if any(c.strip() for c in cells):
            break
    else:
        raise UploadError(N_("The file has no header row and no data."))
    columns = _match_header(header_row, cells, variables)

    def row_values(cells: list[str]) -> dict:
        # Only for rows with an error: the CSV report shows what the row said next to what is wrong.
        return {title or _column_letter(i): cells[i] for i, title in enumerate(columns.header) if i < len(cells)}

    collector = _Collector(max_errors)
    for error in columns.errors:
        collector.add(error)
    warnings = list(columns.warnings)
    formula_columns: set[str] = set()
    first_row_of: dict[str, int] = {}
    kept: list[Recipient] = []
    #: (row, address) of every valid row, for the suppression lookup at the end.
    valid_addresses: list[tuple[int, str]] = []
    total = valid = 0
    unusable = bool(columns.errors)
    for number, cells, line, problem in rows:
        if not any(c.strip() for c in cells):
            continue
        total += 1
        errors_before = collector.count
        if problem:
            opened = next((i for i, c in enumerate(cells) if "\n" in c or "\r" in c), 0)
            collector.add(RowError(number, columns.header[opened] if opened < len(columns.header)
                                   else _column_letter(opened), problem))
        if len(cells) > columns.width and any(c.strip() for c in cells[columns.width:]):
            collector.add(RowError(number, _column_letter(columns.width), N_(
                "This row has %(values)s values but the header has %(columns)s columns. "
                "A value probably contains the delimiter without quotes.", values=len(cells), columns=columns.width),
                row_values(cells)))
        email, name, phone, values = None, "", None, {}
        for index, var, title in columns.used:
            value = cells[index].strip() if index < len(cells) else ""
            limit = COLUMN_LIMITS.get(var, MAX_VALUE_CHARS)
            if len(value) > limit:
                collector.add(RowError(number, title, N_("Too long: %(n)s characters; the limit is %(limit)s.",
                                                         n=f"{len(value):,}", limit=f"{limit:,}"), row_values(cells)))
                continue
            if "\x00" in value:
                collector.add(RowError(number, title, N_(
                    "The value contains a NUL character (line %(line)s), which is binary data, not text. Remove it, "
                    "or save the file again as CSV UTF-8.", line=f"{line:,}") if line else N_(
                    "The value contains a NUL character, which is binary data, not text. Remove it, or save the file "
                    "again as CSV UTF-8.")))
                continue
            if value.startswith(_FORMULA_START) and len(value) > 1 and title not in formula_columns:
                formula_columns.add(title)
                warnings.append(N_("The column \"%(column)s\" has values that look like formulas (first on row "
                                   "%(row)s); they are kept as plain text and never calculated.", column=title,
                                   row=number))
            if var == "email":
                if not value:
                    collector.add(RowError(number, title, N_("The email address is empty."), row_values(cells)))
                    continue
                email, problem = check_email(value, domain_choices=domain_choices)
                if problem:
                    domain = value.rpartition("@")[2].strip().lower()
                    typo = (domain, DOMAIN_TYPOS[domain]) if domain in DOMAIN_TYPOS else None
                    collector.add(RowError(number, title, problem, row_values(cells), typo))
                    continue
                key = email.lower()
                if key in first_row_of:
                    collector.add(RowError(number, title, N_("Duplicate email: %(email)s is already on row %(row)s.",
                                                             email=email, row=first_row_of[key]), row_values(cells)))
                    email = None
                    continue
                first_row_of[key] = number
            elif var == "name":
                name = value
            elif var == "phone":
                phone = value or None
            elif not value:
                collector.add(RowError(number, title, N_("The value is empty; the template needs {{ %(variable)s }}.",
                                                         variable=var), row_values(cells)))
                continue
            values[var] = value
        if collector.count == errors_before and not unusable and email:
            valid += 1
            if suppressed is not None:
                valid_addresses.append((number, email))
            if keep_rows:
                kept.append(Recipient(number, email, name, phone, {v: values.get(v, "") for v in variables}))
    if total == 0:
        raise UploadError(N_("The file has a header but no rows of recipients."))
    listed = _suppressed_rows(valid_addresses, suppressed) if suppressed is not None else []
    return ValidationReport(
        total_rows=total, valid_rows=valid, invalid_rows=total - valid, errors=tuple(collector.kept),
        error_count=collector.count, warnings=tuple(warnings), columns=columns.header,
        missing_columns=columns.missing, file_format=table.file_format, encoding=table.encoding,
        delimiter=table.delimiter, recipients=tuple(kept),
        suppressed=tuple(listed[:max_errors] if max_errors is not None else listed), suppressed_count=len(listed),
    )


def _suppressed_rows(addresses: list[tuple[int, str]], lookup: SuppressionLookup) -> list[SuppressedRow]:
    entries = lookup([email for _, email in addresses])
    return [SuppressedRow(row=number, email=email, source=entry.source, reason=entry.reason, since=entry.created_at)
            for number, email in addresses if (entry := entries.get(email.lower())) is not None]


def error_report_csv(report: ValidationReport) -> str:
    """All errors of a report (validated with ``max_errors=None``) as CSV, safe to open in a spreadsheet.

    Each line carries the row's values after the problem, so the file can be fixed from the report alone.
    """
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["row", "column", "message", *(formula_safe(c) for c in report.columns)])
    for error in report.errors:
        values = [formula_safe(error.values.get(c, "")) for c in report.columns]
        writer.writerow([error.row, formula_safe(error.column), formula_safe(str(error.message)), *values])
    return out.getvalue()


def typo_domains(report: ValidationReport) -> dict[str, str]:
    """Misspelt domains among the kept errors → the domain meant, for staff to accept or keep."""
    return {e.typo[0]: e.typo[1] for e in report.errors if e.typo}


# --- keeping the file between "check" and "create" ---------------------------------------------

@dataclass(frozen=True)
class StoredUpload:
    upload_id: str
    filename: str
    data: bytes
    template_id: int | None


def store_upload(storage: Storage, *, data: bytes, filename: str, user_id: int, template_id: int | None) -> StoredUpload:
    """Keep an uploaded file under an unguessable id, so that "create" re-reads the same bytes."""
    upload_id = secrets.token_hex(16)
    safe_name = PurePosixPath((filename or "upload").replace("\\", "/")).name[:200]
    meta = {"filename": safe_name, "user_id": user_id, "template_id": template_id}
    storage.put(f"uploads/{upload_id}/file", data, content_type="application/octet-stream")
    storage.put(f"uploads/{upload_id}/meta.json", json.dumps(meta).encode(), content_type="application/json")
    return StoredUpload(upload_id, safe_name, data, template_id)


def load_upload(storage: Storage, *, upload_id: str, user_id: int) -> StoredUpload:
    """The stored file, if it exists and belongs to this user; raises UploadError otherwise."""
    gone = UploadError(N_("The uploaded file is no longer available. Upload it again."), 410)
    if not _UPLOAD_ID.match(upload_id or ""):
        raise gone
    try:
        meta = json.loads(storage.get(f"uploads/{upload_id}/meta.json"))
        if meta.get("user_id") != user_id:
            raise gone
        data = storage.get(f"uploads/{upload_id}/file")
    except (StorageError, ValueError):
        raise gone from None
    return StoredUpload(upload_id, meta["filename"], data, meta.get("template_id"))

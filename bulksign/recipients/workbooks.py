"""Reading an .xlsx recipients file: checked for zip bombs and counted before it is read, then streamed cell by
cell; cell text is kept as text (a formula is never evaluated)."""

from __future__ import annotations

import io
import time as clock
import zipfile
from collections.abc import Iterator
from datetime import date, datetime, time
from typing import IO, TYPE_CHECKING
from xml.etree.ElementTree import Element

from bulksign.core import zip_archives
from bulksign.core.messages import N_, N_plural
from bulksign.recipients import cell_formats
from bulksign.recipients.rows import (
    MAX_COLUMNS,
    MAX_FILE_ROWS,
    Row,
    UploadError,
    column_letter,
    out_of_time,
    too_many_rows,
)

if TYPE_CHECKING:
    from openpyxl.workbook.workbook import Workbook
    from openpyxl.worksheet._reader import WorkSheetParser

#: Cells an .xlsx sheet may hold, empty formatted ones included (a full sheet of 200 columns would need 40 million).
MAX_CELLS = 4_000_000
#: What an .xlsx may unpack to, and how much bigger than packed one part may be (Apache POI refuses beyond
#: 100 too): 2.2 MB that unpack to 1.5 GB of empty rows kept a web worker busy for its whole timeout.
MAX_UNPACKED_BYTES = 256 * 1024 * 1024
MAX_COMPRESSION_RATIO = 100
_ZIP_LIMITS = zip_archives.Limits(parts=10_000, part_bytes=MAX_UNPACKED_BYTES, total_bytes=MAX_UNPACKED_BYTES)


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
                N_plural(
                    "The workbook is mostly empty space: its part %(part)s unpacks to %(n)s time its "
                    "size (empty rows or columns formatted to the end of the sheet?). Delete the unused "
                    "rows and columns, or save the sheet as CSV.",
                    "The workbook is mostly empty space: its part %(part)s unpacks to %(n)s times its "
                    "size (empty rows or columns formatted to the end of the sheet?). Delete the unused "
                    "rows and columns, or save the sheet as CSV.",
                    part.file_size // part.compress_size,
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


def _count_tags(source: IO[bytes], tags: tuple[bytes, ...], limit: int) -> bool:
    """Whether the XML part holds more than ``limit`` of these start tags, counted as it unpacks (no parsing)."""
    count, tail = 0, b""
    while chunk := source.read(1 << 20):
        window = tail + chunk
        count += sum(window.count(tag) for tag in tags)
        if count > limit:
            return True
        tail = window[-(min(map(len, tags)) - 1) :]  # shorter than any tag: no tag is counted twice
    return False


def xlsx_rows(data: bytes, deadline: float, *, language: str = "en") -> Iterator[Row]:
    """The sheet's rows, each cell's value as its number format shows it in ``language`` (``cell_formats``)."""
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
                        N_plural(
                            "The workbook has more than %(n)s different text. Split it into several "
                            "files, or save it as CSV.",
                            "The workbook has more than %(n)s different texts. Split it into several "
                            "files, or save it as CSV.",
                            MAX_CELLS,
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
                raise too_many_rows()
        with archive.open(sheet_path) as source:
            cells = _XlsxCells(
                WorkSheetParser(
                    source,
                    reader.shared_strings,
                    data_only=False,
                    epoch=reader.wb.epoch,
                    date_formats=reader.wb._date_formats,
                    timedelta_formats=reader.wb._timedelta_formats,
                ),
                _Formats(reader.wb, language),
            )
            rows = number = 0
            values: dict[int, str] = {}
            for _, element in iterparse(source):
                if element.tag == CELL_TAG:
                    if cells.count % 1000 == 0 and clock.monotonic() > deadline:
                        raise out_of_time()
                    column, text = cells.read(element)
                    if text:
                        if column > MAX_COLUMNS + 1:
                            raise UploadError(
                                N_plural(
                                    "Cell %(cell)s has a value, beyond the limit of %(num)s column. "
                                    "Delete the columns after %(last)s, or save the sheet as CSV.",
                                    "Cell %(cell)s has a value, beyond the limit of %(num)s columns. "
                                    "Delete the columns after %(last)s, or save the sheet as CSV.",
                                    MAX_COLUMNS,
                                    cell=element.get("r") or column_letter(column - 1),
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
                        raise too_many_rows(max(number, rows))
                    element.clear()
                    raw = cells.raw or None
                    cells.next_row(number)
                    yield Row(number, [values.get(i, "") for i in range(1, max(values, default=0) + 1)], raw=raw)
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

    def __init__(self, parser: WorkSheetParser, formats: _Formats) -> None:
        from openpyxl.utils.cell import column_index_from_string
        from openpyxl.worksheet._reader import FORMULA_TAG, INLINE_STRING, SHEET_MAIN_NS, VALUE_TAG

        self.parser = parser
        self._formats = formats
        #: This row's cells shown otherwise than stored: cell index → the stored value.
        self.raw: dict[int, str] = {}
        self._column_index = column_index_from_string
        self.count = 0
        self.column = 0
        self._formula, self._inline, self._value = FORMULA_TAG, INLINE_STRING, VALUE_TAG
        self._text, self._run = f"{{{SHEET_MAIN_NS}}}t", f"{{{SHEET_MAIN_NS}}}r"

    def next_row(self, number: int) -> None:
        self.column = 0
        self.raw = {}
        self.parser.row_counter = number

    def read(self, element: Element) -> tuple[int, str]:
        self.count += 1
        if self.count > MAX_CELLS:
            raise UploadError(
                N_plural(
                    "The sheet has more than %(n)s cell, empty formatted ones included. Delete the "
                    "unused rows and columns, or save it as CSV.",
                    "The sheet has more than %(n)s cells, empty formatted ones included. Delete the "
                    "unused rows and columns, or save it as CSV.",
                    MAX_CELLS,
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
            style = int(element.get("s", 0))
            if kind == "n" and style not in self.parser.date_formats:
                number = float(value) if "." in value or "e" in value.lower() else int(value)
                show = self._formats.show(style)
                if show is None:
                    return self.column, _cell_text(number)
                return self.column, self._shown(show, style, number)
        elif value is None and element.find(self._formula) is None:
            return self.column, ""
        self.parser.col_counter = self.column - 1
        parsed = self.parser.parse_cell(element)["value"]
        show = self._formats.show(int(element.get("s", 0))) if isinstance(parsed, (date, int, float)) else None
        if show is None or isinstance(parsed, bool):
            return self.column, _cell_text(parsed)
        return self.column, self._shown(show, int(element.get("s", 0)), parsed)

    def _shown(self, show: cell_formats.Show, style: int, value: int | float | date) -> str:
        text = self._formats.shown(show, style, value)
        stored = _cell_text(value)
        if text != stored:
            self.raw[self.column - 1] = stored
        return text


class _Formats:
    """Each cell style's number format as ``cell_formats`` shows it, looked up once per style; the texts of the
    values seen most recently kept, since a column of dates or salaries repeats many of them."""

    def __init__(self, workbook: Workbook, language: str) -> None:
        from openpyxl.styles.numbers import BUILTIN_FORMATS, BUILTIN_FORMATS_MAX_SIZE

        self._styles, self._custom = workbook._cell_styles, workbook._number_formats
        self._builtin, self._first_custom = BUILTIN_FORMATS, BUILTIN_FORMATS_MAX_SIZE
        self._language = language
        self._by_style: dict[int, cell_formats.Show | None] = {}
        self._texts: dict[tuple[int, int | float | date], str] = {}

    def show(self, style: int) -> cell_formats.Show | None:
        if style not in self._by_style:
            code = "General"
            if 0 <= style < len(self._styles):
                number_format = self._styles[style].numFmtId
                if number_format < self._first_custom:
                    code = self._builtin.get(number_format, "General")
                elif number_format - self._first_custom < len(self._custom):
                    code = self._custom[number_format - self._first_custom]
            self._by_style[style] = cell_formats.format_for(code, language=self._language)
        return self._by_style[style]

    def shown(self, show: cell_formats.Show, style: int, value: int | float | date) -> str:
        """The value as ``show`` writes it; as stored when it cannot (a number beyond what a format can round)."""
        key = (style, value)
        text = self._texts.get(key)
        if text is None:
            if len(self._texts) > 50_000:
                self._texts.clear()
            try:
                text = show(value)
            except (ArithmeticError, ValueError):
                text = _cell_text(value)
            self._texts[key] = text
        return text


def _cell_text(value: object) -> str:
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

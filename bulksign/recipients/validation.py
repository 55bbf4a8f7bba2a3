"""Checking a recipients file: every row against a template, reporting what is wrong and where.

The file is read by ``recipient_files`` (an unreadable upload raises UploadError, a 4xx for the views);
everything row-level becomes a RowError with the row number the user sees in Excel (header = 1).
Addresses are checked by ``email_checks``; the file waits between "check" and "create" in ``uploads``.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from bulksign.core.messages import N_
from bulksign.core.spreadsheets import formula_safe
from bulksign.documents.signature_box import SIGNATURE_VARIABLE
from bulksign.mail.email_checks import DOMAIN_TYPOS, check_email
from bulksign.recipients.files import MAX_COLUMNS, Row, UploadError, column_letter, open_table

#: Errors kept for the page and the API; the counts cover all of them, the CSV report lists all.
MAX_ERRORS_KEPT = 100
#: Longest value per recognised column; template variables get MAX_VALUE_CHARS.
COLUMN_LIMITS = {"email": 254, "name": 300, "phone": 50}
MAX_VALUE_CHARS = 2000
#: Columns every request has; only ``email`` is required.
BUILTIN_COLUMNS = ("email", "name", "phone")
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

_FORMULA_START = ("=", "+", "-", "@")
_HEADER_NOISE = re.compile(r"[\s\-]+")


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
            "total_rows": self.total_rows,
            "valid_rows": self.valid_rows,
            "invalid_rows": self.invalid_rows,
            "error_count": self.error_count,
            "errors": [
                {
                    "row": e.row,
                    "column": e.column,
                    "message": str(e.message),
                    **({"suggestion": e.typo[1]} if e.typo else {}),
                }
                for e in self.errors
            ],
            "warnings": [str(w) for w in self.warnings],
            "columns": list(self.columns),
            "missing_columns": list(self.missing_columns),
            "file_format": self.file_format,
            "encoding": self.encoding,
            "delimiter": self.delimiter,
            "suppressed_count": self.suppressed_count,
            "suppressed": [
                {"row": r.row, "email": r.email, "source": r.source, "reason": r.reason, "since": r.since.isoformat()}
                for r in self.suppressed
            ],
        }


def _normalise_header(name: str) -> str:
    key = _HEADER_NOISE.sub("_", name.strip().lower()).strip("_")
    return ALIASES.get(key, key)


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
            warnings.append(
                N_("Column %(letter)s has no name in the header; its values are ignored.", letter=column_letter(index))
            )
            continue
        key = _normalise_header(title)
        if key in seen:
            errors.append(
                RowError(
                    header_row,
                    title,
                    N_(
                        'The column "%(column)s" appears twice (columns %(first)s and %(second)s). Keep one.',
                        column=title,
                        first=column_letter(seen[key]),
                        second=column_letter(index),
                    ),
                )
            )
            continue
        seen[key] = index
        if key in wanted:
            used.append((index, wanted[key], title))
        else:
            warnings.append(N_('The column "%(column)s" is not used by the template; it is ignored.', column=title))
    required = {_normalise_header(v) for v in variables if v != SIGNATURE_VARIABLE} - {"name", "phone"} | {"email"}
    missing = sorted(wanted[k] for k in required if k not in seen)
    for name in missing:
        message = (
            N_('The column "email" is missing: every recipient needs an email address.')
            if name == "email"
            else N_('The column "%(column)s" is missing: the template uses {{ %(column)s }}.', column=name)
        )
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


class _Checked(NamedTuple):
    """A valid row's values (a Recipient is made of them only when rows are kept)."""

    email: str
    name: str
    phone: str | None
    #: Values by template variable (and ``email``, ``name``, ``phone``).
    values: dict


class _RowChecker:
    """Checks data rows as they stream past: counts their errors, notes formula-like columns, finds duplicates."""

    def __init__(self, columns: _Columns, *, max_errors: int | None, domain_choices: Mapping[str, str] | None):
        self.columns = columns
        self.errors = _Collector(max_errors)
        for error in columns.errors:
            self.errors.add(error)
        self.warnings: list[N_] = list(columns.warnings)
        self._domain_choices = domain_choices
        self._formula_columns: set[str] = set()
        self._first_row_of: dict[str, int] = {}

    def check(self, row: Row) -> _Checked | None:
        """The row's values, or None when it has an error (counted) or no address."""
        errors_before = self.errors.count
        self._check_shape(row)
        cells, email, name, phone, values = row.cells, None, "", None, {}
        for index, var, title in self.columns.used:
            value = cells[index].strip() if index < len(cells) else ""
            if not self._usable(row, var, title, value):
                continue
            if var == "email":
                email = self._address(row, title, value)
                if email is None:
                    continue
            elif var == "name":
                name = value
            elif var == "phone":
                phone = value or None
            elif not value:
                self._error(row, title, N_("The value is empty; the template needs {{ %(variable)s }}.", variable=var))
                continue
            values[var] = value
        if self.errors.count > errors_before or not email:
            return None
        return _Checked(email, name, phone, values)

    def _check_shape(self, row: Row) -> None:
        """A quote left open, or more values than the header has columns."""
        header, width = self.columns.header, self.columns.width
        if row.problem:
            opened = next((i for i, c in enumerate(row.cells) if "\n" in c or "\r" in c), 0)
            self.errors.add(
                RowError(row.number, header[opened] if opened < len(header) else column_letter(opened), row.problem)
            )
        if len(row.cells) > width and any(c.strip() for c in row.cells[width:]):
            self._error(
                row,
                column_letter(width),
                N_(
                    "This row has %(values)s values but the header has %(columns)s columns. "
                    "A value probably contains the delimiter without quotes.",
                    values=len(row.cells),
                    columns=width,
                ),
            )

    def _usable(self, row: Row, var: str, title: str, value: str) -> bool:
        """False for a value too long or not text (its error counted); a value like a formula is noted once per column."""
        limit = COLUMN_LIMITS.get(var, MAX_VALUE_CHARS)
        if len(value) > limit:
            self._error(
                row,
                title,
                N_("Too long: %(n)s characters; the limit is %(limit)s.", n=f"{len(value):,}", limit=f"{limit:,}"),
            )
            return False
        if "\x00" in value:
            # Without the row's values: they would carry the NUL into the errors CSV.
            self.errors.add(
                RowError(
                    row.number,
                    title,
                    N_(
                        "The value contains a NUL character (line %(line)s), which is binary data, not text. Remove it, "
                        "or save the file again as CSV UTF-8.",
                        line=f"{row.line:,}",
                    )
                    if row.line
                    else N_(
                        "The value contains a NUL character, which is binary data, not text. Remove it, or save the file "
                        "again as CSV UTF-8."
                    ),
                )
            )
            return False
        if value.startswith(_FORMULA_START) and len(value) > 1 and title not in self._formula_columns:
            self._formula_columns.add(title)
            self.warnings.append(
                N_(
                    'The column "%(column)s" has values that look like formulas (first on row '
                    "%(row)s); they are kept as plain text and never calculated.",
                    column=title,
                    row=row.number,
                )
            )
        return True

    def _address(self, row: Row, title: str, value: str) -> str | None:
        """The checked address, or None with its error counted (empty, invalid, misspelt domain, a duplicate)."""
        if not value:
            self._error(row, title, N_("The email address is empty."))
            return None
        email, problem = check_email(value, domain_choices=self._domain_choices)
        if problem:
            domain = value.rpartition("@")[2].strip().lower()
            typo = (domain, DOMAIN_TYPOS[domain]) if domain in DOMAIN_TYPOS else None
            self.errors.add(RowError(row.number, title, problem, self._values(row.cells), typo))
            return None
        key = email.lower()
        if key in self._first_row_of:
            self._error(
                row,
                title,
                N_("Duplicate email: %(email)s is already on row %(row)s.", email=email, row=self._first_row_of[key]),
            )
            return None
        self._first_row_of[key] = row.number
        return email

    def _error(self, row: Row, column: str, message: N_) -> None:
        self.errors.add(RowError(row.number, column, message, self._values(row.cells)))

    def _values(self, cells: list[str]) -> dict:
        """Only for rows with an error: the CSV report shows what the row said next to what is wrong."""
        return {title or column_letter(i): cells[i] for i, title in enumerate(self.columns.header) if i < len(cells)}


def _header_row(rows: Iterator[Row]) -> Row:
    """The first record with a value: the header; the data rows follow from the same iterator."""
    for row in rows:
        if any(c.strip() for c in row.cells):
            return row
    raise UploadError(N_("The file has no header row and no data."))


def validate_recipients(
    data: bytes,
    *,
    filename: str,
    variables: Iterable[str],
    keep_rows: bool = False,
    max_errors: int | None = MAX_ERRORS_KEPT,
    domain_choices: Mapping[str, str] | None = None,
    suppressed: SuppressionLookup | None = None,
) -> ValidationReport:
    """Read the file and check every row against the template's variables; raises UploadError if unreadable.

    ``domain_choices``: misspelt domain → the domain staff chose for it (see ``email_checks.check_email``).
    ``suppressed``: a lookup of the suppression list; the valid rows it knows are reported (a warning:
    batch creation keeps them, not mailed).
    """
    variables = list(variables)
    table = open_table(data, filename=filename)
    header = _header_row(table.rows)
    columns = _match_header(header.number, header.cells, variables)
    checker = _RowChecker(columns, max_errors=max_errors, domain_choices=domain_choices)
    # A column missing or named twice: no row can be used, yet every row is checked so all is fixed at once.
    usable = not columns.errors
    kept: list[Recipient] = []
    #: (row, address) of every valid row, for the suppression lookup at the end.
    valid_addresses: list[tuple[int, str]] = []
    total = valid = 0
    for row in table.rows:
        if not any(c.strip() for c in row.cells):
            continue
        total += 1
        checked = checker.check(row)
        if checked is None or not usable:
            continue
        valid += 1
        if suppressed is not None:
            valid_addresses.append((row.number, checked.email))
        if keep_rows:
            kept.append(
                Recipient(
                    row.number,
                    checked.email,
                    checked.name,
                    checked.phone,
                    {v: checked.values.get(v, "") for v in variables},
                )
            )
    if total == 0:
        raise UploadError(N_("The file has a header but no rows of recipients."))
    listed = _suppressed_rows(valid_addresses, suppressed) if suppressed is not None else []
    return ValidationReport(
        total_rows=total,
        valid_rows=valid,
        invalid_rows=total - valid,
        errors=tuple(checker.errors.kept),
        error_count=checker.errors.count,
        warnings=tuple(checker.warnings),
        columns=columns.header,
        missing_columns=columns.missing,
        file_format=table.file_format,
        encoding=table.encoding,
        delimiter=table.delimiter,
        recipients=tuple(kept),
        suppressed=tuple(listed[:max_errors] if max_errors is not None else listed),
        suppressed_count=len(listed),
    )


def _suppressed_rows(addresses: list[tuple[int, str]], lookup: SuppressionLookup) -> list[SuppressedRow]:
    entries = lookup([email for _, email in addresses])
    return [
        SuppressedRow(row=number, email=email, source=entry.source, reason=entry.reason, since=entry.created_at)
        for number, email in addresses
        if (entry := entries.get(email.lower())) is not None
    ]


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

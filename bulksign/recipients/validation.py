"""Checking a recipients file: every row against a template, reporting what is wrong and where."""

from __future__ import annotations

import io
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bulksign.core.messages import N_
from bulksign.core.spreadsheets import csv_writer
from bulksign.doc_templates.columns import DOCUMENT, OPTIONAL
from bulksign.documents.signature_box import RECIPIENT_ROLE, mark_role
from bulksign.models import Suppression
from bulksign.recipients.column_mapping import ColumnMapping
from bulksign.recipients.files import open_table
from bulksign.recipients.headers import (
    UNUSED_COLUMN,
    ColumnChoice,
    column_choices,
    column_samples,
    join_cells,
    match_header,
)
from bulksign.recipients.parties import PartyPerson
from bulksign.recipients.row_checks import PhoneRule, RowChecker, RowError
from bulksign.recipients.rows import Row, UploadError, normalise_header

#: Errors kept for the page and the API; the counts cover all of them, the CSV report lists all.
MAX_ERRORS_KEPT = 100
#: Data rows whose values the mapping form shows as samples and guesses columns from.
SAMPLE_ROWS = 50


@dataclass(frozen=True)
class Recipient:
    row_number: int
    email: str
    name: str
    phone: str | None
    #: Values by template variable name.
    data: dict[str, str]
    #: The other parties this row names in its ``<role>_email`` (``_name``, ``_phone``) columns, by role.
    parties: Mapping[str, PartyPerson] = field(default_factory=dict)


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
SuppressionLookup = Callable[[list[str]], Mapping[str, Suppression]]


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
    #: Valid rows with a phone, and those of them without an address (reached by text alone).
    phone_rows: int = 0
    text_only_rows: int = 0
    #: Each column the template fills from the file, with the file's column(s) filling or suggested for it.
    choices: tuple[ColumnChoice, ...] = ()
    #: The first few values of each of the file's columns, by header as written.
    samples: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: The mapping the check used (given, or the one remembered for the template), if any.
    mapping: ColumnMapping | None = None
    #: Whether that mapping was the remembered one, applied because the file has every column it names.
    mapping_remembered: bool = False

    @property
    def shown_errors(self) -> tuple[RowError, ...]:
        """The errors the check page lists: while columns wait to be matched, not the missing ones (the mapping
        form asks for them instead)."""
        if not self.unmatched:
            return self.errors
        return tuple(e for e in self.errors if e.column not in self.missing_columns)

    @property
    def shown_warnings(self) -> tuple[N_, ...]:
        """The warnings the check page lists: not "column X is not used" for a column the mapping form offers."""
        offered = {h for c in self.choices for h in c.headers}
        return tuple(
            w for w in self.warnings if not (w.msgid == UNUSED_COLUMN.msgid and w.values.get("column") in offered)
        )

    @property
    def unmatched(self) -> tuple[ColumnChoice, ...]:
        """The required columns the file does not fill (under their name or a mapping)."""
        return tuple(c for c in self.choices if c.column in self.missing_columns)

    @property
    def errors_truncated(self) -> bool:
        return self.error_count > len(self.errors)

    def as_dict(self) -> dict[str, Any]:
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
            "unmatched_columns": [
                {"column": c.column, **({"suggestion": list(c.headers)} if c.headers else {})} for c in self.unmatched
            ],
            "mapping": self.mapping.to_json() if self.mapping else None,
            "phone_rows": self.phone_rows,
            "text_only_rows": self.text_only_rows,
            "suppressed_count": self.suppressed_count,
            "suppressed": [
                {"row": r.row, "email": r.email, "source": r.source, "reason": r.reason, "since": r.since.isoformat()}
                for r in self.suppressed
            ],
        }


def template_columns(variables: Mapping[str, str] | Iterable[str]) -> dict[str, str]:
    """The template's variables as ``validate_recipients`` reads them: variable → ``columns.DOCUMENT`` or
    ``columns.MAIL`` (every row needs a value) or ``columns.OPTIONAL``, as ``columns.needed_columns`` says. A
    plain list of names: each needed, but ``name`` and ``phone``, and no marks."""
    if isinstance(variables, Mapping):
        return dict(variables)
    return {v: OPTIONAL if v in ("name", "phone") else DOCUMENT for v in variables if not mark_role(v)}


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
    variables: Mapping[str, str] | Iterable[str],
    keep_rows: bool = False,
    max_errors: int | None = MAX_ERRORS_KEPT,
    domain_choices: Mapping[str, str] | None = None,
    suppressed: SuppressionLookup | None = None,
    roles: Sequence[str] = (),
    fixed_roles: Collection[str] = (),
    phones: PhoneRule | None = None,
    mapping: ColumnMapping | None = None,
    remembered: ColumnMapping | None = None,
    language: str = "en",
    kinds: Mapping[str, str] | None = None,
) -> ValidationReport:
    """Read the file and check every row against the template's ``variables`` (as ``template_columns`` takes them);
    UploadError if unreadable. ``domain_choices``: misspelt domain → staff's choice; ``suppressed``: the
    suppression list's lookup (its rows are reported); ``roles``: the other roles, each named per row by
    ``<role>_email`` or, in ``fixed_roles``, once for the batch; ``phones``: a batch that texts checks its phones
    so (``row_checks.PhoneRule``). ``mapping``: which of the file's columns fill
    which template columns (UploadError when it does not fit the file); else ``remembered``, the template's last
    one, when the file has every column it names. ``language``: the batch's, in which an .xlsx's dates and numbers
    read as its cells' formats show them. ``kinds``: the variables the template shows as a date or a number
    (``columns.value_kinds``), whose values must be one."""
    variables = template_columns(variables)
    table = open_table(data, filename=filename, language=language)
    header = _header_row(table.rows)
    roles = [r for r in roles if r != RECIPIENT_ROLE]
    titles = {normalise_header(c) for c in header.cells if c.strip()}
    from_memory = (
        mapping is None and remembered is not None and {normalise_header(h) for h in remembered.headers} <= titles
    )
    mapping = remembered if from_memory else mapping
    columns = match_header(
        header.number, header.cells, variables, roles=roles, fixed=fixed_roles, mapping=mapping, phones=phones
    )
    rows = join_cells(table.rows, columns) if columns.joins else table.rows
    sample_rows: list[list[str]] = []
    checker = RowChecker(columns, max_errors=max_errors, domain_choices=domain_choices, kinds=kinds, language=language)
    # A column missing or named twice: no row can be used, yet every row is checked so all is fixed at once.
    usable = not columns.errors
    kept: list[Recipient] = []
    #: (row, address) of every valid row, for the suppression lookup at the end.
    valid_addresses: list[tuple[int, str]] = []
    total = valid = phone_rows = text_only_rows = 0
    for row in rows:
        if not any(c.strip() for c in row.cells):
            continue
        total += 1
        if total <= SAMPLE_ROWS:
            sample_rows.append(row.cells)
        checked = checker.check(row)
        if checked is None or not usable:
            continue
        valid += 1
        phone_rows += bool(checked.phone)
        text_only_rows += not checked.email
        if suppressed is not None and checked.email:
            valid_addresses.append((row.number, checked.email))
        if keep_rows:
            kept.append(
                Recipient(
                    row.number,
                    checked.email,
                    checked.name,
                    checked.phone,
                    {v: checked.values.get(v, "") for v in variables},
                    {
                        role: PartyPerson(
                            checked.values[column],
                            checked.values.get(f"{role}_name", ""),
                            checked.values.get(f"{role}_phone") or None,
                        )
                        for column, role in columns.party_emails.items()
                    },
                )
            )
    if total == 0:
        raise UploadError(N_("The file has a header but no rows of recipients."))
    listed = _suppressed_rows(valid_addresses, suppressed) if suppressed is not None else []
    samples = column_samples(columns.header, sample_rows)
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
        phone_rows=phone_rows,
        text_only_rows=text_only_rows,
        choices=column_choices(columns, variables, samples=samples, mapping=mapping),
        samples=samples,
        mapping=mapping,
        mapping_remembered=from_memory,
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
    writer = csv_writer(out)
    writer.writerow(["row", "column", "message", *report.columns])
    for error in report.errors:
        values = [error.values.get(c, "") for c in report.columns]
        writer.writerow([error.row, error.column, str(error.message), *values])
    return out.getvalue()


def typo_domains(report: ValidationReport) -> dict[str, str]:
    """Misspelt domains among the kept errors → the domain meant, for staff to accept or keep."""
    return {e.typo[0]: e.typo[1] for e in report.errors if e.typo}

"""Checking a recipients file: every row against a template, reporting what is wrong and where."""

from __future__ import annotations

import io
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bulksign.core.messages import N_, N_plural
from bulksign.core.spreadsheets import csv_writer
from bulksign.doc_templates.columns import DOCUMENT, MAIL, OPTIONAL
from bulksign.documents.field_boxes import field_name
from bulksign.documents.signature_box import RECIPIENT_ROLE, mark_role
from bulksign.models import Suppression
from bulksign.recipients.files import open_table
from bulksign.recipients.parties import PartyPerson
from bulksign.recipients.row_checks import Columns, PhoneRule, RowChecker, RowError
from bulksign.recipients.rows import MAX_COLUMNS, Row, UploadError, column_letter, normalise_header

#: Errors kept for the page and the API; the counts cover all of them, the CSV report lists all.
MAX_ERRORS_KEPT = 100
#: Columns every request has; ``email`` is always required, ``name`` and ``phone`` where the template prints them.
BUILTIN_COLUMNS = ("email", "name", "phone")


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


#: A party's columns: ``<role>_email`` names who signs, ``_name`` and ``_phone`` may say more.
PARTY_COLUMNS = ("email", "name", "phone")


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
            "suppressed_count": self.suppressed_count,
            "phone_rows": self.phone_rows,
            "text_only_rows": self.text_only_rows,
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


def _match_header(
    header_row: int,
    cells: list[str],
    variables: Mapping[str, str],
    *,
    roles: Sequence[str],
    fixed: Collection[str],
    phones: PhoneRule | None = None,
) -> Columns:
    header = [c.strip() for c in cells]
    while header and not header[-1]:
        header.pop()
    if len(header) > MAX_COLUMNS:
        raise UploadError(
            N_plural(
                "The file has %(num)s column; the limit is %(limit)s.",
                "The file has %(num)s columns; the limit is %(limit)s.",
                len(header),
                limit=MAX_COLUMNS,
            )
        )
    # ``{{ signature }}`` and the version's ``{{ signature_<role> }}`` are not among them (``template_columns``).
    wanted = {normalise_header(v): v for v in variables}
    for builtin in BUILTIN_COLUMNS:
        wanted.setdefault(builtin, builtin)
    for role in roles:
        for part in PARTY_COLUMNS:
            wanted.setdefault(f"{role}_{part}", f"{role}_{part}")
    used: list[tuple[int, str, str]] = []
    errors: list[RowError] = []
    warnings: list[N_] = []
    seen: dict[str, int] = {}
    for index, title in enumerate(header):
        if not title:
            warnings.append(
                N_("Column %(letter)s has no name in the header; its values are ignored.", letter=column_letter(index))
            )
            continue
        key = normalise_header(title)
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
    # Printed whatever the row holds (``email`` always: every recipient is mailed): every row needs a value.
    required = {v: where for v, where in variables.items() if where != OPTIONAL}
    # Every recipient is mailed, or texted when the batch texts rows without an address and the file has phones.
    if not (phones and phones.without_address and "phone" in seen):
        required["email"] = DOCUMENT
    missing = sorted(v for v in required if normalise_header(v) not in seen)
    for name in missing:
        errors.append(RowError(header_row, name, _missing_column(name, where=required[name])))
    party_emails = {f"{role}_email": role for role in roles if normalise_header(f"{role}_email") in seen}
    for role in roles:
        if f"{role}_email" not in party_emails and role not in fixed:
            missing.append(f"{role}_email")
            errors.append(RowError(header_row, f"{role}_email", _nobody_signs(role)))
    for name in sorted(v for v in wanted.values() if v not in required and normalise_header(v) not in seen):
        # Not another party's columns, nor a field's prefill (``field_<name>``): they may be left out.
        if name not in BUILTIN_COLUMNS and name in variables and not field_name(name):
            warnings.append(
                N_(
                    'There is no column "%(column)s": the template uses {{ %(column)s }} only where it may be empty, '
                    "so it stays empty.",
                    column=name,
                )
            )
    return Columns(
        tuple(used),
        len(header),
        tuple(header),
        tuple(missing),
        tuple(errors),
        tuple(warnings),
        required,
        party_emails,
        phones,
    )


def _nobody_signs(role: str) -> N_:
    return N_(
        'Nobody is named to sign as %(role)s: add a column "%(role)s_email" (and "%(role)s_name") with who signs on '
        'each row, or name one %(role)s for the whole batch on the new-batch form (the API\'s "parties").',
        role=role,
    )


def _missing_column(name: str, *, where: str) -> N_:
    if name == "email":
        return N_('The column "email" is missing: every recipient needs an email address.')
    if where == MAIL:
        return N_(
            'The column "%(column)s" is missing: the invitation or reminder mail prints {{ %(column)s }}.', column=name
        )
    return N_('The column "%(column)s" is missing: the template uses {{ %(column)s }}.', column=name)


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
) -> ValidationReport:
    """Read the file and check every row against the template's ``variables`` (as ``template_columns`` takes them);
    UploadError if unreadable. ``domain_choices``: misspelt domain → staff's choice; ``suppressed``: the
    suppression list's lookup (its rows are reported); ``roles``: the other roles, each named per row by
    ``<role>_email`` or, in ``fixed_roles``, once for the batch; ``phones``: a batch that texts checks its phones
    so (``row_checks.PhoneRule``)."""
    variables = template_columns(variables)
    table = open_table(data, filename=filename)
    header = _header_row(table.rows)
    roles = [r for r in roles if r != RECIPIENT_ROLE]
    columns = _match_header(header.number, header.cells, variables, roles=roles, fixed=fixed_roles, phones=phones)
    checker = RowChecker(columns, max_errors=max_errors, domain_choices=domain_choices)
    # A column missing or named twice: no row can be used, yet every row is checked so all is fixed at once.
    usable = not columns.errors
    kept: list[Recipient] = []
    #: (row, address) of every valid row, for the suppression lookup at the end.
    valid_addresses: list[tuple[int, str]] = []
    total = valid = phone_rows = text_only_rows = 0
    for row in table.rows:
        if not any(c.strip() for c in row.cells):
            continue
        total += 1
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

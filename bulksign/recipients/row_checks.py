"""Checking a recipients file's data rows as they stream past: each value against its column, the address, the
row's shape; counting errors (keeping the first ones), noting formula-like columns, finding duplicates."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from bulksign.core.messages import N_, N_plural
from bulksign.doc_templates.columns import DATE, MAIL
from bulksign.doc_templates.value_filters import parse_amount, parse_date
from bulksign.mail.email_checks import DOMAIN_TYPOS, check_email
from bulksign.recipients.phones import e164
from bulksign.recipients.rows import Row, column_letter

#: Longest value per recognised column; template variables get MAX_VALUE_CHARS.
COLUMN_LIMITS = {"email": 254, "name": 300, "phone": 50}
MAX_VALUE_CHARS = 2000
_FORMULA_START = ("=", "+", "-", "@")
#: A phone number or a signed number (``+491701234567``, ``-500``, ``+49 (170) 123-45``): it starts like a formula
#: but a spreadsheet reads it as a number, so it is not one to warn of.
_NUMBER_LIKE = re.compile(r"[+-]?[\d\s().,/-]*\d[\d\s().,/-]*")


@dataclass(frozen=True)
class RowError:
    #: Row number as Excel shows it (the header is row 1).
    row: int
    #: The column as written in the file's header (or the template variable when it is missing).
    column: str
    #: What is wrong, translated when shown (``N_``).
    message: N_
    #: The row's values as read, for the errors CSV (column header → value).
    values: dict[str, str] = field(default_factory=dict, compare=False)
    #: For a misspelt mail domain: (domain as written, domain meant), which staff may accept or keep.
    typo: tuple[str, str] | None = None


@dataclass(frozen=True)
class Columns:
    #: (cell index, template variable or builtin, header as written)
    used: tuple[tuple[int, str, str], ...]
    width: int
    header: tuple[str, ...]
    missing: tuple[str, ...]
    errors: tuple[RowError, ...]
    warnings: tuple[N_, ...]
    #: Variables every row must fill → where they are printed whatever the row holds (``columns.DOCUMENT``, ``MAIL``).
    required: Mapping[str, str] = field(default_factory=dict)
    #: Another party's address column (``employer_email``) → its role: every row names that party there.
    party_emails: Mapping[str, str] = field(default_factory=dict)
    #: Columns a mapping joins from several of the file's (a name in three): (index the row has its value at, the
    #: file's columns joined), placed right after the header's columns (``headers.join_cells``).
    joins: tuple[tuple[int, tuple[int, ...]], ...] = ()
    #: Template variables ``<column>_raw`` without a column of their own: (variable, index of ``<column>``'s cell),
    #: filled with that cell's stored value (an .xlsx number or date as stored, not as its format shows it).
    raw_of: tuple[tuple[str, int], ...] = ()
    #: How phones are read: None, as written (mail only); else the batch's ``PhoneRule``.
    phones: PhoneRule | None = None


@dataclass(frozen=True)
class PhoneRule:
    """A batch that texts: phones are checked and written in E.164 (national ones read in ``region``), and with
    ``without_address`` a row may have a phone and no address."""

    region: str
    without_address: bool


def _empty(variable: str, *, where: str) -> N_:
    """Why an empty value is refused: the document or a mail text prints it on every row ("Hello ,")."""
    if where == MAIL:
        return N_("The value is empty; the invitation or reminder mail prints {{ %(variable)s }}.", variable=variable)
    return N_("The value is empty; the template needs {{ %(variable)s }}.", variable=variable)


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

    #: Empty for a row reached by text alone (``PhoneRule.without_address``).
    email: str
    name: str
    phone: str | None
    #: Values by template variable (and ``email``, ``name``, ``phone``).
    values: dict[str, str]


class RowChecker:
    """Checks data rows as they stream past: counts their errors, notes formula-like columns, finds duplicates."""

    def __init__(
        self,
        columns: Columns,
        *,
        max_errors: int | None,
        domain_choices: Mapping[str, str] | None,
        kinds: Mapping[str, str] | None = None,
        language: str = "en",
    ):
        self.columns = columns
        #: Variables the template shows as a date or a number (``columns.value_kinds``): their values must be one.
        self._kinds = kinds or {}
        self._language = language
        self.errors = _Collector(max_errors)
        for error in columns.errors:
            self.errors.add(error)
        self.warnings: list[N_] = list(columns.warnings)
        self._domain_choices = domain_choices
        self._formula_columns: set[str] = set()
        self._first_row_of: dict[str, int] = {}
        #: Other parties' phone columns (``employer_phone``), read like the recipient's when the batch texts.
        self._party_phones = {f"{role}_phone": role for role in columns.party_emails.values()}

    def check(self, row: Row) -> _Checked | None:
        """The row's values, or None when it has an error (counted) or no address (nor, when texts may stand in for
        one, a phone)."""
        errors_before = self.errors.count
        self._check_shape(row)
        cells, email, name, phone, values = row.cells, None, "", None, {}
        rule = self.columns.phones
        written = {var: cells[index].strip() if index < len(cells) else "" for index, var, _ in self.columns.used}
        # With texts standing in for an address, a row with a phone needs none.
        texted = bool(rule and rule.without_address and written.get("phone") and not written.get("email"))
        for _, var, title in self.columns.used:
            value = written[var]
            if not self._usable(row, var, title, value):
                continue
            if var == "email" and texted:
                email = ""
            elif var == "email":
                email = self._address(row, title, value)
                if email is None:
                    continue
            elif var == "phone" and rule is not None and value:
                value = self._phone(row, title, value, rule=rule, keyed=texted) or ""
                if not value:
                    continue
            elif var in self.columns.party_emails:
                role = self.columns.party_emails[var]
                # The party reached by text alone, as a recipient may be.
                by_text = bool(rule and rule.without_address and written.get(f"{role}_phone") and not value)
                address = "" if by_text else self._party_address(row, title, value, role=role)
                if address is None:
                    continue
                value = address
            elif var in self._party_phones and rule is not None and value:
                value = self._phone(row, title, value, rule=rule, keyed=False) or ""
                if not value:
                    continue
            elif not value and var in self.columns.required:
                self._error(row, title, _empty(var, where=self.columns.required[var]))
                continue
            if value and var in self._kinds and not self._of_kind(row, var, title, value):
                continue
            if var == "name":
                name = value
            elif var == "phone":
                phone = value or None
            values[var] = value
        for var, index in self.columns.raw_of:
            stored = row.raw.get(index) if row.raw else None
            values[var] = stored if stored is not None else cells[index].strip() if index < len(cells) else ""
        if texted and "email" not in written:
            email = ""
        if self.errors.count > errors_before or email is None or not (email or phone):
            return None
        return _Checked(email, name, phone, values)

    def _phone(self, row: Row, title: str, value: str, *, rule: PhoneRule, keyed: bool) -> str | None:
        """The phone in E.164, or None with its error counted; a phone that stands in for the address is unique."""
        number, problem = e164(value, region=rule.region)
        if number is None:
            assert problem is not None
            self._error(row, title, problem)
            return None
        if keyed:
            if number in self._first_row_of:
                self._error(
                    row,
                    title,
                    N_(
                        "Duplicate phone: %(phone)s is already on row %(row)s.",
                        phone=number,
                        row=self._first_row_of[number],
                    ),
                )
                return None
            self._first_row_of[number] = row.number
        return number

    def _check_shape(self, row: Row) -> None:
        """A quote left open, or more values than the header has columns."""
        header, width = self.columns.header, self.columns.width
        beyond = width + len(self.columns.joins)  # joined values sit between the header's columns and any extra
        if row.problem:
            opened = next((i for i, c in enumerate(row.cells) if "\n" in c or "\r" in c), 0)
            self.errors.add(
                RowError(row.number, header[opened] if opened < len(header) else column_letter(opened), row.problem)
            )
        if len(row.cells) > beyond and any(c.strip() for c in row.cells[beyond:]):
            self._error(
                row,
                column_letter(width),
                N_(
                    "This row has %(values)s but the header has %(columns)s. "
                    "A value probably contains the delimiter without quotes.",
                    values=N_plural("%(num)s value", "%(num)s values", len(row.cells) - len(self.columns.joins)),
                    columns=N_plural("%(num)s column", "%(num)s columns", width),
                ),
            )

    def _usable(self, row: Row, var: str, title: str, value: str) -> bool:
        """False for a value too long or not text (its error counted); a value like a formula is noted once per column."""
        limit = COLUMN_LIMITS.get(var, MAX_VALUE_CHARS)
        if len(value) > limit:
            self._error(
                row,
                title,
                N_plural(
                    "Too long: %(n)s character; the limit is %(limit)s.",
                    "Too long: %(n)s characters; the limit is %(limit)s.",
                    len(value),
                    n=f"{len(value):,}",
                    limit=f"{limit:,}",
                ),
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
        if (
            value.startswith(_FORMULA_START)
            and len(value) > 1
            and not _NUMBER_LIKE.fullmatch(value)
            and title not in self._formula_columns
        ):
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

    def _of_kind(self, row: Row, var: str, title: str, value: str) -> bool:
        """Whether a value the template shows as a date or a number is one; its error counted when not."""
        if self._kinds[var] == DATE:
            if parse_date(value) is not None:
                return True
            self._error(
                row,
                title,
                N_(
                    '"%(value)s" is not a date: the template shows {{ %(variable)s|date }}. Put a date in this cell, '
                    "as 01.02.2027 or 2027-02-01.",
                    value=value[:60],
                    variable=var,
                ),
            )
            return False
        if parse_amount(value, language=self._language) is not None:
            return True
        self._error(
            row,
            title,
            N_(
                '"%(value)s" is not a number: the template shows {{ %(variable)s }} as an amount. Put a number in '
                "this cell, as 120000 or 120 000,50.",
                value=value[:60],
                variable=var,
            ),
        )
        return False

    def _address(self, row: Row, title: str, value: str) -> str | None:
        """The checked address, or None with its error counted (empty, invalid, misspelt domain, a duplicate)."""
        if not value:
            rule = self.columns.phones
            self._error(
                row,
                title,
                N_("The email address is empty, and so is the phone: give one of them.")
                if rule and rule.without_address
                else N_("The email address is empty."),
            )
            return None
        email, problem = check_email(value, domain_choices=self._domain_choices)
        if problem:
            domain = value.rpartition("@")[2].strip().lower()
            typo = (domain, DOMAIN_TYPOS[domain]) if domain in DOMAIN_TYPOS else None
            self.errors.add(RowError(row.number, title, problem, self._values(row.cells), typo))
            return None
        assert email is not None  # check_email gives an address or a problem
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

    def _party_address(self, row: Row, title: str, value: str, *, role: str) -> str | None:
        """Another party's checked address, or None with its error counted. The same person may sign many rows
        (a line manager): no duplicate check."""
        if not value:
            rule = self.columns.phones
            self._error(
                row,
                title,
                N_(
                    "The address of the party who signs as %(role)s is empty, and so is their phone: give one of them.",
                    role=role,
                )
                if rule and rule.without_address
                else N_("The address of the party who signs as %(role)s is empty.", role=role),
            )
            return None
        email, problem = check_email(value, domain_choices=self._domain_choices)
        if problem:
            self._error(row, title, problem)
            return None
        return email

    def _error(self, row: Row, column: str, message: N_) -> None:
        self.errors.add(RowError(row.number, column, message, self._values(row.cells)))

    def _values(self, cells: list[str]) -> dict[str, str]:
        """Only for rows with an error: the CSV report shows what the row said next to what is wrong."""
        return {title or column_letter(i): cells[i] for i, title in enumerate(self.columns.header) if i < len(cells)}

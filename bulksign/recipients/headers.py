"""A recipients file's header matched to a template's columns: by name, or as a mapping staff confirmed says, with
what is missing, named twice or left unused; and, for the columns left without one, the file's likeliest column."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from bulksign.core.messages import N_, N_plural
from bulksign.doc_templates.columns import DOCUMENT, MAIL, OPTIONAL
from bulksign.documents.field_boxes import field_name
from bulksign.recipients.column_guess import suggest
from bulksign.recipients.column_mapping import ColumnMapping, MappedHeader, apply_mapping
from bulksign.recipients.row_checks import Columns, PhoneRule, RowError
from bulksign.recipients.rows import MAX_COLUMNS, Row, UploadError, column_letter, normalise_header

#: Columns every request has; ``email`` is always required, ``name`` and ``phone`` where the template prints them.
BUILTIN_COLUMNS = ("email", "name", "phone")
#: A party's columns: ``<role>_email`` names who signs, ``_name`` and ``_phone`` may say more.
PARTY_COLUMNS = ("email", "name", "phone")
#: The warning for a column the template does not use (the check page leaves out those it offers to match).
UNUSED_COLUMN = N_('The column "%(column)s" is not used by the template; it is ignored.')
#: A template variable ending so asks for its column's stored value (``salary_raw``: ``120000``, not ``120 000 ₽``).
RAW_SUFFIX = "_raw"
#: Values shown for each of the file's columns where staff match them.
SAMPLES_PER_COLUMN = 3


class Match(StrEnum):
    """How a template column found its column in the file."""

    SAME_NAME = "same_name"
    MAPPED = "mapped"
    SUGGESTED = "suggested"
    NONE = "none"


@dataclass(frozen=True)
class ColumnChoice:
    """One template column on the mapping form: the file's column(s) filling it now, or suggested for it."""

    column: str
    #: Every row needs a value (the template prints it, or it is the address).
    required: bool
    #: The file's headers, as written: several are joined with a space.
    headers: tuple[str, ...]
    how: Match


def match_header(
    header_row: int,
    cells: list[str],
    variables: Mapping[str, str],
    *,
    roles: Sequence[str],
    fixed: Collection[str],
    mapping: ColumnMapping | None = None,
    phones: PhoneRule | None = None,
) -> Columns:
    """The file's header matched to the template's ``variables`` (``validation.template_columns``), and to the other
    parties' columns of ``roles`` unless ``fixed`` for the batch; ``mapping`` matches columns named otherwise;
    ``phones``: a batch that texts (``row_checks.PhoneRule``).
    UploadError for too many columns or a mapping that does not fit this file and template."""
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
    mapped = apply_mapping(mapping, header=header, wanted=wanted) if mapping else MappedHeader({}, ())
    targets = {normalise_header(v) for v in mapped.renames.values()} | {normalise_header(j[0]) for j in mapped.joins}
    joined = {i for _, indices, _ in mapped.joins for i in indices}
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
        if index in joined:
            continue
        key = normalise_header(mapped.renames.get(index, title))
        if index not in mapped.renames and key in targets:
            warnings.append(
                N_(
                    'The column "%(column)s" is not used: the columns as matched fill {{ %(variable)s }}.',
                    column=title,
                    variable=wanted[key],
                )
            )
            continue
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
            warnings.append(N_(UNUSED_COLUMN.msgid, column=title))
    for offset, (variable, _, title) in enumerate(mapped.joins):
        # Joined values are put after the header's columns, where the row reader places them (``join_cells``).
        seen[normalise_header(variable)] = len(header) + offset
        used.append((len(header) + offset, variable, title))
    raw_of = []
    for variable in variables:
        # ``{{ salary_raw }}``: the salary column's value as stored, where ``{{ salary }}`` is as the cell shows it.
        key = normalise_header(variable)
        base = seen.get(key.removesuffix(RAW_SUFFIX)) if key.endswith(RAW_SUFFIX) and key not in seen else None
        if base is not None and base < len(header):
            seen[key] = base
            raw_of.append((variable, base))
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
        joins=tuple((len(header) + k, indices) for k, (_, indices, _) in enumerate(mapped.joins)),
        raw_of=tuple(raw_of),
        phones=phones,
    )


def join_cells(rows: Iterator[Row], columns: Columns) -> Iterator[Row]:
    """The rows with each joined column's value (its parts, space-separated) at the index ``columns`` reads it."""
    width, joins = columns.width, columns.joins
    for row in rows:
        cells = row.cells[:width] + [""] * (width - len(row.cells))
        for _, indices in joins:
            cells.append(" ".join(p for i in indices if i < len(row.cells) and (p := row.cells[i].strip())))
        yield row._replace(cells=cells + row.cells[width:])


def column_choices(
    columns: Columns,
    variables: Mapping[str, str],
    *,
    samples: Mapping[str, Sequence[str]],
    mapping: ColumnMapping | None,
) -> tuple[ColumnChoice, ...]:
    """Every column the template fills from the file (the address and name first), with the file's column(s) that
    fill it now, or else the likeliest (``column_guess``): what the mapping form offers."""
    filled = {var: title for _, var, title in columns.used}
    mapped = mapping.columns if mapping else {}
    wanted = list(
        dict.fromkeys(
            [
                "email",
                "name",
                *columns.required,
                *(m for m in columns.missing),
                *(v for v in variables if not field_name(v)),
                "phone",
            ]
        )
    )
    open_ = [v for v in wanted if v not in filled]
    guesses = suggest(open_, headers=columns.header, samples=samples, taken=filled.values())
    choices = []
    for var in wanted:
        required = var in columns.required or var in columns.missing
        if var in filled:
            headers = next((h for c, h in mapped.items() if normalise_header(c) == normalise_header(var)), None)
            choices.append(
                ColumnChoice(var, required, headers or (filled[var],), Match.MAPPED if headers else Match.SAME_NAME)
            )
        else:
            choices.append(
                ColumnChoice(var, required, guesses.get(var, ()), Match.SUGGESTED if var in guesses else Match.NONE)
            )
    return tuple(choices)


def column_samples(header: Sequence[str], rows: Sequence[list[str]]) -> dict[str, tuple[str, ...]]:
    """The first few different values of each of the file's columns, as the mapping form shows them."""
    found: dict[str, list[str]] = {h: [] for h in header if h}
    for cells in rows:
        for index, title in enumerate(header):
            if title and index < len(cells) and len(found[title]) < SAMPLES_PER_COLUMN:
                value = cells[index].strip()
                if value and value not in found[title]:
                    found[title].append(value[:80])
    return {h: tuple(v) for h, v in found.items()}


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

"""Which of a file's columns fill which template columns when their names differ: the mapping staff confirm (or an
API call gives), checked against the file's header, and the one a team last confirmed for a template, remembered.
More in docs/architecture/recipients.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from bulksign.core.messages import N_
from bulksign.models import ColumnMapping as RememberedMapping
from bulksign.recipients.rows import MAX_COLUMNS, UploadError, column_letter, normalise_header

#: A template column may join this many of the file's columns (a name in three: Фамилия, Имя, Отчество).
MAX_JOINED = 5
MAX_NAME_CHARS = 200
_RAW = TypeAdapter(dict[str, str | list[str]])


@dataclass(frozen=True)
class ColumnMapping:
    """Template column → the file's headers that fill it, as written; several are joined with a space."""

    columns: Mapping[str, tuple[str, ...]]

    def to_json(self) -> dict[str, list[str]]:
        return {column: list(headers) for column, headers in self.columns.items()}

    @property
    def headers(self) -> frozenset[str]:
        return frozenset(h for headers in self.columns.values() for h in headers)


@dataclass(frozen=True)
class MappedHeader:
    """A mapping checked against a file's header: the file's column filling each template column by its index,
    and the template columns several columns are joined into (template column, indices, title for errors)."""

    renames: Mapping[int, str]
    joins: tuple[tuple[str, tuple[int, ...], str], ...]


def parse_mapping(raw: object) -> ColumnMapping:
    """A mapping as given (JSON text or an object: ``{"name": "ФИО"}``, ``{"name": ["Фамилия", "Имя"]}``); an empty
    value matches nothing. UploadError(422) saying what is wrong with its shape."""
    try:
        given = _RAW.validate_json(raw) if isinstance(raw, (str, bytes)) else _RAW.validate_python(raw)
    except ValidationError:
        raise _bad(
            N_('The columns must be an object of template column → the file\'s column, e.g. {"name": "ФИО"}.')
        ) from None
    if len(given) > MAX_COLUMNS:
        raise _bad(N_("The columns match more than %(n)s template columns.", n=MAX_COLUMNS))
    columns: dict[str, tuple[str, ...]] = {}
    for column, value in given.items():
        headers = tuple(h.strip() for h in ([value] if isinstance(value, str) else value) if h.strip())
        if len(column) > MAX_NAME_CHARS or any(len(h) > MAX_NAME_CHARS for h in headers):
            raise _bad(N_("A column name is longer than %(n)s characters.", n=MAX_NAME_CHARS))
        if len(headers) > MAX_JOINED:
            raise _bad(
                N_('"%(column)s" joins more than %(n)s of the file\'s columns.', column=column.strip(), n=MAX_JOINED)
            )
        if headers:
            columns[column.strip()] = headers
    return ColumnMapping(columns)


def _bad(message: N_) -> UploadError:
    return UploadError(message, 422, field="columns")


def apply_mapping(mapping: ColumnMapping, *, header: Sequence[str], wanted: Mapping[str, str]) -> MappedHeader:
    """Where each mapped template column reads its values in ``header``; UploadError(422) for a template column the
    template does not have (``wanted``: normalised name → column), a header the file does not have, or a header
    matched to two template columns."""
    index_of: dict[str, int] = {}
    twice: dict[str, int] = {}
    for index, title in enumerate(header):
        key = normalise_header(title)
        if key in index_of:
            twice.setdefault(key, index)
        index_of.setdefault(key, index)
    renames: dict[int, str] = {}
    joins: list[tuple[str, tuple[int, ...], str]] = []
    matched_to: dict[str, str] = {}
    for column, headers in mapping.columns.items():
        variable = wanted.get(normalise_header(column))
        if variable is None:
            raise _bad(
                N_(
                    'The template has no column "%(column)s" to match. Its columns: %(columns)s.',
                    column=column,
                    columns=", ".join(sorted(set(wanted.values()))),
                )
            )
        indices = []
        for title in headers:
            key = normalise_header(title)
            if key not in index_of:
                raise _bad(
                    N_(
                        'The file has no column "%(header)s" (matched to "%(column)s"). Its columns: %(headers)s.',
                        header=title,
                        column=variable,
                        headers=", ".join(h for h in header if h)[:1000],
                    )
                )
            if key in twice:
                raise _bad(
                    N_(
                        'The file has the column "%(header)s" twice (columns %(first)s and %(second)s): keep one, or '
                        "name them apart, to match it.",
                        header=title,
                        first=column_letter(index_of[key]),
                        second=column_letter(twice[key]),
                    )
                )
            if key in matched_to:
                raise _bad(
                    N_(
                        'The file\'s column "%(header)s" is matched to both "%(first)s" and "%(second)s": match each '
                        "template column to a column of its own.",
                        header=title,
                        first=matched_to[key],
                        second=variable,
                    )
                )
            matched_to[key] = variable
            indices.append(index_of[key])
        if len(indices) == 1:
            renames[indices[0]] = variable
        else:
            joins.append((variable, tuple(indices), " + ".join(header[i] for i in indices)))
    return MappedHeader(renames, tuple(joins))


def remembered(session: Session, *, template_id: int, team_id: int | None) -> ColumnMapping | None:
    """The mapping last confirmed for this template in this team (None: its creator's own template), if any."""
    row = session.scalar(_stored(template_id, team_id))
    if row is None:
        return None
    try:
        return parse_mapping(row.columns)
    except UploadError:
        return None  # a stored mapping is ours; one that no longer parses is simply not offered


def remember(
    session: Session, *, template_id: int, team_id: int | None, mapping: ColumnMapping, user_id: int, now: datetime
) -> None:
    """Keep ``mapping`` as the one offered next time for this template in this team. The caller commits."""
    row = session.scalar(_stored(template_id, team_id))
    if row is None:
        row = RememberedMapping(template_id=template_id, team_id=team_id)
        session.add(row)
    row.columns = mapping.to_json()
    row.updated_by_id = user_id
    row.updated_at = now
    session.flush()


def _stored(template_id: int, team_id: int | None) -> Select[tuple[RememberedMapping]]:
    team = RememberedMapping.team_id.is_(None) if team_id is None else RememberedMapping.team_id == team_id
    return select(RememberedMapping).where(RememberedMapping.template_id == template_id, team)

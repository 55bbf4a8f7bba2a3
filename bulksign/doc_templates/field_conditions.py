"""When a field applies: a field may be shown and required only when another field or a row's column holds a value
(a child-allowance section only when "children" is greater than 0). A field that does not apply is not asked for,
its value is dropped, and nothing of it is stored or printed. More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bulksign.core.messages import N_
from bulksign.core.schemas import Text
from bulksign.doc_templates.errors import FieldSettingsError

#: Longest value a condition compares with, and longest name of its source.
MAX_VALUE_CHARS = 200
MAX_SOURCE_CHARS = 64


class SourceKind(StrEnum):
    """What a condition looks at: another field of the template, or a column of the recipients file."""

    FIELD = "field"
    COLUMN = "column"


class Operator(StrEnum):
    """How a condition tests its source's value."""

    FILLED = "filled"
    EQUALS = "equals"
    GREATER_THAN = "greater_than"


class ConditionIn(BaseModel):
    """A field's condition as staff and the API give it: the field is shown and required only when it holds."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["field", "column"] = Field(
        description="`field`: `source` is another field's name (`children` for `{{ field_children }}`); `column`: "
        "a column of the recipients file (a file may leave it out: then it is empty)."
    )
    source: Text = Field(min_length=1, max_length=MAX_SOURCE_CHARS, description="The field's or the column's name.")
    operator: Literal["filled", "equals", "greater_than"] = Field(
        description="`filled`: it has a value (a checkbox: ticked); `equals`: it is `value` (numbers compared as "
        "numbers, text without regard to case); `greater_than`: it is a number or date (YYYY-MM-DD) above `value`."
    )
    value: Text = Field("", max_length=MAX_VALUE_CHARS, description="What `equals` and `greater_than` compare with.")


@dataclass(frozen=True)
class FieldCondition:
    """When a field applies: its ``source`` (a field or a column, by ``kind``) passes ``operator`` against
    ``value``. Kept as strings, as stored; ``checked_condition`` makes sure they are known ones."""

    kind: str
    source: str
    operator: str
    value: str = ""

    @property
    def live(self) -> bool:
        """Whether it looks at a field, whose value may change as a signer types."""
        return self.kind == SourceKind.FIELD

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "source": self.source, "operator": self.operator, "value": self.value}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> FieldCondition | None:
        if not data:
            return None
        return cls(**{key: str(data.get(key) or "") for key in ("kind", "source", "operator", "value")})


def checked_condition(name: str, raw: object) -> FieldCondition | None:
    """The condition staff gave field ``name`` (None or an empty one: none), in its shape (``ConditionIn``): a
    ``greater_than`` compares with a number or a date, a ``filled`` with nothing; FieldSettingsError says what is
    wrong. Whether its source exists, and is filled in time, is ``check_conditions``'."""
    if raw is None or raw == {} or (isinstance(raw, Mapping) and not raw.get("source")):
        return None
    try:
        given = ConditionIn.model_validate(raw)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "condition"
        raise FieldSettingsError(
            N_(
                "The condition of “%(name)s” is not right (%(where)s): %(problem)s.",
                name=name,
                where=where,
                problem=problem["msg"],
            ),
            field=name,
        ) from None
    value = given.value.strip()
    if given.operator == Operator.FILLED.value:
        value = ""
    elif given.operator == Operator.GREATER_THAN.value and _number(value) is None and _date(value) is None:
        raise FieldSettingsError(
            N_(
                "“%(name)s” is shown when a value is greater than “%(value)s”: give a number or a date (YYYY-MM-DD).",
                name=name,
                value=value[:40],
            ),
            field=name,
        )
    source = given.source.strip()
    if given.kind == SourceKind.COLUMN.value and not (source.isidentifier() and source == source.lower()):
        raise FieldSettingsError(
            N_(
                "“%(column)s” cannot be a column of the recipients file: a column's name is lowercase letters, "
                "digits and _.",
                column=source[:40],
            ),
            field=name,
        )
    return FieldCondition(kind=given.kind, source=source, operator=given.operator, value=value)


@dataclass(frozen=True)
class Conditioned:
    """What ``check_conditions`` needs of a field: its name, who fills it and its condition."""

    name: str
    role: str
    condition: FieldCondition | None


def check_conditions(fields: Sequence[Conditioned], *, routing: Sequence[Sequence[str]]) -> None:
    """Each condition on a field looks at a field the template has, not at its own field, without a circle of
    conditions, and at a field filled before: by the same party (the page follows it as they type) or by a party of
    an earlier step of ``routing``. FieldSettingsError names the first field whose condition is wrong."""
    by_name = {f.name: f for f in fields}
    step = {role: i for i, roles in enumerate(routing) for role in roles}
    for field in fields:
        condition = field.condition
        if condition is None or not condition.live:
            continue
        source = by_name.get(condition.source)
        if source is None:
            raise FieldSettingsError(
                N_(
                    "“%(name)s” depends on the field “%(source)s”, but the template has no such field. Its fields: "
                    "%(names)s.",
                    name=field.name,
                    source=condition.source[:40],
                    names=", ".join(by_name),
                ),
                field=field.name,
            )
        if source.name == field.name:
            raise FieldSettingsError(
                N_("“%(name)s” cannot be shown depending on itself.", name=field.name), field=field.name
            )
        if source.role != field.role and step.get(source.role, len(step)) >= step.get(field.role, len(step)):
            raise FieldSettingsError(
                N_(
                    "“%(name)s” depends on “%(source)s”, which another party fills at the same time or later: "
                    "a field may depend on its own party's fields or on those of a party who signs before.",
                    name=field.name,
                    source=source.name,
                ),
                field=field.name,
            )
    for field in fields:
        seen = [field.name]
        condition = field.condition
        while condition is not None and condition.live and condition.source in by_name:
            if condition.source in seen:
                raise FieldSettingsError(
                    N_(
                        "The conditions of %(names)s depend on each other in a circle: none of them could be shown.",
                        names=", ".join(f"“{n}”" for n in seen[seen.index(condition.source) :]),
                    ),
                    field=field.name,
                )
            seen.append(condition.source)
            condition = by_name[condition.source].condition


def applying(
    fields: Sequence[Conditioned], *, field_value: Callable[[str], str | None], column_value: Callable[[str], str]
) -> frozenset[str]:
    """The names of the ``fields`` that apply: without a condition, or whose condition holds for its source's
    value. A field's value (``field_value``: None when empty or unticked) counts only when that field applies
    itself; a field it does not know (an earlier party's, not listed) counts as given."""
    by_name = {f.name: f for f in fields}
    found: dict[str, bool] = {}

    def applies(name: str, depth: int = 0) -> bool:
        if name not in by_name:
            return True
        if name not in found:
            condition = by_name[name].condition
            if condition is None:
                found[name] = True
            elif not condition.live:
                found[name] = holds(condition, column_value(condition.source))
            else:  # checked to be free of circles; ``depth`` stops one saved before that check
                source_applies = depth < len(by_name) and applies(condition.source, depth + 1)
                found[name] = source_applies and holds(condition, field_value(condition.source))
        return found[name]

    return frozenset(f.name for f in fields if applies(f.name))


def holds(condition: FieldCondition, value: str | None) -> bool:
    """Whether ``value`` (None or blank: empty) passes ``condition``: numbers compared as numbers, dates as dates,
    other text without regard to case or surrounding spaces."""
    text = (value or "").strip()
    if condition.operator == Operator.FILLED:
        return bool(text)
    if not text:
        return False
    if condition.operator == Operator.EQUALS:
        number, expected = _number(text), _number(condition.value)
        if number is not None and expected is not None:
            return number == expected
        return text.casefold() == condition.value.strip().casefold()
    if condition.operator == Operator.GREATER_THAN:
        number, expected = _number(text), _number(condition.value)
        if number is not None and expected is not None:
            return number > expected
        date, limit = _date(text), _date(condition.value)
        return date is not None and limit is not None and date > limit
    return False


def condition_words(condition: FieldCondition, *, source: str) -> N_:
    """The condition as people read it, ``source`` being its field's label or its column's name."""
    if condition.operator == Operator.EQUALS:
        return N_("Only when “%(source)s” is “%(value)s”.", source=source, value=condition.value)
    if condition.operator == Operator.GREATER_THAN:
        return N_("Only when “%(source)s” is greater than %(value)s.", source=source, value=condition.value)
    return N_("Only when “%(source)s” is filled in.", source=source)


def _number(text: str) -> Decimal | None:
    """``text`` as a number: ``1234.5``, ``1 234,5``, ``1,234.5``; None when it is not one."""
    digits = "".join(text.split())
    digits = digits.replace(",", "") if "." in digits else digits.replace(",", ".")
    try:
        number = Decimal(digits)
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _date(text: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        return None

"""The fields a template's signer fills: read from its ``field_<name>`` marks in document order, each with
its settings (``FieldSettings``), kept with the template version (``TemplateVersion.fields``).
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import posixpath
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import regex
from babel.dates import format_date
from babel.numbers import format_decimal

from bulksign.core.messages import N_
from bulksign.core.typed_text import INVISIBLE
from bulksign.doc_templates.errors import FieldSettingsError, TemplateError
from bulksign.doc_templates.field_conditions import Conditioned, FieldCondition, check_conditions, checked_condition
from bulksign.doc_templates.roles import names_in_order
from bulksign.documents.field_boxes import DEFAULT_TYPE, FIELD_PREFIX, FIELD_SIZES_MM, MAX_FIELDS, field_name
from bulksign.documents.signature_box import RECIPIENT_ROLE
from bulksign.models import TemplateVersion

FIELD_TYPES = tuple(FIELD_SIZES_MM)
#: The types filled in for a party when they sign (the day, in the batch's time zone; the name they signed with),
#: never asked of them: the palette's "date signed" and "signer's name".
SIGNED_TYPES = ("signed_date", "signer_name")
#: Longest label, pattern and option, and most options a choice may offer.
MAX_LABEL_CHARS = 200
MAX_PATTERN_CHARS = 200
MAX_OPTION_CHARS = 200
MAX_OPTIONS = 100
#: The types a range applies to.
_RANGED = ("number", "date")
#: What an attachment may be, found by its content → the extension it is stored and given out under.
ATTACHMENT_TYPES = {"application/pdf": ".pdf", "image/jpeg": ".jpg", "image/png": ".png"}
#: Longest name an attachment is given out under (its extension included).
MAX_FILE_NAME_CHARS = 200
#: Names Windows keeps for devices: a file named so (with any extension) cannot be saved there.
_DEVICE_NAMES = frozenset({"CON", "PRN", "AUX", "NUL", *(f"{p}{n}" for p in ("COM", "LPT") for n in range(1, 10))})
#: What a name's stem keeps as it is: letters, digits, spaces and ``._-()``; any other character becomes ``_``.
_UNSAFE_IN_NAME = re.compile(r"[^\w .()-]|_")


@dataclass(frozen=True)
class FieldSettings:
    """One field: what the signer gives, how it is checked, who gives it."""

    #: ``iban`` for the mark ``{{ field_iban }}``.
    name: str
    type: str = DEFAULT_TYPE
    #: What the signing page shows at the field; empty: the name, as a person reads it.
    label: str = ""
    required: bool = True
    #: ``text``: a regular expression the whole value must match.
    pattern: str | None = None
    #: ``number``: numbers; ``date``: ISO dates (YYYY-MM-DD); either may be left open.
    minimum: float | str | None = None
    maximum: float | str | None = None
    #: ``choice``: what the signer chooses from, in order.
    options: tuple[str, ...] = ()
    #: When the file prefills it (a column ``field_<name>``), the signer may not change that value.
    read_only: bool = False
    #: The party that fills it: ``recipient`` or a role the template marks (``signature_<role>``).
    role: str = RECIPIENT_ROLE
    #: Shown and required only when it holds (``field_conditions``); None: always.
    condition: FieldCondition | None = None

    @property
    def column(self) -> str:
        """The column of the recipients file that prefills it."""
        return f"{FIELD_PREFIX}{self.name}"

    @property
    def shown_label(self) -> str:
        return self.label or self.name.replace("_", " ").capitalize()

    def to_json(self) -> dict[str, Any]:
        """As stored in ``TemplateVersion.fields`` and answered by the API (without a condition: as before them)."""
        data = {**dataclasses.asdict(self), "options": list(self.options)}
        if self.condition is None:
            del data["condition"]
        else:
            data["condition"] = self.condition.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FieldSettings:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        return cls(
            **{
                **values,
                "options": tuple(values.get("options") or ()),
                "condition": FieldCondition.from_json(values.get("condition")),
            }
        )

    @property
    def conditioned(self) -> Conditioned:
        return Conditioned(name=self.name, role=self.role, condition=self.condition)


def marked_fields(version: TemplateVersion) -> tuple[str, ...]:
    """The names of the fields a version's document marks, each once, in the order the document has them (a PDF's
    fields and boxes by page, top to bottom)."""
    # An HTML or Word version without a mark among its variables is not read again (a PDF's marks are not variables).
    marked = version.kind == "pdf" or any(field_name(v) for v in version.variables or ())
    return tuple(dict.fromkeys(n for n in map(field_name, names_in_order(version) if marked else ()) if n))


def template_fields(version: TemplateVersion) -> tuple[FieldSettings, ...]:
    """The version's fields in document order, as saved with it."""
    return tuple(FieldSettings.from_json(f) for f in version.fields or ())


def shown_value(field: FieldSettings, value: str | None, *, language: str) -> N_ | str:
    """A value as ``FieldValue.value`` keeps it (normalised by type), as people read it in ``language``: a number
    with the language's separators, a date in its long form, a checkbox as ticked or not (translated when shown),
    anything else as given; "" for a field left empty. The signed PDF stamps it and its audit certificate lists it."""
    if value is None or value == "":
        return ""
    if field.type == "checkbox":
        return N_("Ticked") if value == "true" else N_("Not ticked")
    try:
        if field.type == "number":
            return format_decimal(Decimal(value), locale=language, decimal_quantization=False)
        if field.type in ("date", "signed_date"):
            return format_date(dt.date.fromisoformat(value), format="long", locale=language)
    except (InvalidOperation, ValueError):
        pass  # not in its canonical form (stored by hand?): shown as it is rather than failing the signed record
    return value


def attachment_filename(name: str | None, *, content_type: str | None, field: str) -> str | None:
    """The safe name an attachment is kept and given out under: the signer's file name's stem made safe, with the
    extension of the type its content was found to be; None stays None (a purged value)."""
    if name is None:
        return None
    extension = ATTACHMENT_TYPES.get(content_type or "", "")
    base = posixpath.basename(unicodedata.normalize("NFC", INVISIBLE.sub("", name)).replace("\\", "/"))
    stem = base.rpartition(".")[0] if "." in base.strip(".") else base
    stem = re.sub(r"_+", "_", _UNSAFE_IN_NAME.sub("_", " ".join(stem.split())))
    if extension and stem.lower().endswith(extension):  # "scan.pdf.exe": not "scan.pdf.pdf"
        stem = stem[: -len(extension)]
    stem = stem.strip(" ._")[: MAX_FILE_NAME_CHARS - len(extension)].rstrip(" .") or field
    if stem.upper() in _DEVICE_NAMES:
        stem += "_"
    return stem + extension


def settled_fields(
    version: TemplateVersion,
    *,
    roles: list[str],
    routing: Sequence[Sequence[str]],
    given: Sequence[Mapping[str, Any]] | None,
    previous: TemplateVersion | None,
    hints: Mapping[str, Mapping[str, str]] | None = None,
    assigned: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The ``fields`` a version being saved keeps: ``given`` checked (``check_settings``), else each marked field's
    settings from ``previous`` (a role no longer marked falls back to the recipient), else the type and party the
    palette inserted it with (``hints``: name → ``{"type", "role"}``, checked), else the type and party its name says
    (``named_field``), else the defaults. A field a PDF's own form field became takes the type and party it was
    assigned (``assigned``: name → ``{"type", "role", "options", "label"}``, ``pdf_form_fields.assigned_fields``),
    its party only while the template has it. Either way each
    condition is checked against the fields kept and the signing order (``routing``): one whose field went, or
    that now looks at a later party's field, is refused rather than dropped."""
    names = marked_fields(version)
    if len(names) > MAX_FIELDS:  # each is framed in a shade of its own
        raise TemplateError(N_("A template may mark at most %(n)s fields.", n=MAX_FIELDS))
    if given is not None:
        fields = tuple(
            _assigned(f, (assigned or {}).get(f.name), roles=roles)
            for f in check_settings(given, names=names, roles=roles)
        )
        _check_conditions(fields, routing=routing)
        return [f.to_json() for f in fields]
    kept = {f.name: f for f in template_fields(previous)} if previous is not None else {}
    settled: list[FieldSettings] = []
    for name in names:
        hint = (hints or {}).get(name) or named_field(name, roles=roles)
        new = FieldSettings(name=name)
        if hint is not None and hint.get("type") in FIELD_TYPES and hint.get("type") != "choice":
            new = dataclasses.replace(new, type=str(hint["type"]), role=str(hint.get("role") or RECIPIENT_ROLE))
        field = _assigned(kept.get(name, new), (assigned or {}).get(name), roles=roles)
        if field.role not in roles:
            field = dataclasses.replace(field, role=RECIPIENT_ROLE)
        settled.append(field)
    _check_conditions(settled, routing=routing)
    return [f.to_json() for f in settled]


def _assigned(field: FieldSettings, given: Mapping[str, Any] | None, *, roles: Iterable[str]) -> FieldSettings:
    """``field`` of the type and party its form field was assigned (``given``; None: as it is): a new type starts
    from that type's defaults (a choice with the form's options), the label and whether it is required kept."""
    if given is None:
        return field
    if field.type != given["type"]:
        field = FieldSettings(
            name=field.name,
            type=given["type"],
            label=field.label,
            required=field.required,
            options=tuple(given.get("options") or ()),
            condition=field.condition,
        )
    role = given["role"] if given["role"] in roles else field.role
    return dataclasses.replace(field, role=role, label=field.label or str(given.get("label") or ""))


def named_field(name: str, *, roles: Iterable[str]) -> dict[str, str] | None:
    """The type and party a field's name says, for the names the Word palette offers (a .docx brings no palette's
    hints): ``signed_date_employer`` is the date ``employer`` signed, ``signer_name_employer`` the name they signed
    with; None for any other name."""
    for field_type in SIGNED_TYPES:
        for role in roles:
            if name == f"{field_type}_{role}":
                return {"type": field_type, "role": role}
    return None


def _check_conditions(fields: Sequence[FieldSettings], *, routing: Sequence[Sequence[str]]) -> None:
    """``field_conditions.check_conditions``, and neither side of a condition a field filled in at signing: it has no
    value before its party signs, and is filled in whatever holds."""
    signed = {f.name for f in fields if f.type in SIGNED_TYPES}
    for field in fields:
        if field.condition is not None and (
            field.name in signed or (field.condition.live and field.condition.source in signed)
        ):
            raise FieldSettingsError(
                N_(
                    "“%(name)s” has a condition on a date signed or a signer's name: those are filled in as their "
                    "party signs, whatever holds, and cannot be waited on.",
                    name=field.name,
                ),
                field=field.name,
            )
    check_conditions([f.conditioned for f in fields], routing=routing)


def check_settings(
    given: Sequence[Mapping[str, Any]], *, names: Iterable[str], roles: Iterable[str]
) -> tuple[FieldSettings, ...]:
    """Staff's settings for a template's fields (``names``, in document order), checked: a field left out keeps the
    defaults; FieldSettingsError naming the first wrong setting."""
    names, roles = list(names), list(roles)
    by_name: dict[str, FieldSettings] = {}
    for raw in given:
        name = str(raw.get("name") or "")
        if name not in names:
            raise FieldSettingsError(
                N_(
                    "The template has no field “%(name)s”. Its fields: %(names)s.",
                    name=name,
                    names=", ".join(names) or "—",
                ),
                field=name or None,
            )
        if name in by_name:
            raise FieldSettingsError(N_("The field “%(name)s” is given twice.", name=name), field=name)
        by_name[name] = _checked(name, raw, roles=roles)
    return tuple(by_name.get(name) or FieldSettings(name=name) for name in names)


def _checked(name: str, raw: Mapping[str, Any], *, roles: list[str]) -> FieldSettings:
    def refuse(message: N_) -> FieldSettingsError:
        return FieldSettingsError(message, field=name)

    field_type = str(raw.get("type") or DEFAULT_TYPE)
    if field_type not in FIELD_TYPES:
        raise refuse(
            N_(
                "The field “%(name)s” has the type “%(type)s”; a field is one of: %(types)s.",
                name=name,
                type=field_type,
                types=", ".join(FIELD_TYPES),
            )
        )
    label = str(raw.get("label") or "").strip()
    if len(label) > MAX_LABEL_CHARS:
        raise refuse(
            N_("The label of “%(name)s” is longer than %(limit)s characters.", name=name, limit=MAX_LABEL_CHARS)
        )
    role = str(raw.get("role") or RECIPIENT_ROLE)
    if role not in roles:
        raise refuse(
            N_(
                "The field “%(name)s” is given to “%(role)s”, who does not sign this template. Who signs: %(roles)s.",
                name=name,
                role=role,
                roles=", ".join(roles),
            )
        )
    pattern = str(raw.get("pattern") or "").strip() or None
    if pattern is not None:
        if field_type != "text":
            raise refuse(N_("Only a text field has a pattern; “%(name)s” is not one.", name=name))
        if len(pattern) > MAX_PATTERN_CHARS:
            raise refuse(
                N_("The pattern of “%(name)s” is longer than %(limit)s characters.", name=name, limit=MAX_PATTERN_CHARS)
            )
        try:
            regex.compile(pattern)
        except regex.error as exc:
            raise refuse(
                N_("The pattern of “%(name)s” is not a valid regular expression: %(error)s.", name=name, error=exc.msg)
            ) from None
    minimum, maximum = (_bound(name, field_type, raw.get(key), refuse) for key in ("minimum", "maximum"))
    if minimum is not None and maximum is not None and _above(minimum, maximum):
        raise refuse(
            N_(
                "The lowest value of “%(name)s” (%(min)s) is above its highest (%(max)s).",
                name=name,
                min=minimum,
                max=maximum,
            )
        )
    options = tuple(dict.fromkeys(str(o).strip() for o in raw.get("options") or () if str(o).strip()))
    if field_type == "choice":
        if not options:
            raise refuse(N_("The field “%(name)s” is a choice: give it at least one option.", name=name))
        if len(options) > MAX_OPTIONS or any(len(o) > MAX_OPTION_CHARS for o in options):
            raise refuse(
                N_(
                    "The field “%(name)s” may offer at most %(n)s options of at most %(limit)s characters each.",
                    name=name,
                    n=MAX_OPTIONS,
                    limit=MAX_OPTION_CHARS,
                )
            )
    elif options:
        raise refuse(N_("Only a choice field has options; “%(name)s” is not one.", name=name))
    return FieldSettings(
        name=name,
        type=field_type,
        label=label,
        required=bool(raw.get("required", True)),
        pattern=pattern,
        minimum=minimum.isoformat() if isinstance(minimum, dt.date) else minimum,
        maximum=maximum.isoformat() if isinstance(maximum, dt.date) else maximum,
        options=options,
        read_only=bool(raw.get("read_only", False)),
        role=role,
        condition=checked_condition(name, raw.get("condition")),
    )


def _above(low: float | dt.date, high: float | dt.date) -> bool:
    """Whether a range's low end is above its high end: both numbers or both dates, as the field's type makes them."""
    if isinstance(low, dt.date) and isinstance(high, dt.date):
        return low > high
    if isinstance(low, dt.date) or isinstance(high, dt.date):
        raise TypeError("a range's ends are both numbers or both dates")
    return low > high


def _bound(
    name: str, field_type: str, value: object, refuse: Callable[[N_], FieldSettingsError]
) -> float | dt.date | None:
    """A range's end as its type compares it: a number, or a date; None when it is left open."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if field_type not in _RANGED:
        raise refuse(N_("Only a number or date field has a range; “%(name)s” is not one.", name=name))
    if field_type == "date":
        try:
            return dt.date.fromisoformat(str(value).strip())
        except ValueError:
            raise refuse(
                N_("“%(value)s” is not a date for “%(name)s”: write it as YYYY-MM-DD.", value=value, name=name)
            ) from None
    try:
        number = float(str(value).strip().replace(",", "."))
    except ValueError:
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise refuse(N_("“%(value)s” is not a number for “%(name)s”.", value=value, name=name))
    return int(number) if number.is_integer() else number

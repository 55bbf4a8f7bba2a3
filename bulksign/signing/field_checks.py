"""A field's value checked by its type and settings, and normalised as ``FieldValue.value`` keeps it: what the
signing page refuses, in words."""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Callable
from decimal import Decimal

import regex
from babel.dates import format_date, get_date_format, parse_date
from babel.numbers import NumberFormatError, format_decimal, get_group_symbol, parse_decimal

from bulksign.core.errors import BulksignError
from bulksign.core.messages import N_
from bulksign.core.typed_text import visible_text
from bulksign.doc_templates.fields import FieldSettings
from bulksign.documents.pdf_text import unprintable

#: How long a staff-written pattern may take to match one value.
PATTERN_SECONDS = 0.1
#: Longest text a text field takes (a pattern is matched against at most this much).
MAX_TEXT_CHARS = 1000
#: Control characters (but tab and line ends): never printable in a name or a value.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: What a ticked checkbox's input sends, and what a file's column may say for one ticked; the values stored for it.
TICKED = "yes"
TICKED_VALUES = frozenset({TICKED, "true", "1", "x", "on", "да"})
CHECKBOX_VALUES = {True: "true", False: "false"}

logger = logging.getLogger(__name__)


def is_ticked(raw: str | None) -> bool:
    return (raw or "").strip().lower() in TICKED_VALUES


def number_text(value: float | str, language: str) -> str:
    return format_decimal(Decimal(str(value)), locale=language)


def date_text(value: float | str, language: str) -> str:
    # As the page's other dates read (``localtime.batch_time``): "31 January 2027", "31 января 2027".
    return format_date(dt.date.fromisoformat(str(value)), "d MMMM y", locale=language)


class Refused(BulksignError):
    """A field's value to correct; ``message`` says how."""

    message: N_

    def __init__(self, message: N_):
        super().__init__(message)


def checked_value(settings: FieldSettings, raw: str | None, language: str) -> str | None:
    """The normalised value of a field that is not an attachment; Refused says what is wrong."""
    label = settings.shown_label
    if settings.type == "checkbox":
        ticked = is_ticked(raw)
        if settings.required and not ticked:
            raise Refused(N_("Tick “%(label)s” to sign.", label=label))
        return CHECKBOX_VALUES[ticked]
    text = visible_text(CONTROL_CHARACTERS.sub("", raw or ""))
    if not text:
        if settings.required:
            raise Refused(N_("Fill in “%(label)s”: it is required.", label=label))
        return None
    checks = {"text": _text, "number": _number, "date": _date_value, "choice": _choice}
    return checks[settings.type](settings, text, language)


def _text(settings: FieldSettings, text: str, language: str) -> str:
    if missing := unprintable(text):  # the signed PDF would show empty boxes for them
        raise Refused(
            N_(
                "“%(label)s” has characters the signed document cannot print: %(chars)s. Write it without them.",
                label=settings.shown_label,
                chars=" ".join(missing[:10]),
            )
        )
    if len(text) > MAX_TEXT_CHARS:
        raise Refused(
            N_(
                "“%(label)s” is too long (at most %(count)s characters).",
                label=settings.shown_label,
                count=MAX_TEXT_CHARS,
            )
        )
    if settings.pattern and not _matches(settings.pattern, text):
        raise Refused(N_("“%(label)s” is not in the expected form.", label=settings.shown_label))
    return text


def _matches(pattern: str, text: str) -> bool:
    """Whether ``text`` matches staff's ``pattern`` whole. A pattern that backtracks without end ("(a+)+$") is cut
    off after ``PATTERN_SECONDS`` and counts as no match, so one template cannot hold a web worker; staff hear of
    it in the log."""
    try:
        return regex.fullmatch(pattern, text, timeout=PATTERN_SECONDS) is not None
    except TimeoutError:
        logger.warning("field pattern timed out", extra={"pattern": pattern, "length": len(text)})
        return False


def _number(settings: FieldSettings, text: str, language: str) -> str:
    # A typed space groups digits as well as the locale's own (a no-break space in Russian and French).
    digits = re.sub(r"\s", "", text) if get_group_symbol(locale=language).isspace() else text
    try:
        number = parse_decimal(digits, locale=language, strict=True)
    except NumberFormatError:
        number = None
    if number is None or not number.is_finite():
        raise Refused(
            N_(
                "“%(value)s” is not a number. Write it like %(example)s.",
                value=text[:40],
                example=format_decimal(Decimal("1234.5"), locale=language),
            )
        )
    low, high = settings.minimum, settings.maximum
    if (low is not None and number < Decimal(str(low))) or (high is not None and number > Decimal(str(high))):
        raise Refused(_out_of_range(settings, number_text, language))
    canonical = format(number.normalize(), "f")
    return canonical if "." not in canonical else canonical.rstrip("0").rstrip(".")


def typed_date(text: str, language: str) -> dt.date | None:
    """A date written as ISO (``<input type=date>``) or in the language's short format; None when it is not one."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        pass
    try:
        return parse_date(text, locale=language, format="short")
    except (ValueError, IndexError):  # Babel's ParseError is a ValueError; a short string can index past its end
        return None


def _date_value(settings: FieldSettings, text: str, language: str) -> str:
    found = typed_date(text, language)
    if found is None:
        raise Refused(
            N_(
                "“%(value)s” is not a date. Write it like %(example)s.",
                value=text[:40],
                example=format_date(
                    dt.date(2027, 1, 31), get_date_format("short", locale=language).pattern, locale=language
                ),
            )
        )
    low, high = settings.minimum, settings.maximum
    if (low is not None and found.isoformat() < str(low)) or (high is not None and found.isoformat() > str(high)):
        raise Refused(_out_of_range(settings, date_text, language))
    return found.isoformat()


def _out_of_range(settings: FieldSettings, show: Callable[[float | str, str], str], language: str) -> N_:
    label, low, high = settings.shown_label, settings.minimum, settings.maximum
    if low is not None and high is not None:
        return N_(
            "“%(label)s” must be from %(low)s to %(high)s.",
            label=label,
            low=show(low, language),
            high=show(high, language),
        )
    if low is not None:
        return N_("“%(label)s” must be at least %(low)s.", label=label, low=show(low, language))
    assert high is not None  # the value crossed a bound: at least one is set
    return N_("“%(label)s” must be at most %(high)s.", label=label, high=show(high, language))


def _choice(settings: FieldSettings, text: str, language: str) -> str:
    if text not in settings.options:
        raise Refused(N_("Choose one of the options for “%(label)s”.", label=settings.shown_label))
    return text

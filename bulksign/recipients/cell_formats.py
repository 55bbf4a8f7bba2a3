"""An .xlsx cell's value as its number format shows it: ``01.02.2027`` for a date cell formatted ``DD.MM.YYYY``,
``120 000 ₽`` for ``#,##0 "₽"``, ``00042`` for ``00000``, ``15%`` for ``0%``; separators and month names in the
batch's language (Babel). A format read here that is not understood shows the value as it is stored.
More in docs/architecture/recipients.md."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime, time
from decimal import ROUND_HALF_UP, Decimal, localcontext

from babel import Locale
from babel.dates import format_date, get_day_names, get_month_names
from babel.numbers import NumberPattern, get_decimal_symbol, get_group_symbol, parse_pattern

#: What a section of a format shows a value as (None: Excel's "General", the value as it is stored).
Show = Callable[[object], str]

#: ``[$₽-419]`` shows its currency sign; ``[$-419]``, ``[Red]``, ``[>100]`` show nothing.
_BRACKETS = re.compile(r"\[\$([^\]-]*)(?:-[^\]]*)?\]|\[[^\]]*\]")
#: A format's parts: a quoted text, an escaped or padding character, a run of digit places, a date part, any other.
_TOKENS = re.compile(
    r'"(?P<quoted>[^"]*)"|\\(?P<escaped>.)|_(?P<pad>.)|\*(?P<fill>.)'
    r"|(?P<digits>[0#?][0#?,.]*%?|\.[0#?]+%?)"
    r"|(?P<date>yyyy|yy|mmmmm|mmmm|mmm|mm|m|dddd|ddd|dd|d|hh|h|ss|s|am/pm|a/p)"
    r"|(?P<other>.)",
    re.IGNORECASE,
)
#: Babel's narrow no-break space (before "г." in Russian dates) as a plain no-break space: fonts lack it.
_NARROW_SPACE = str.maketrans({"\u202f": "\u00a0"})


#: Excel keeps a format to 255 characters; a longer one was not written by Excel.
MAX_CODE_CHARS = 255


def format_for(code: str, *, language: str) -> Show | None:
    """How a cell with the number format ``code`` is shown in ``language``; None for "General" and text formats,
    and for what is not understood here (fractions, exponents, elapsed times): the value as stored."""
    if code.strip().lower() in ("general", "@", "") or len(code) > MAX_CODE_CHARS:
        return None
    try:
        locale = Locale.parse(language)
        shows = [_section(s, locale) for s in _sections(code)[:3]]
    except (_NotUnderstood, ValueError, LookupError):  # Babel refuses the pattern: the value as stored
        return None
    if any(s is None for s in shows):
        return None
    return lambda value: _show(shows, value)  # type: ignore[arg-type]


class _NotUnderstood(Exception):
    """A part of a format this module does not show the way Excel would."""


def _sections(code: str) -> list[str]:
    """The ``;``-separated sections (positive; negative; zero; text), quotes and brackets kept whole."""
    sections: list[str] = []
    current: list[str] = []
    quoted = bracket = False
    for char in code:
        if char == '"':
            quoted = not quoted
        elif char == "[" and not quoted:
            bracket = True
        elif char == "]" and not quoted:
            bracket = False
        elif char == ";" and not quoted and not bracket:
            sections.append("".join(current))
            current = []
            continue
        current.append(char)
    sections.append("".join(current))
    return sections


def _show(shows: list[Show], value: object) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0 and len(shows) > 1:
            return shows[1](-value)
        if value == 0 and len(shows) > 2:
            return shows[2](value)
    return shows[0](value)


def _section(section: str, locale: Locale) -> Show | None:
    """One section as a function of the value; None where it shows nothing this module can."""
    text = _BRACKETS.sub(lambda m: m.group(1) or "", section)
    if "[$-F800]" in section.upper():  # Windows' "long date" of the reader's system
        return lambda value: (
            format_date(value, format="long", locale=locale).translate(_NARROW_SPACE)
            if isinstance(value, date)
            else str(value)
        )
    if section.count('"') % 2 or re.search(r"E[+-]|\?/|/\?|\[h\]|\[m\]|\[s\]", section, re.IGNORECASE):
        raise _NotUnderstood  # a quote left open (Excel saves none), or exponents, fractions, elapsed times
    parts: list[tuple[str, str]] = []
    for match in _TOKENS.finditer(text):
        kind = match.lastgroup or "other"
        value = match.group(kind)
        parts.append((kind, value if kind != "pad" else " "))
    digits = [v for kind, v in parts if kind == "digits"]
    if not digits and any(kind == "date" for kind, _ in parts):
        return _date_show(parts, locale)
    if not digits:  # a section of text only ("—" for a zero)
        text = "".join(v for kind, v in parts if kind != "fill").strip()
        return lambda value: text
    if len(digits) != 1:
        raise _NotUnderstood
    # Letters of a currency written as they are (``#,##0 USD``) are text, not a date's parts.
    return _number_show([("other", v) if k == "date" else (k, v) for k, v in parts], digits[0], locale)


def _number_show(parts: list[tuple[str, str]], digits: str, locale: Locale) -> Show:
    """Babel's number pattern for Excel's digit places (same meaning: ``0`` a digit always shown, ``#`` one if any,
    ``,`` grouping, ``.`` the decimals, ``%`` a percentage); trailing commas divide by a thousand each."""
    at = parts.index(("digits", digits))
    scale = 1
    while digits.endswith(",") or digits.endswith(",%"):
        digits = digits.replace(",%", "%") if digits.endswith(",%") else digits[:-1]
        scale *= 1000
    try:
        pattern = parse_pattern(digits.replace("?", "#"))
    except ValueError:
        raise _NotUnderstood from None
    before = "".join("" if kind == "fill" else v for kind, v in parts[:at])
    after = "".join("" if kind == "fill" else v for kind, v in parts[at + 1 :])
    plain = _plain_number(pattern, locale)

    def show(value: object) -> str:
        if not isinstance(value, (int, float)):
            return str(value)
        number = value / scale if scale > 1 else value
        if plain is not None:
            text = plain(number)
        else:
            with localcontext() as context:
                context.rounding = ROUND_HALF_UP  # Excel rounds halves away from zero; Babel to even
                text = pattern.apply(number, locale)
        return f"{before}{text}{after}".strip()

    return show


def _plain_number(pattern: NumberPattern, locale: Locale) -> Callable[[int | float], str] | None:
    """For the usual patterns (``#,##0``, ``#,##0.00``, ``0.00``, ``00000``: no percentage, fixed decimals) what
    Babel would write, by Python's own formatting with the language's separators: a tenth of the time."""
    (min_int, _), (min_frac, max_frac) = pattern.int_prec, pattern.frac_prec
    grouped = pattern.grouping == (3, 3)
    if (
        pattern.scale
        or min_frac != max_frac
        or min_int < 1
        or (pattern.prefix, pattern.suffix) != (("", "-"), ("", ""))
    ):
        return None
    if (not grouped and pattern.grouping[0] < 1000) or (grouped and min_int > 1):
        return None  # other groupings, or zeros padding a grouped number: Babel's way
    symbols = str.maketrans({",": get_group_symbol(locale), ".": get_decimal_symbol(locale)})
    quantum = Decimal(1).scaleb(-max_frac)
    spec = f"{',' if grouped else ''}.{max_frac}f"

    def plain(number: int | float) -> str:
        rounded = Decimal(repr(number)).quantize(quantum, rounding=ROUND_HALF_UP)
        text = f"{rounded:{spec}}"
        if min_int > 1 and not grouped:
            sign, digits = ("-", text[1:]) if text.startswith("-") else ("", text)
            whole, dot, fraction = digits.partition(".")
            text = f"{sign}{whole.zfill(min_int)}{dot}{fraction}"
        return text.translate(symbols)

    return plain


#: How each part of a date format shows a moment (``h`` hour as written: 12- or 24-hour, said by ``AM/PM``).
_DATE_PARTS: dict[str, Callable[[datetime, int], str]] = {
    "yyyy": lambda m, h: f"{m.year:04d}",
    "yy": lambda m, h: f"{m.year % 100:02d}",
    "mm": lambda m, h: f"{m.month:02d}",
    "m": lambda m, h: str(m.month),
    "dd": lambda m, h: f"{m.day:02d}",
    "d": lambda m, h: str(m.day),
    "hh": lambda m, h: f"{h:02d}",
    "h": lambda m, h: str(h),
    "ss": lambda m, h: f"{m.second:02d}",
    "s": lambda m, h: str(m.second),
    "am/pm": lambda m, h: "AM" if m.hour < 12 else "PM",
    "a/p": lambda m, h: "A" if m.hour < 12 else "P",
}


def _date_show(parts: list[tuple[str, str]], locale: Locale) -> Show:
    """The date format's parts, each turned once into a function of the moment (names from Babel, in the
    language), so that a column of dates costs a join per cell."""
    twelve = any(kind == "date" and v.lower() in ("am/pm", "a/p") for kind, v in parts)
    kinds = [v.lower() if kind == "date" else None for kind, v in parts]
    months = {w: dict(get_month_names(w, context="format", locale=locale)) for w in ("wide", "abbreviated", "narrow")}
    days = {w: dict(get_day_names(w, context="format", locale=locale)) for w in ("wide", "abbreviated")}
    names: dict[str, Callable[[datetime, int], str]] = {
        "mmmmm": lambda m, h: months["narrow"][m.month],
        "mmmm": lambda m, h: months["wide"][m.month],
        "mmm": lambda m, h: months["abbreviated"][m.month],
        "dddd": lambda m, h: days["wide"][m.weekday()],
        "ddd": lambda m, h: days["abbreviated"][m.weekday()],
    }
    pieces: list[Callable[[datetime, int], str]] = []
    for i, (kind, text) in enumerate(parts):
        code = kinds[i]
        if code is None:
            pieces.append(_literal("" if kind == "fill" else text))
        elif code in ("m", "mm") and _is_minute(kinds, i):
            # ``m`` is the minute right after an hour or right before a second, else the month.
            pieces.append((lambda m, h: f"{m.minute:02d}") if code == "mm" else (lambda m, h: str(m.minute)))
        else:
            pieces.append(names.get(code) or _DATE_PARTS[code])

    def show(value: object) -> str:
        if isinstance(value, time):
            value = datetime.combine(date(1900, 1, 1), value)
        elif isinstance(value, date) and not isinstance(value, datetime):
            value = datetime.combine(value, time())
        if not isinstance(value, datetime):
            return str(value)
        hour = (value.hour % 12 or 12) if twelve else value.hour
        return "".join(piece(value, hour) for piece in pieces).strip()

    return show


def _literal(text: str) -> Callable[[datetime, int], str]:
    return lambda m, h: text


def _is_minute(kinds: list[str | None], i: int) -> bool:
    before = next((k for k in reversed(kinds[:i]) if k), None) or ""
    after = next((k for k in kinds[i + 1 :] if k), None) or ""
    return before.startswith("h") or after.startswith("s")

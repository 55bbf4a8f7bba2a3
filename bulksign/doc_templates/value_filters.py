"""Filters that show a row's value as a date, an amount of money or an amount in words, in the batch's language:
``{{ start_date|date }}``, ``{{ start_date|date("long") }}`` → "1 февраля 2027 г.", ``{{ salary|money }}`` →
"120 000,00 ₽" / "€120,000.00", ``{{ salary|in_words }}`` → "сто двадцать тысяч рублей 00 копеек" (Babel and
num2words). A value that is not a date or a number is refused naming it (``TemplateError``); ``value_kind``
reads the same value the way the file check does, so a row is refused at the check, not at sending.
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import functools
import re
from datetime import date, datetime
from decimal import Decimal, InvalidOperation

from babel.dates import format_date
from babel.numbers import format_currency, format_decimal, get_decimal_symbol
from jinja2 import pass_context
from jinja2.runtime import Context
from num2words import num2words

from bulksign.core.messages import N_
from bulksign.doc_templates.errors import TemplateError

#: The context variable the batch's language is given in (``document_context``); English without it.
LANGUAGE_VARIABLE = "_language"
#: Filters that need a date, and those that need a number.
DATE_FILTERS = frozenset({"date"})
NUMBER_FILTERS = frozenset({"money", "in_words", "number"})
#: Date styles as Babel names them; anything else is a Babel date pattern (``dd.MM.yyyy``).
DATE_STYLES = ("short", "medium", "long", "full")
#: The currency an amount is in when the template does not say and the value shows no sign, by language.
DEFAULT_CURRENCY = {"ru": "RUB"}
FALLBACK_CURRENCY = "EUR"
_SIGNS = {"₽": "RUB", "руб": "RUB", "р.": "RUB", "€": "EUR", "$": "USD", "£": "GBP", "₸": "KZT", "₴": "UAH"}
_CURRENCY_CODE = re.compile(r"[A-Z]{3}")
_DAY_FIRST = re.compile(r"(\d{1,2})[./-](\d{1,2})[./-](\d{4}|\d{2})")
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[ T]\d{2}:\d{2}(?::\d{2})?)?")
_NUMBER_NOISE = re.compile(r"[\s\u00a0\u202f']|руб\.?|р\.|[₽€$£₸₴]|[A-Z]{3}")
#: What the preview and the check at save fill a variable with (``variables.sample_row``): shown as it is, where
#: the date or the amount will land. A file's row holding one is refused at its check (``parse_date`` does not read it).
_SAMPLE = re.compile(r"\[\w+\]")
#: Babel's narrow no-break space (before "г." in Russian dates) as a plain no-break space: fonts lack it.
_NARROW_SPACE = str.maketrans({"\u202f": "\u00a0"})


def parse_date(value: object) -> date | None:
    """The date a row's value holds: ISO (``2027-02-01``, what an unformatted .xlsx date reads as), day first
    (``01.02.2027``, ``1/2/27``); None for anything else."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    text = str(value).strip()
    try:
        if match := _ISO.fullmatch(text):
            return date(int(match[1]), int(match[2]), int(match[3]))
        if match := _DAY_FIRST.fullmatch(text):
            year = int(match[3]) + (2000 if len(match[3]) == 2 else 0)
            return date(year, int(match[2]), int(match[1]))
    except ValueError:
        return None
    return None


def parse_amount(value: object, *, language: str = "en") -> Decimal | None:
    """The number a row's value holds, separators and a currency sign as a spreadsheet shows them in ``language``
    (``120 000 ₽``, ``1,234.50``, ``1.234,50``, ``15%``); None for anything else. A lone separator is the
    language's decimal one, unless it is the other and three digits follow it (``95,500`` in English)."""
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return Decimal(str(value))
    text = _NUMBER_NOISE.sub("", str(value)).rstrip("%")
    if "," in text and "." in text:
        decimal = "." if text.rfind(".") > text.rfind(",") else ","
    elif text.count(",") + text.count(".") == 1:
        separator = "," if "," in text else "."
        decimal = separator
        if separator != _decimal_symbol(language) and len(text) - text.index(separator) == 4:
            decimal = ""
    else:
        decimal = ""  # several of one: grouping
    group = {",": ".", ".": ","}.get(decimal, ",.")
    text = text.translate(str.maketrans("", "", group))
    if decimal:
        text = text.replace(decimal, ".")
    try:
        number = Decimal(text)
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


@functools.lru_cache(maxsize=32)
def _decimal_symbol(language: str) -> str:
    try:
        return get_decimal_symbol(language)
    except (ValueError, LookupError):
        return "."


def _currency_of(value: object, language: str) -> str:
    text = str(value)
    code = _CURRENCY_CODE.search(text)
    if code:
        return code[0]
    sign = next((c for s, c in _SIGNS.items() if s in text), None)
    return sign or DEFAULT_CURRENCY.get(language, FALLBACK_CURRENCY)


def _blank_or_sample(value: object) -> bool:
    return value is None or str(value).strip() == "" or bool(_SAMPLE.fullmatch(str(value)))


def _language(context: Context) -> str:
    language = context.get(LANGUAGE_VARIABLE)
    return language if isinstance(language, str) and language else "en"


def _not_a_date(value: object) -> TemplateError:
    return TemplateError(
        N_('"%(value)s" is not a date, and the template shows it as one (|date).', value=str(value)[:60]),
        hint=N_("Put a date in that cell, as 01.02.2027 or 2027-02-01, or a date cell of the spreadsheet."),
    )


def _not_a_number(value: object, name: str) -> TemplateError:
    return TemplateError(
        N_(
            '"%(value)s" is not a number, and the template shows it as one (|%(filter)s).',
            value=str(value)[:60],
            filter=name,
        ),
        hint=N_("Put a number in that cell, as 120000 or 120 000,50."),
    )


@pass_context
def date_filter(context: Context, value: object, style: str = "medium") -> str:
    """``{{ x|date }}``, ``{{ x|date("long") }}``, ``{{ x|date("dd.MM.yyyy") }}``; an empty value stays empty."""
    if _blank_or_sample(value):
        return "" if value is None else str(value)
    day = parse_date(value)
    if day is None:
        raise _not_a_date(value)
    try:
        return format_date(day, format=str(style)[:40], locale=_language(context)).translate(_NARROW_SPACE)
    except (ValueError, KeyError):
        raise TemplateError(
            N_('"%(style)s" is not a date style: use short, medium, long or full.', style=str(style)[:40])
        ) from None


@pass_context
def money_filter(context: Context, value: object, currency: str | None = None) -> str:
    """``{{ x|money }}`` in the value's currency (its sign), else the language's; ``{{ x|money("USD") }}``."""
    if _blank_or_sample(value):
        return "" if value is None else str(value)
    language = _language(context)
    amount = parse_amount(value, language=language)
    if amount is None:
        raise _not_a_number(value, "money")
    code = (currency or _currency_of(value, language)).upper()[:3]
    return format_currency(amount, code, locale=language).translate(_NARROW_SPACE)


@pass_context
def number_filter(context: Context, value: object, decimals: int | None = None) -> str:
    """``{{ x|number }}`` with the language's separators; ``{{ x|number(2) }}`` with that many decimals."""
    if _blank_or_sample(value):
        return "" if value is None else str(value)
    amount = parse_amount(value, language=_language(context))
    if amount is None:
        raise _not_a_number(value, "number")
    places = min(max(int(decimals), 0), 10) if decimals is not None else None
    pattern = None if places is None else "#,##0" + ("." + "0" * places if places else "")
    shown = format_decimal(amount, format=pattern, locale=_language(context), decimal_quantization=places is not None)
    return shown.translate(_NARROW_SPACE)


@pass_context
def in_words_filter(context: Context, value: object, currency: str | None = None) -> str:
    """``{{ x|in_words }}``: the amount in words with its minor units in figures, as contracts write it."""
    if _blank_or_sample(value):
        return "" if value is None else str(value)
    language = _language(context)
    amount = parse_amount(value, language=language)
    if amount is None or abs(amount) >= Decimal(10) ** 15:
        raise _not_a_number(value, "in_words")
    code = (currency or _currency_of(value, language)).upper()[:3]
    amount = amount.quantize(Decimal("0.01"))
    # A language or a currency num2words does not know: English words, then euros, rather than no document.
    for words_language, words_currency in ((language, code), ("en", code), ("en", FALLBACK_CURRENCY)):
        try:
            return str(
                num2words(
                    amount, lang=words_language, to="currency", currency=words_currency, cents=False, separator=""
                )
            )
        except NotImplementedError:
            continue
    raise _not_a_number(value, "in_words")  # not reached: English euros are always known


FILTERS = {"date": date_filter, "money": money_filter, "number": number_filter, "in_words": in_words_filter}

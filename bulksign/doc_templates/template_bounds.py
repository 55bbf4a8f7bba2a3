"""What one step of a template may make, refused before it runs: ``'a' * 10**10``, ``center(10**9)``,
``'%999999999s'|format``, ``replace`` or ``join`` multiplying a text; and the time and size one fill-in may take."""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable
from typing import Any

from jinja2 import Environment, pass_environment, pass_eval_context
from jinja2.exceptions import SecurityError
from jinja2.filters import do_default
from jinja2.nodes import EvalContext

from bulksign.core.messages import N_

#: The most characters (or list items) one ``*`` may make, and the most bits a ``*`` or ``**`` of numbers may make.
MAX_PRODUCT_LENGTH = 100_000
MAX_NUMBER_BITS = 100_000
#: One fill-in of a template (a document, a subject, a body) may take this long and make this much text.
#: Loops inside loops over ``range(100000)`` otherwise keep a web worker (preview) or a render job busy for hours.
MAX_RENDER_SECONDS = 5.0
MAX_OUTPUT_CHARS = 10_000_000

#: Widest field a printf/format spec, ``center`` or ``indent`` may ask for, and most a ``batch``/``slice`` may pad to.
MAX_WIDTH = MAX_PRODUCT_LENGTH


class TooBig(SecurityError):
    """One step would make a text or a number too large, whatever the time limit; refused at save too. ``what``
    names it, for people."""

    def __init__(self, what: N_):
        super().__init__(what.english)
        self.what = what


_PRINTF_FIELD = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")
_SPEC_NUMBER = re.compile(r"\d+")


def refuse_wide_printf(text: object) -> None:
    """``'%999999999s'|format(x)`` makes a gigabyte in one C call that no time limit can interrupt."""
    if not isinstance(text, str) or "%" not in text:
        return
    for match in _PRINTF_FIELD.finditer(text):
        for number in match.groups():
            if number == "*":
                raise TooBig(N_("a width taken from a value in a %(sign)s format", sign="%"))
            if number and int(number) > MAX_WIDTH:
                raise TooBig(N_("a format width over %(n)s", n=MAX_WIDTH))


def _refuse_wide_format_spec(text: str) -> None:
    """The same for ``'{:>999999999}'.format(x)``, and widths nested from values (``{:{w}}``)."""
    for _, _, spec, _ in string.Formatter().parse(text):
        if spec and "{" in spec:
            raise TooBig(N_("a width taken from a value in a format"))
        if spec and any(int(n) > MAX_WIDTH for n in _SPEC_NUMBER.findall(spec)):
            raise TooBig(N_("a format width over %(n)s", n=MAX_WIDTH))


def refuse_long(length: int) -> None:
    if length > MAX_OUTPUT_CHARS:
        raise TooBig(N_("a text longer than %(n)s characters", n=f"{MAX_OUTPUT_CHARS:,}"))


#: What ``_width`` says unless its caller names the limit otherwise (made once: ``N_`` is a value).
_TOO_WIDE = N_("a width over %(n)s", n=MAX_WIDTH)


def _width(value: object, too_big: N_ = _TOO_WIDE) -> None:
    size = len(value) if isinstance(value, str) else value
    if isinstance(size, int) and size > MAX_WIDTH:
        raise TooBig(too_big)


def _replaced_length(text: str, old: str, new: str, count: int | None) -> int:
    hits = len(text) + 1 if old == "" else text.count(old)
    if count is not None and count >= 0:
        hits = min(hits, count)
    return len(text) + hits * (len(new) - len(old))


def _joined_length(items: list[object], separator: str) -> int:
    return sum(len(str(item)) for item in items) + len(separator) * max(len(items) - 1, 0)


def bounded_filters(filters: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """Jinja's filters whose width or count argument could make gigabytes in one step, checked first."""
    center, indent, fmt, replace, join = (filters[n] for n in ("center", "indent", "format", "replace", "join"))
    batch, slice_, wordwrap, sum_ = filters["batch"], filters["slice"], filters["wordwrap"], filters["sum"]

    def bounded_center(value: Any, width: int = 80) -> Any:
        _width(width)
        return center(value, width)

    def bounded_indent(value: Any, width: int | str = 4, *args: Any, **kwargs: Any) -> Any:
        _width(width)
        refuse_long(len(str(value)) + (str(value).count("\n") + 1) * (len(width) if isinstance(width, str) else width))
        return indent(value, width, *args, **kwargs)

    def bounded_format(value: Any, *args: Any, **kwargs: Any) -> Any:
        refuse_wide_printf(value)
        return fmt(value, *args, **kwargs)

    @pass_eval_context  # as Jinja's own filter takes it
    def bounded_replace(eval_ctx: EvalContext, value: Any, old: Any, new: Any, count: int | None = None) -> Any:
        refuse_long(_replaced_length(str(value), str(old), str(new), count))
        return replace(eval_ctx, value, old, new, count)

    @pass_eval_context  # as Jinja's own filter takes it
    def bounded_join(eval_ctx: EvalContext, value: Iterable[Any], d: Any = "", attribute: Any = None) -> Any:
        items = list(value)
        if attribute is None:
            refuse_long(_joined_length(items, str(d)))
        return join(eval_ctx, items, d, attribute)

    def bounded_batch(value: Any, linecount: int, fill_with: Any = None) -> Any:
        _width(linecount, N_("a batch size over %(n)s", n=MAX_WIDTH))
        return batch(value, linecount, fill_with)

    def bounded_slice(value: Any, slices: int, fill_with: Any = None) -> Any:
        _width(slices, N_("a number of slices over %(n)s", n=MAX_WIDTH))
        return slice_(value, slices, fill_with)

    @pass_environment  # as Jinja's own filter takes it
    def bounded_wordwrap(
        environment: Environment,
        s: Any,
        width: int = 79,
        break_long_words: bool = True,
        wrapstring: str | None = None,
        break_on_hyphens: bool = True,
    ) -> Any:
        refuse_long(len(str(s)) * (1 + len(wrapstring or "\n")) // max(int(width), 1))
        return wordwrap(environment, s, width, break_long_words, wrapstring, break_on_hyphens)

    @pass_environment  # as Jinja's own filter takes it
    def bounded_sum(environment: Environment, iterable: Iterable[Any], attribute: Any = None, start: Any = 0) -> Any:
        items = list(iterable)
        if attribute is None and isinstance(start, (str, list, tuple)):  # sum() of lists: one C call, n² memory
            refuse_long(len(start) + sum(len(i) for i in items if isinstance(i, (str, list, tuple))))
        return sum_(environment, items, attribute, start)

    return {
        **filters,
        "center": bounded_center,
        "indent": bounded_indent,
        "format": bounded_format,
        "replace": bounded_replace,
        "join": bounded_join,
        "batch": bounded_batch,
        "slice": bounded_slice,
        "wordwrap": bounded_wordwrap,
        "sum": bounded_sum,
    }


def default(value: Any, default_value: Any = "", boolean: bool = False) -> Any:
    """Jinja's ``default``, which replaces an empty text too: an empty cell of the recipients file is no value (the
    row holds every column a template uses, as "" where the file leaves it empty), and ``{{ x|default('—') }}``
    is how a template says that ``x`` may be empty (``variables.printed_variables``)."""
    return default_value if isinstance(value, str) and value == "" else do_default(value, default_value, boolean)


def check_str_method(method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Refuse a ``str`` method call that would make a huge text; returns the arguments to call it with."""
    method = getattr(method, "__wrapped__", method)
    owner, name = getattr(method, "__self__", None), getattr(method, "__name__", "")
    if not isinstance(owner, str):
        return args
    if name in ("center", "ljust", "rjust", "zfill") and args:
        _width(args[0])
    elif name == "expandtabs":
        tab = args[0] if args else kwargs.get("tabsize", 8)
        refuse_long(len(owner) + owner.count("\t") * (tab if isinstance(tab, int) else 0))
    elif name == "replace" and len(args) >= 2:
        count = args[2] if len(args) > 2 else kwargs.get("count")
        refuse_long(_replaced_length(owner, str(args[0]), str(args[1]), count if isinstance(count, int) else None))
    elif name == "join" and args:
        items = list(args[0])
        refuse_long(_joined_length(items, owner))
        return (items, *args[1:])
    elif name in ("format", "format_map"):
        _refuse_wide_format_spec(owner)
    return args

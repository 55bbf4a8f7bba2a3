"""The bounded Jinja sandbox every template renders in: Jinja's immutable sandbox plus bounds on what one step may
make (``'a' * 10**10``, ``center(10**9)``, ``'%999999999s'|format`` ...), a time and size limit on one fill-in, and
``render_html`` / ``render_text`` that turn whatever a template does wrong into a ``TemplateError``.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import os
import re
import string
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from jinja2 import TemplateSyntaxError, nodes
from jinja2.compiler import CodeGenerator
from jinja2.exceptions import SecurityError, TemplateRuntimeError
from jinja2.filters import do_default
from jinja2.sandbox import ImmutableSandboxedEnvironment

from bulksign.core.messages import N_
from bulksign.doc_templates.errors import TemplateBroken, TemplateError, TemplateTooCostly, excerpt, syntax_error

#: The most characters (or list items) one ``*`` may make, and the most bits a ``*`` or ``**`` of numbers may make.
MAX_PRODUCT_LENGTH = 100_000
MAX_NUMBER_BITS = 100_000
#: One fill-in of a template (a document, a subject, a body) may take this long and make this much text.
#: Loops inside loops over ``range(100000)`` otherwise keep a web worker (preview) or a render job busy for hours.
MAX_RENDER_SECONDS = 5.0
MAX_OUTPUT_CHARS = 10_000_000

#: Widest field a printf/format spec, ``center`` or ``indent`` may ask for, and most a ``batch``/``slice`` may pad to.
MAX_WIDTH = MAX_PRODUCT_LENGTH


class _TooBig(SecurityError):
    """One step would make a text or a number too large, whatever the time limit; refused at save too."""


_PRINTF_FIELD = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")
_SPEC_NUMBER = re.compile(r"\d+")


def _refuse_wide_printf(text) -> None:
    """``'%999999999s'|format(x)`` makes a gigabyte in one C call that no time limit can interrupt."""
    if not isinstance(text, str) or "%" not in text:
        return
    for match in _PRINTF_FIELD.finditer(text):
        for number in match.groups():
            if number == "*":
                raise _TooBig(N_("a width taken from a value in a %(sign)s format", sign="%"))
            if number and int(number) > MAX_WIDTH:
                raise _TooBig(N_("a format width over %(n)s", n=MAX_WIDTH))


def _refuse_wide_format_spec(text: str) -> None:
    """The same for ``'{:>999999999}'.format(x)``, and widths nested from values (``{:{w}}``)."""
    for _, _, spec, _ in string.Formatter().parse(text):
        if spec and "{" in spec:
            raise _TooBig(N_("a width taken from a value in a format"))
        if spec and any(int(n) > MAX_WIDTH for n in _SPEC_NUMBER.findall(spec)):
            raise _TooBig(N_("a format width over %(n)s", n=MAX_WIDTH))


def _refuse_long(length: int) -> None:
    if length > MAX_OUTPUT_CHARS:
        raise _TooBig(N_("a text longer than %(n)s characters", n=f"{MAX_OUTPUT_CHARS:,}"))


#: What ``_width`` says unless its caller names the limit otherwise (made once: ``N_`` is a value).
_TOO_WIDE = N_("a width over %(n)s", n=MAX_WIDTH)


def _width(value, too_big: N_ = _TOO_WIDE) -> None:
    size = len(value) if isinstance(value, str) else value
    if isinstance(size, int) and size > MAX_WIDTH:
        raise _TooBig(too_big)


def _replaced_length(text: str, old: str, new: str, count: int | None) -> int:
    hits = len(text) + 1 if old == "" else text.count(old)
    if count is not None and count >= 0:
        hits = min(hits, count)
    return len(text) + hits * (len(new) - len(old))


def _joined_length(items: list, separator: str) -> int:
    return sum(len(str(item)) for item in items) + len(separator) * max(len(items) - 1, 0)


def _bounded_filters(filters: dict) -> dict:
    """Jinja's filters whose width or count argument could make gigabytes in one step, checked first."""
    center, indent, fmt, replace, join = (filters[n] for n in ("center", "indent", "format", "replace", "join"))
    batch, slice_, wordwrap, sum_ = filters["batch"], filters["slice"], filters["wordwrap"], filters["sum"]

    def bounded_center(value, width=80):
        _width(width)
        return center(value, width)

    def bounded_indent(value, width=4, *args, **kwargs):
        _width(width)
        _refuse_long(len(str(value)) + (str(value).count("\n") + 1) * (len(width) if isinstance(width, str) else width))
        return indent(value, width, *args, **kwargs)

    def bounded_format(value, *args, **kwargs):
        _refuse_wide_printf(value)
        return fmt(value, *args, **kwargs)

    def bounded_replace(eval_ctx, value, old, new, count=None):
        _refuse_long(_replaced_length(str(value), str(old), str(new), count))
        return replace(eval_ctx, value, old, new, count)

    def bounded_join(eval_ctx, value, d="", attribute=None):
        items = list(value)
        if attribute is None:
            _refuse_long(_joined_length(items, str(d)))
        return join(eval_ctx, items, d, attribute)

    def bounded_batch(value, linecount, fill_with=None):
        _width(linecount, N_("a batch size over %(n)s", n=MAX_WIDTH))
        return batch(value, linecount, fill_with)

    def bounded_slice(value, slices, fill_with=None):
        _width(slices, N_("a number of slices over %(n)s", n=MAX_WIDTH))
        return slice_(value, slices, fill_with)

    def bounded_wordwrap(environment, s, width=79, break_long_words=True, wrapstring=None, break_on_hyphens=True):
        _refuse_long(len(str(s)) * (1 + len(wrapstring or "\n")) // max(int(width), 1))
        return wordwrap(environment, s, width, break_long_words, wrapstring, break_on_hyphens)

    def bounded_sum(environment, iterable, attribute=None, start=0):
        items = list(iterable)
        if attribute is None and isinstance(start, (str, list, tuple)):  # sum() of lists: one C call, n² memory
            _refuse_long(len(start) + sum(len(i) for i in items if isinstance(i, (str, list, tuple))))
        return sum_(environment, items, attribute, start)

    for bounded, original in (
        (bounded_replace, replace),
        (bounded_join, join),
        (bounded_wordwrap, wordwrap),
        (bounded_sum, sum_),
    ):
        bounded.jinja_pass_arg = original.jinja_pass_arg  # eval context / environment, as Jinja passes them
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


def _default(value, default_value="", boolean=False):
    """Jinja's ``default``, which replaces an empty text too: an empty cell of the recipients file is no value (the
    row holds every column a template uses, as "" where the file leaves it empty), and ``{{ x|default('—') }}``
    is how a template says that ``x`` may be empty (``variables.printed_variables``)."""
    return default_value if isinstance(value, str) and value == "" else do_default(value, default_value, boolean)


def _check_str_method(method, args: tuple, kwargs: dict) -> tuple:
    """Refuse a ``str`` method call that would make a huge text; returns the arguments to call it with."""
    method = getattr(method, "__wrapped__", method)
    owner, name = getattr(method, "__self__", None), getattr(method, "__name__", "")
    if not isinstance(owner, str):
        return args
    if name in ("center", "ljust", "rjust", "zfill") and args:
        _width(args[0])
    elif name == "expandtabs":
        tab = args[0] if args else kwargs.get("tabsize", 8)
        _refuse_long(len(owner) + owner.count("\t") * (tab if isinstance(tab, int) else 0))
    elif name == "replace" and len(args) >= 2:
        count = args[2] if len(args) > 2 else kwargs.get("count")
        _refuse_long(_replaced_length(owner, str(args[0]), str(args[1]), count if isinstance(count, int) else None))
    elif name == "join" and args:
        items = list(args[0])
        _refuse_long(_joined_length(items, owner))
        return (items, *args[1:])
    elif name in ("format", "format_map"):
        _refuse_wide_format_spec(owner)
    return args


class _BoundedCodeGenerator(CodeGenerator):
    """Checks the length of every ``~`` join: a macro doubling a text forty times asked for a terabyte."""

    def visit_Concat(self, node, frame):
        self.write("environment.bounded_text(")
        super().visit_Concat(node, frame)
        self.write(")")


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """Jinja's sandbox bounds ``range`` but not ``'a' * 10**10``, ``(10**1000)**1000``, ``center(1000000000)``,
    ``'%999999999s'|format``, ``replace`` or ``~`` multiplying a long text: each one C call that took gigabytes
    or minutes in the web worker (preview) or a render job, beyond the reach of the time limit. These are
    refused before they run (widths and counts), or as soon as a text grows past ``MAX_OUTPUT_CHARS``."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})
    code_generator_class = _BoundedCodeGenerator

    def __init__(self, **options):
        super().__init__(**options)
        self.filters = {**_bounded_filters(self.filters), "default": _default, "d": _default}

    @staticmethod
    def bounded_text(text):
        if isinstance(text, str):
            _refuse_long(len(text))
        return text

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 - Jinja's own signature
        args = _check_str_method(__obj, args, kwargs)
        return __self.bounded_text(super().call(__context, __obj, *args, **kwargs))

    def call_binop(self, context, operator, left, right):
        if operator == "*":
            for items, times in ((left, right), (right, left)):
                if (
                    isinstance(items, (str, list, tuple))
                    and isinstance(times, int)
                    and len(items) * times > MAX_PRODUCT_LENGTH
                ):
                    raise _TooBig(N_("a repeat longer than %(n)s characters", n=MAX_PRODUCT_LENGTH))
        elif operator == "%":
            _refuse_wide_printf(left)
        elif operator == "+" and isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
            _refuse_long(len(left) + len(right))
        if (
            isinstance(left, int)
            and isinstance(right, int)
            and abs(left) > 1
            and operator in ("*", "**")
            and (left.bit_length() * right if operator == "**" else left.bit_length() + right.bit_length())
            > MAX_NUMBER_BITS
        ):
            raise _TooBig(N_("a number too large to print"))
        return super().call_binop(context, operator, left, right)


#: One sandboxed environment for every render: autoescape on, no access to Python internals.
sandbox = _BoundedSandbox(autoescape=True)
#: For plain-text mail bodies and subjects: still sandboxed, but HTML escaping would garble text.
text_sandbox = _BoundedSandbox(autoescape=False)


#: The filters and tests a template may use, as a refusal lists them: the sandbox's (both sandboxes have the same),
#: but not ``|safe``, which ``html_safety.unsafe_jinja`` refuses in documents.
ALLOWED_FILTERS = tuple(sorted(set(sandbox.filters) - {"safe"}))
ALLOWED_TESTS = tuple(sorted(name for name in sandbox.tests if name.isidentifier()))  # not "==", "<" ...


def refuse_unknown_names(ast: nodes.Template, *, source: str) -> None:
    """TemplateBroken, with the line and the names that exist, for a filter or test the sandbox does not have
    (``{{ salary|money }}``, ``{% if d is date %}``).

    Jinja finds one only when it compiles the template, which listing its variables does: a 500 when it was saved.
    And in a branch of an ``{% if %}`` it finds none until a row takes that branch, failing that row's render. So
    every filter and test is checked here in the parsed template, wherever it is."""
    for node in ast.find_all((nodes.Filter, nodes.Test)):
        if isinstance(node, nodes.Filter) and node.name not in sandbox.filters:
            raise TemplateBroken(
                N_("There is no filter named “%(name)s”: |%(name)s cannot be used.", name=node.name),
                node.lineno,
                hint=N_(
                    "Remove |%(name)s and show the value as the file has it, or use a filter that exists: %(names)s.",
                    name=node.name,
                    names=", ".join(ALLOWED_FILTERS),
                ),
                excerpt=excerpt(source, line=node.lineno),
            )
        if isinstance(node, nodes.Test) and node.name not in sandbox.tests:
            raise TemplateBroken(
                N_("There is no test named “%(name)s”: “is %(name)s” cannot be used.", name=node.name),
                node.lineno,
                hint=N_("Use a test that exists: %(names)s.", names=", ".join(ALLOWED_TESTS)),
                excerpt=excerpt(source, line=node.lineno),
            )


def refuse_other_templates(ast: nodes.Template, *, source: str) -> None:
    """TemplateBroken, with the line, for ``{% include %}``, ``{% import %}`` and ``{% extends %}``: a template is one
    document, and the sandbox loads no other (each failed every row's render, after a save without a word)."""
    for node in ast.find_all((nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)):
        tag = {nodes.Include: "include", nodes.Extends: "extends"}.get(type(node), "import")
        raise TemplateBroken(
            N_("{%% %(tag)s %%} cannot be used: a template is one document and loads no other.", tag=tag),
            node.lineno,
            hint=N_(
                "Copy the part you need into this template; to repeat a part, write it once as a {% macro %} and "
                "call it."
            ),
            excerpt=excerpt(source, line=node.lineno),
        )


def _template_line(exc: BaseException) -> int | None:
    """The template's line where a render failed: Jinja gives the template's frames its own file name and lines."""
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


#: Python's words for a calculation mixing text and numbers (``'5000' / 12``, ``'a' + 1``, ``'a' > 1``).
_TEXT_AS_NUMBER = re.compile(r"unsupported operand|can only concatenate|not supported between|must be str, not")


def _failure_message(exc: BaseException) -> N_:
    """What failed, in plain words for the two usual cases (Python's own in the staff member's language would not
    be), else Python's message as it is."""
    if isinstance(exc, ZeroDivisionError):
        return N_("The template could not be filled in: it divides by zero.")
    if isinstance(exc, TypeError) and _TEXT_AS_NUMBER.search(str(exc)):
        return N_("The template could not be filled in: it calculates with text as if it were a number.")
    return N_("The template could not be filled in: %(error)s", error=str(exc))


def _failure_hint(exc: BaseException) -> N_:
    """How to mend an expression that failed on the row's values."""
    if isinstance(exc, ZeroDivisionError):
        return N_("The calculation on this line divides by zero: check what it divides by.")
    if isinstance(exc, TypeError) and _TEXT_AS_NUMBER.search(str(exc)):
        return N_(
            "Every value from the file is text: make it a number before calculating, as in {{ salary|int * 12 }} or "
            "{{ amount|float / 2 }}."
        )
    return N_("Check the expression on this line: sample values fill in every variable, as the preview does.")


class _OutOfTime(BaseException):
    """Raised inside a render that ran past ``MAX_RENDER_SECONDS``; a BaseException so no ``except Exception``
    in Jinja or in a filter can swallow it."""


class _Watchdog:
    """One thread per process that interrupts a fill-in's Python code with ``_OutOfTime`` once its time is up.

    A thread started and joined for each fill-in cost more CPU than filling in a contract: a render job fills in
    each document and its invitation's subject, the mail job each subject and body (issue 32).
    """

    def __init__(self) -> None:
        self._start_over()
        # A forked child (gunicorn's workers) has none of the parent's threads, and may find the lock held.
        os.register_at_fork(after_in_child=self._start_over)

    def _start_over(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._tokens = itertools.count()
        #: token → (deadline on the monotonic clock, the thread filling in), one per fill-in running.
        self._running: dict[int, tuple[float, int]] = {}
        #: Whether the thread waits for a fill-in to start (``watch`` then wakes it); otherwise it wakes by itself
        #: at the earliest deadline it knew of, so a fill-in that starts meanwhile (due later) costs no wake-up.
        self._idle = False
        self._started = False

    @contextmanager
    def watch(self, seconds: float) -> Iterator[None]:
        """Interrupt the calling thread's Python code with ``_OutOfTime`` once ``seconds`` have passed."""
        with self._lock:
            if not self._started:
                self._started = True
                threading.Thread(target=self._run, name="template-time-limit", daemon=True).start()
            token, deadline = next(self._tokens), time.monotonic() + seconds
            if self._idle or any(deadline < other for other, _ in self._running.values()):
                self._idle = False
                self._wake.notify()
            self._running[token] = (deadline, threading.get_ident())
        try:
            yield
        finally:
            with self._lock:
                # Gone from here, the fill-in is never interrupted: the exception lands inside the block or not at all.
                self._running.pop(token, None)

    def _run(self) -> None:
        with self._lock:
            while True:
                if not self._running:
                    self._idle = True
                    self._wake.wait()
                    continue
                token, (deadline, thread_id) = min(self._running.items(), key=lambda item: item[1][0])
                left = deadline - time.monotonic()
                if left > 0:
                    self._wake.wait(left)
                    continue
                del self._running[token]
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(_OutOfTime))


_watchdog = _Watchdog()


@functools.lru_cache(maxsize=128)
def _compiled(env_name: str, source: str):
    # Versions never change, so a worker compiles each one once, not once per recipient.
    return (sandbox if env_name == "html" else text_sandbox).from_string(source)


def _render(env_name: str, source: str, context: dict) -> str:
    try:
        template = _compiled(env_name, source)
        parts, size = [], 0
        with _watchdog.watch(MAX_RENDER_SECONDS):
            for part in template.generate(context):
                size += len(part)
                if size > MAX_OUTPUT_CHARS:
                    raise TemplateTooCostly(
                        N_(
                            "The template makes more than %(n)s characters of text for one "
                            "recipient (a loop inside a loop?).",
                            n=f"{MAX_OUTPUT_CHARS:,}",
                        )
                    )
                parts.append(part)
        return "".join(parts)
    except _OutOfTime:
        raise TemplateTooCostly(
            N_(
                "The template took longer than %(n)s s to fill in for one recipient (a loop inside a loop?).",
                n=f"{MAX_RENDER_SECONDS:g}",
            )
        ) from None
    except TemplateSyntaxError as exc:
        raise syntax_error(exc, source) from None
    except _TooBig as exc:
        raise TemplateTooCostly(
            N_("The template tried something that is not allowed: %(what)s", what=exc.args[0])
        ) from None
    except SecurityError as exc:
        raise TemplateError(N_("The template tried something that is not allowed: %(what)s", what=str(exc))) from None
    # An expression that fails on the row's values ({{ name.first }}, {{ 1/0 }}, {{ 'a' + 1 }}) is the
    # template's fault: a clear refusal, not a 500 on the preview or a render job that dies unexplained.
    except (TemplateRuntimeError, ArithmeticError, LookupError, TypeError, ValueError) as exc:
        if isinstance(exc, TemplateError):
            raise
        line = _template_line(exc)
        raise TemplateError(
            _failure_message(exc),
            line,
            hint=_failure_hint(exc),
            excerpt=excerpt(source, line=line),
        ) from None
    except RecursionError:
        raise TemplateBroken(N_("The template could not be filled in: a macro calls itself without end.")) from None
    except MemoryError:
        raise TemplateTooCostly(N_("The template needs more memory than one document may take.")) from None
    # Anything else a filter or a method raises (``'text'|xmlattr``: AttributeError) is still the template's
    # fault: it failed one recipient's whole render chunk, and the template's save with a 500.
    except Exception as exc:  # noqa: BLE001 - see above
        raise TemplateBroken(
            N_("The template could not be filled in: %(error)s", error=f"{type(exc).__name__}: {exc}")
        ) from None


def render_html(source: str, context: dict) -> str:
    """Render a document template to HTML: every value is escaped, nothing outside ``context`` is reachable."""
    return _render("html", source, context)


def render_text(source: str, context: dict) -> str:
    """Render a mail subject or plain-text body."""
    return _render("text", source, context)

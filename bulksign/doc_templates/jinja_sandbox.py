"""The bounded Jinja sandbox every template renders in: Jinja's immutable sandbox with ``template_bounds``' limits,
and ``render_html`` / ``render_text``, which turn whatever a template does wrong into a ``TemplateError``."""

from __future__ import annotations

import ctypes
import functools
import itertools
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jinja2 import Template, TemplateSyntaxError, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError, TemplateRuntimeError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from bulksign.core.messages import N_
from bulksign.doc_templates import value_filters
from bulksign.doc_templates.errors import TemplateBroken, TemplateError, TemplateTooCostly, excerpt, syntax_error
from bulksign.doc_templates.template_bounds import (
    MAX_NUMBER_BITS,
    MAX_OUTPUT_CHARS,
    MAX_PRODUCT_LENGTH,
    MAX_RENDER_SECONDS,
    TooBig,
    bounded_filters,
    check_str_method,
    default,
    refuse_long,
    refuse_wide_printf,
)


class _BoundedCodeGenerator(CodeGenerator):
    """Checks the length of every ``~`` join: a macro doubling a text forty times asked for a terabyte."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.bounded_text(")
        super().visit_Concat(node, frame)
        self.write(")")


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """Jinja's sandbox with the single C calls that could take gigabytes or minutes (huge repeats, widths, powers)
    refused before they run, and any text refused once it grows past ``MAX_OUTPUT_CHARS``."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})
    code_generator_class = _BoundedCodeGenerator

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.filters = {**bounded_filters(self.filters), "default": default, "d": default, **value_filters.FILTERS}

    @staticmethod
    def bounded_text(text: Any) -> Any:
        if isinstance(text, str):
            refuse_long(len(text))
        return text

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - Jinja's own signature
        args = check_str_method(__obj, args, kwargs)
        return __self.bounded_text(super().call(__context, __obj, *args, **kwargs))

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for items, times in ((left, right), (right, left)):
                if (
                    isinstance(items, (str, list, tuple))
                    and isinstance(times, int)
                    and len(items) * times > MAX_PRODUCT_LENGTH
                ):
                    raise TooBig(N_("a repeat longer than %(n)s characters", n=MAX_PRODUCT_LENGTH))
        elif operator == "%":
            refuse_wide_printf(left)
        elif operator == "+" and isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
            refuse_long(len(left) + len(right))
        if (
            isinstance(left, int)
            and isinstance(right, int)
            and abs(left) > 1
            and operator in ("*", "**")
            and (left.bit_length() * right if operator == "**" else left.bit_length() + right.bit_length())
            > MAX_NUMBER_BITS
        ):
            raise TooBig(N_("a number too large to print"))
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
    """TemplateBroken, with the line and the names that exist, for a filter or test the sandbox does not have, wherever
    it stands in the template (Jinja itself finds one only in a branch a row takes)."""
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
    each document and its invitation's subject, the mail job each subject and body.
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
def _compiled(env_name: str, source: str) -> Template:
    # Versions never change, so a worker compiles each one once, not once per recipient.
    return (sandbox if env_name == "html" else text_sandbox).from_string(source)


def _render(env_name: str, source: str, context: dict[str, Any]) -> str:
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
    except TooBig as exc:
        raise TemplateTooCostly(
            N_("The template tried something that is not allowed: %(what)s", what=exc.what)
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


def render_html(source: str, context: dict[str, Any]) -> str:
    """Render a document template to HTML: every value is escaped, nothing outside ``context`` is reachable."""
    return _render("html", source, context)


def render_text(source: str, context: dict[str, Any]) -> str:
    """Render a mail subject or plain-text body."""
    return _render("text", source, context)

"""Document templates: immutable versions, variables extracted at save, rendered in Jinja's sandbox."""
from __future__ import annotations

import ctypes
import functools
import logging
import re
import string
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING
from html.parser import HTMLParser

from jinja2 import TemplateSyntaxError, meta, nodes
from jinja2.compiler import CodeGenerator
from jinja2.exceptions import SecurityError, TemplateRuntimeError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from bulksign.people import access
from bulksign.doc_templates import template_words
from bulksign.core.logs import log
from bulksign.mail.mail_headers import CONTROL_CHARACTERS
from bulksign.core.messages import N_
from bulksign.models import DocumentTemplate, TemplateVersion, User
from bulksign.documents.signature_box import SIGNATURE_VARIABLE, html_mark

if TYPE_CHECKING:
    from bulksign.doc_templates import pdf_forms

logger = logging.getLogger(__name__)

#: Variables every request has whatever the file's columns; not required as columns.
BUILTIN_VARIABLES = frozenset({"email", "name", "phone", SIGNATURE_VARIABLE})

# The default mail texts are message ids: a template that keeps one mails it in its batch's language
# (``mail_text``). Outside a request N_ renders the English id, which is what a new version stores.
DEFAULT_EMAIL_SUBJECT = N_("Please sign: {{ document_name }}").msgid
DEFAULT_EMAIL_BODY = N_(
    "Hello {{ name }},\n\n{{ sender }} asks you to sign \"{{ document_name }}\".\n"
    "Open the document and sign it here:\n{{ signing_link }}\n\n"
    "The link is personal: please do not forward it. It is valid until {{ deadline }}.\n"
).msgid
DEFAULT_REMINDER_SUBJECT = N_("Reminder: \"{{ document_name }}\" is waiting for your signature").msgid
DEFAULT_REMINDER_BODY = N_(
    "Hello {{ name }},\n\nA friendly reminder: \"{{ document_name }}\" from {{ sender }} is still "
    "waiting for your signature.\nIt takes a minute:\n{{ signing_link }}\n\n"
    "The link stays valid until {{ deadline }}.\n"
).msgid
#: The mail texts each version carries (a new version made from an old one keeps them).
MAIL_FIELDS = ("email_subject", "email_body", "reminder_subject", "reminder_body")
_DEFAULT_MAIL_TEXTS = frozenset({DEFAULT_EMAIL_SUBJECT, DEFAULT_EMAIL_BODY, DEFAULT_REMINDER_SUBJECT,
                                 DEFAULT_REMINDER_BODY})


def mail_text(source: str, *, language: str) -> str:
    """A mail template as the batch's recipients read it: a default text in their language, staff's own as written."""
    if source not in _DEFAULT_MAIL_TEXTS:
        return source
    from flask_babel import force_locale, gettext

    with force_locale(language):
        return gettext(source)


#: The most characters (or list items) one ``*`` may make, and the most bits a ``*`` or ``**`` of numbers may make.
MAX_PRODUCT_LENGTH = 100_000
MAX_NUMBER_BITS = 100_000
#: One fill-in of a template (a document, a subject, a body) may take this long and make this much text.
#: Loops inside loops over ``range(100000)`` otherwise keep a web worker (preview) or a render job busy for hours.
MAX_RENDER_SECONDS = 5.0
MAX_OUTPUT_CHARS = 10_000_000
#: Longest template and mail text a version may have: a 45 MB ``html`` field took a web worker 15 s to check.
MAX_TEMPLATE_CHARS = 2_000_000
MAX_MAIL_TEXT_CHARS = 100_000


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


def _width(value, too_big: N_ = N_("a width over %(n)s", n=MAX_WIDTH)) -> None:
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

    for bounded, original in ((bounded_replace, replace), (bounded_join, join), (bounded_wordwrap, wordwrap),
                              (bounded_sum, sum_)):
        bounded.jinja_pass_arg = original.jinja_pass_arg  # eval context / environment, as Jinja passes them
    return {**filters, "center": bounded_center, "indent": bounded_indent, "format": bounded_format,
            "replace": bounded_replace, "join": bounded_join, "batch": bounded_batch, "slice": bounded_slice,
            "wordwrap": bounded_wordwrap, "sum": bounded_sum}


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
        self.filters = _bounded_filters(self.filters)

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
                if isinstance(items, (str, list, tuple)) and isinstance(times, int) \
                        and len(items) * times > MAX_PRODUCT_LENGTH:
                    raise _TooBig(N_("a repeat longer than %(n)s characters", n=MAX_PRODUCT_LENGTH))
        elif operator == "%":
            _refuse_wide_printf(left)
        elif operator == "+" and isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
            _refuse_long(len(left) + len(right))
        if isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and operator in ("*", "**") and (
                left.bit_length() * right if operator == "**" else left.bit_length() + right.bit_length()
        ) > MAX_NUMBER_BITS:
            raise _TooBig(N_("a number too large to print"))
        return super().call_binop(context, operator, left, right)


#: One sandboxed environment for every render: autoescape on, no access to Python internals.
sandbox = _BoundedSandbox(autoescape=True)
#: For plain-text mail bodies and subjects: still sandboxed, but HTML escaping would garble text.
text_sandbox = _BoundedSandbox(autoescape=False)


class _OutOfTime(BaseException):
    """Raised inside a render that ran past ``MAX_RENDER_SECONDS``; a BaseException so no ``except Exception``
    in Jinja or in a filter can swallow it."""


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the calling thread's Python code with ``_OutOfTime`` once ``seconds`` have passed."""
    thread_id = threading.get_ident()
    finished = threading.Event()
    lock = threading.Lock()
    state = {"done": False}

    def watchdog() -> None:
        if finished.wait(seconds):
            return
        with lock:
            # Only while the render still runs: the exception then lands inside this ``with`` block.
            if not state["done"]:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(_OutOfTime))

    watcher = threading.Thread(target=watchdog, name="template-time-limit", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        with lock:
            state["done"] = True
        finished.set()


class TemplateError(ValueError):
    """The template cannot be used; ``line`` is 1-based when known, ``hint`` says how to fix it, ``excerpt`` is the
    text of that line."""

    def __init__(self, message: str, line: int | None = None, *, hint: str | None = None, excerpt: str | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.hint = hint
        self.excerpt = excerpt

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else str(self.message)


def syntax_error(exc: TemplateSyntaxError, source: str) -> TemplateError:
    """Jinja's syntax error in plain words, with the line, its text and a hint."""
    lines = source.splitlines()
    line_text = lines[exc.lineno - 1] if exc.lineno and 0 < exc.lineno <= len(lines) else ""
    plain = template_words.explain(exc.message or "", line_text=line_text)
    return TemplateError(plain.message, exc.lineno, hint=plain.hint, excerpt=line_text.strip()[:300] or None)


class TemplateBroken(TemplateError):
    """The template fails in a way no row's values can avoid; refused when it is saved."""


class TemplateTooCostly(TemplateBroken):
    """Filling the template in takes too long or makes too much text, whatever the row's values."""


def extract_variables(source: str) -> list[str]:
    """The placeholders a template uses, sorted; raises TemplateError with the line on a syntax error."""
    try:
        ast = sandbox.parse(source)
    except TemplateSyntaxError as exc:
        raise syntax_error(exc, source) from None
    return sorted(meta.find_undeclared_variables(ast))


#: Attributes through which a tag makes the renderer fetch something (``href`` except on links).
_URL_ATTRIBUTES = frozenset({"src", "srcset", "poster", "data", "background", "href", "xlink:href",
                             "lowsrc", "dynsrc", "codebase", "archive", "manifest", "action", "formaction"})
#: Tags whose ``href`` is a link for the reader, not a fetch by the renderer.
_LINK_TAGS = frozenset({"a", "area"})
#: Tags the renderer could load something through even without a URL attribute we know of.
_REFUSED_TAGS = {"script": N_("JavaScript is not allowed in a document template (the renderer has it switched off)."),
                 "base": N_("<base> changes where every link and image is loaded from; it is not allowed.")}
_JINJA = re.compile(r"{{|{%")
_CSS_URL = re.compile(r"url\(\s*(['\"]?)(.*?)\1\s*\)|@import\s+(['\"])(.*?)\3", re.I | re.S)
_CSS_ESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{1,6})\s?|(.))", re.S)
#: A quoted CSS string that is an address (``image-set("http://…")``), wherever it appears.
_CSS_STRING_URL = re.compile(r"(['\"])\s*((?:https?|ftp|file):.*?|//.*?)\1", re.I | re.S)
#: A tag whose name is written by Jinja escapes the attribute checks.
_UNQUOTED_JINJA = re.compile(r"=\s*[^\s\"'>]*(?:{{|{%)")
_JINJA_TAG = re.compile(r"<\s*/?\s*(?:{{|{%)")
_URL_NOISE = re.compile(r"[\x00-\x20]+")


def _resource_problem(url: str) -> N_ | None:
    """Why the renderer must not fetch ``url``, or None for an embedded data: URL or a #fragment."""
    cleaned = _URL_NOISE.sub("", url).lower()  # browsers drop tabs and newlines inside URLs
    if cleaned == "" or cleaned.startswith(("data:", "#")):
        return None
    return N_("loads %(url)r: a document may not fetch external or local files (http, https, file, ftp, // or "
              "relative paths). Embed images as data: URLs and styles inline.", url=url.strip()[:80])


def _css_unescape(css: str) -> str:
    """CSS escapes decoded, so that ``\\75 rl(`` is seen as ``url(``."""
    def one(match: re.Match) -> str:
        if match.group(1):
            code = int(match.group(1), 16)
            return chr(code) if 0 < code <= 0x10FFFF else "\ufffd"
        return match.group(2)

    return _CSS_ESCAPE.sub(one, css)


class _SafetyScanner(HTMLParser):
    """Walks the template source as HTML and records the first thing that would fetch or run something."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.problem: TemplateError | None = None
        self._raw_tag: str | None = None

    def _refuse(self, message: N_, line: int | None = None) -> None:
        if self.problem is None:
            self.problem = TemplateError(message, line or self.getpos()[0])

    def handle_starttag(self, tag, attrs):
        self._check_tag(tag, attrs)
        if tag in ("style", "script"):
            self._raw_tag = tag

    def handle_startendtag(self, tag, attrs):
        self._check_tag(tag, attrs)

    def handle_endtag(self, tag):
        if tag == self._raw_tag:
            self._raw_tag = None

    def handle_data(self, data):
        if self._raw_tag == "style":
            self._check_css(data, N_("<style>"), self.getpos()[0])

    def handle_pi(self, data):
        self._refuse(N_("Processing instructions (<?...>) are not allowed."))

    def _check_tag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        line = self.getpos()[0]
        if tag in _REFUSED_TAGS:
            self._refuse(_REFUSED_TAGS[tag], line)
        if "{" in tag or "}" in tag:
            self._refuse(N_("A tag name may not be written by a {{ variable }}."), line)
        if _UNQUOTED_JINJA.search(self.get_starttag_text() or ""):
            self._refuse(N_("<%(tag)s> has a {{ variable }} in an unquoted attribute value: a value with spaces "
                            "would add attributes. Put the value in double quotes.", tag=tag), line)
        for name, value in attrs:
            value = value or ""
            if "{" in name or "}" in name or "%" in name:
                self._refuse(N_("<%(tag)s> has a {{ variable }} or {%% tag %%} between its attributes; variables "
                                "are allowed only inside quoted attribute values.", tag=tag), line)
                continue
            if name == "style":
                self._check_css(value, N_("the style of <%(tag)s>", tag=tag), line)
            elif name == "srcdoc":
                self._refuse(N_("<%(tag)s srcdoc> embeds a second document; it is not allowed.", tag=tag), line)
            elif tag == "meta" and name == "http-equiv" and value.strip().lower() == "refresh":
                self._refuse(N_("<meta http-equiv=refresh> makes the renderer load another page; it is not allowed."),
                             line)
            elif name in _URL_ATTRIBUTES and not (name == "href" and tag in _LINK_TAGS):
                if _JINJA.search(value):
                    self._refuse(N_("<%(tag)s %(name)s> uses a {{ variable }}: recipient data may not choose what "
                                    "the renderer loads. Put the variable in the text instead.", tag=tag, name=name),
                                 line)
                    continue
                urls = [part.strip().split(" ")[0] for part in re.split(r",\s+", value)] if name == "srcset" else [value]
                for url in urls:
                    problem = _resource_problem(url)
                    if problem:
                        self._refuse(N_("<%(tag)s %(name)s> %(problem)s", tag=tag, name=name, problem=problem), line)

    def _check_css(self, css: str, where: N_, line: int) -> None:
        if _JINJA.search(css):
            offset = css[:_JINJA.search(css).start()].count("\n")
            self._refuse(N_("%(where)s uses a {{ variable }}: recipient data may not write styles.", where=where),
                         line + offset)
            return
        plain = _css_unescape(css)
        found = [(m.start(), m.group(2) if m.group(2) is not None else m.group(4)) for m in _CSS_URL.finditer(plain)]
        found += [(m.start(), m.group(2)) for m in _CSS_STRING_URL.finditer(plain)]
        for start, url in sorted(found):
            problem = _resource_problem(url)
            if problem:
                self._refuse(N_("%(where)s %(problem)s", where=where, problem=problem),
                             line + plain[:start].count("\n"))


def _unsafe_jinja(ast: nodes.Template) -> TemplateError | None:
    """Constructs that would let the template emit unescaped markup the HTML check never saw."""
    for node in ast.find_all((nodes.Filter, nodes.ScopedEvalContextModifier, nodes.EvalContextModifier)):
        if isinstance(node, nodes.Filter) and node.name == "safe":
            return TemplateError(N_("The |safe filter is not allowed: it would let data become markup."), node.lineno)
        if not isinstance(node, nodes.Filter):
            return TemplateError(N_("{% autoescape %} is not allowed: every value is escaped."), node.lineno)
    return None


def check_html_safety(source: str) -> None:
    """Refuse a document template that could make the renderer fetch a resource or run a script.

    wkhtmltopdf silently ignores a refused fetch (exit 0), so a template that reaches a local or
    external address can only be stopped here, when it is saved. Raises TemplateError with the line.
    """
    try:
        ast = sandbox.parse(source)
    except TemplateSyntaxError as exc:
        raise syntax_error(exc, source) from None
    problem = _unsafe_jinja(ast)
    if problem:
        raise problem
    tag = _JINJA_TAG.search(source)
    if tag:
        raise TemplateError(N_("A tag name may not be written by a {{ variable }} or {% tag %}."),
                            source[:tag.start()].count("\n") + 1)
    scanner = _SafetyScanner()
    scanner.feed(source)
    scanner.close()
    if scanner.problem:
        raise scanner.problem


@dataclass(frozen=True)
class SavedVersion:
    template: DocumentTemplate
    version: TemplateVersion
    #: What was taken out of the uploaded file (a PDF's active content: ``pdf_cleaning.REMOVED``), to tell staff.
    removed: tuple[N_, ...] = ()


def create_template(session: Session, *, name: str, html: str, user: User | None, now: datetime,
                    email_subject: str = DEFAULT_EMAIL_SUBJECT, email_body: str = DEFAULT_EMAIL_BODY,
                    reminder_subject: str = DEFAULT_REMINDER_SUBJECT,
                    reminder_body: str = DEFAULT_REMINDER_BODY, team_id: int | None = None,
                    kind: str = "html", file: bytes | None = None) -> SavedVersion:
    """A new template with its first version, shared with ``team_id`` (default: the user's first team).

    ``kind`` other than ``html``: the document is ``file`` (a .docx …), see ``save_version``."""
    if user is not None:
        access.require_creator(user)
    name = name.strip()
    if not name:
        raise TemplateError(N_("Give the template a name."))
    if CONTROL_CHARACTERS.search(name):  # the name goes into the subject of confirmations and invitations
        raise TemplateError(N_("The template name may not contain line breaks or other control characters."))
    try:
        team_id = access.team_for_new(session, user=user, team_id=team_id) if user is not None else team_id
    except access.Refused as exc:
        raise TemplateError(exc.message) from None
    template = DocumentTemplate(name=name[:200], created_by_id=user.id if user else None, team_id=team_id,
                                created_at=now)
    session.add(template)
    session.flush()
    return save_version(session, template=template, html=html, user=user, now=now,
                        email_subject=email_subject, email_body=email_body,
                        reminder_subject=reminder_subject, reminder_body=reminder_body, kind=kind, file=file)


def save_version(session: Session, *, template: DocumentTemplate, html: str, user: User | None, now: datetime,
                 email_subject: str, email_body: str, reminder_subject: str, reminder_body: str,
                 kind: str = "html", file: bytes | None = None, pdf_boxes: list[dict] | None = None) -> SavedVersion:
    """Insert the next immutable version of ``template``; Refused(403) for a user who may only use it.

    For a file kind (``docx``, ``pdf``) the document is ``file``, checked and kept in storage; without a
    new file, the version keeps the previous version's file of the same kind (a change of the mail texts)
    and, for a PDF, the boxes placed on it. ``pdf_boxes``: a new placement of boxes on the PDF's pages."""
    if user is not None and not access.may_edit_template(session, template=template, user=user):
        raise access.Refused(N_("Only the template's owner, a manager of its team or an admin can change it."), 403)
    subjects = ((N_("email subject"), email_subject), (N_("reminder subject"), reminder_subject))
    mail_texts = (subjects[0], (N_("email body"), email_body), subjects[1], (N_("reminder body"), reminder_body))
    for label, text in mail_texts:
        if len(text) > MAX_MAIL_TEXT_CHARS:
            raise TemplateError(N_("The %(label)s has %(n)s characters; the limit is %(limit)s.", label=label,
                                   n=f"{len(text):,}", limit=f"{MAX_MAIL_TEXT_CHARS:,}"))
    for label, text in subjects:
        if CONTROL_CHARACTERS.search(text):  # each is the Subject field of every mail made from it
            raise TemplateError(N_("The %(label)s may not contain line breaks or other control characters.",
                                   label=label))
    source_key = placed = None
    removed: tuple[N_, ...] = ()
    if kind == "html":
        variables = _html_variables(html)
    else:
        html = ""
        variables, source_key, placed, removed = _file_variables(session, template=template, kind=kind, file=file,
                                                                 pdf_boxes=pdf_boxes)
    for label, text in mail_texts:
        try:
            extract_variables(text)
        except TemplateError as exc:
            raise TemplateError(N_("%(label)s: %(message)s", label=label, message=exc.message), exc.line,
                                hint=exc.hint, excerpt=exc.excerpt) from None
    template.latest_version += 1
    version = TemplateVersion(
        template_id=template.id, version=template.latest_version, kind=kind, html=html, source_key=source_key,
        pdf_boxes=placed, variables=variables,
        email_subject=email_subject, email_body=email_body, reminder_subject=reminder_subject,
        reminder_body=reminder_body, created_by_id=user.id if user else None, created_at=now,
    )
    session.add(version)
    session.flush()
    log(logger, logging.INFO, "template version saved", template_id=template.id, version=version.version)
    if removed:
        log(logger, logging.INFO, "active content taken out of an uploaded template", template_id=template.id,
            version=version.version, removed=[label.english for label in removed])
    return SavedVersion(template=template, version=version, removed=removed)


class NotPdfTemplate(TemplateError):
    """Boxes were placed on, or asked of, a template whose newest version is not a PDF."""


def _newest_pdf_version(session: Session, *, template: DocumentTemplate) -> TemplateVersion:
    """The template's newest version, which must be a PDF's; NotPdfTemplate otherwise."""
    version = get_version(session, template_id=template.id)
    if version is None or version.kind != "pdf":
        raise NotPdfTemplate(N_("Boxes can only be placed on a PDF template; upload a PDF as a new version first."))
    return version


def place_boxes(session: Session, *, template: DocumentTemplate, boxes: list[dict], user: User | None,
                now: datetime) -> SavedVersion:
    """The next version of a PDF template with ``boxes`` (``pdf_forms.check_boxes``) in place of its placed boxes;
    its file and mail texts are kept. NotPdfTemplate when the newest version is of another kind."""
    version = _newest_pdf_version(session, template=template)
    return save_version(session, template=template, html="", kind="pdf", file=None, pdf_boxes=boxes, user=user,
                        now=now, **{f: getattr(version, f) for f in MAIL_FIELDS})


@dataclass(frozen=True)
class PdfLayout:
    """A PDF template's newest version as the box editor sees it: its pages, its form's own fields, placed boxes."""

    version: TemplateVersion
    #: The pages (crop box, rotation) and the form's fields, which stay where the file has them.
    form: pdf_forms.PdfForm
    #: The boxes staff placed, as ``place_boxes`` took them.
    boxes: tuple[pdf_forms.FieldBox, ...]


def pdf_layout(session: Session, *, template: DocumentTemplate) -> PdfLayout:
    """The pages, form fields and placed boxes of a PDF template's newest version; NotPdfTemplate for another kind."""
    from bulksign.doc_templates import pdf_forms  # noqa: F811 - the kinds' modules build on this one
    from bulksign.documents.storage import get_storage

    version = _newest_pdf_version(session, template=template)
    return PdfLayout(version=version, form=pdf_forms.read_form(get_storage().get(version.source_key)),
                     boxes=pdf_forms.placed_boxes(version))


def _html_variables(html: str) -> list[str]:
    if not html.strip():
        raise TemplateError(N_("The template is empty."))
    if len(html) > MAX_TEMPLATE_CHARS:
        raise TemplateError(N_("The template has %(n)s characters; the limit is %(limit)s. Embed smaller images, or "
                               "link fewer of them.", n=f"{len(html):,}", limit=f"{MAX_TEMPLATE_CHARS:,}"))
    variables = extract_variables(html)
    check_html_safety(html)
    _check_cost(html, sample_row(variables))
    return variables


def _file_variables(session: Session, *, template: DocumentTemplate, kind: str, file: bytes | None,
                    pdf_boxes: list[dict] | None) -> tuple[list[str], str, list[dict] | None, tuple[N_, ...]]:
    """The variables, storage key and placed boxes of a file kind's version, and what was taken out of its file: the
    new file, cleaned (no boxes yet), or the previous version's file and boxes; ``pdf_boxes`` replaces the boxes."""
    # Imported here: the kinds' modules build on this one (its sandbox and errors).
    from bulksign.doc_templates import pdf_forms, kinds as template_kinds
    from bulksign.documents.storage import get_storage

    if file is None:
        previous = get_version(session, template_id=template.id)
        if previous is None or previous.kind != kind:
            raise TemplateError(N_("Upload the template file (%(extension)s).",
                                   extension=template_kinds.file_kind(kind).extensions[0]))
        variables, key, placed = list(previous.variables), previous.source_key, previous.pdf_boxes
        removed = ()
    else:
        checked = template_kinds.check_file(kind=kind, data=file)
        file, variables, removed = checked.data, checked.variables, checked.removed
        key = template_kinds.source_key(template_id=template.id, kind=kind, data=file)
        get_storage().put(key, file, content_type=template_kinds.file_kind(kind).content_type)
        placed = None
    if pdf_boxes is not None:
        if kind != "pdf":
            raise TemplateError(N_("Boxes can only be placed on a PDF template."))
        variables, placed = pdf_forms.place(file if file is not None else get_storage().get(key), pdf_boxes)
    return variables, key, placed, removed


def list_templates(session: Session, *, user: User, include_archived: bool = False,
                   after: tuple[str, int] | None = None, limit: int | None = None) -> list[DocumentTemplate]:
    """The templates ``user`` may see, by name, for the list page and the API (keyset pages after (name, id))."""
    query = (select(DocumentTemplate).where(access.template_filter(user))
             .order_by(DocumentTemplate.name, DocumentTemplate.id).limit(limit))
    if not include_archived:
        query = query.where(DocumentTemplate.archived.is_(False))
    if after is not None:
        query = query.where(tuple_(DocumentTemplate.name, DocumentTemplate.id) > tuple_(*after))
    return list(session.scalars(query))


def get_version(session: Session, *, template_id: int, version: int | None = None) -> TemplateVersion | None:
    """One version of a template (the newest when ``version`` is None), or None."""
    query = select(TemplateVersion).where(TemplateVersion.template_id == template_id)
    if version is None:
        query = query.order_by(TemplateVersion.version.desc()).limit(1)
    else:
        query = query.where(TemplateVersion.version == version)
    return session.scalar(query)


def sample_row(variables: list[str]) -> dict[str, str]:
    """Values that show where each variable lands, for the preview."""
    known = {"name": "Jane Example", "email": "jane@example.com", "phone": "+1 555 0100",
             SIGNATURE_VARIABLE: html_mark()}
    return {var: known.get(var, f"[{var}]") for var in variables}


@functools.lru_cache(maxsize=128)
def _compiled(env_name: str, source: str):
    # Versions never change, so a worker compiles each one once, not once per recipient.
    return (sandbox if env_name == "html" else text_sandbox).from_string(source)


def _render(env_name: str, source: str, context: dict) -> str:
    try:
        template = _compiled(env_name, source)
        parts, size = [], 0
        with _time_limit(MAX_RENDER_SECONDS):
            for part in template.generate(context):
                size += len(part)
                if size > MAX_OUTPUT_CHARS:
                    raise TemplateTooCostly(N_("The template makes more than %(n)s characters of text for one "
                                               "recipient (a loop inside a loop?).", n=f"{MAX_OUTPUT_CHARS:,}"))
                parts.append(part)
        return "".join(parts)
    except _OutOfTime:
        raise TemplateTooCostly(N_("The template took longer than %(n)s s to fill in for one recipient (a loop "
                                   "inside a loop?).", n=f"{MAX_RENDER_SECONDS:g}")) from None
    except TemplateSyntaxError as exc:
        raise syntax_error(exc, source) from None
    except _TooBig as exc:
        raise TemplateTooCostly(N_("The template tried something that is not allowed: %(what)s", what=exc.args[0])) \
            from None
    except SecurityError as exc:
        raise TemplateError(N_("The template tried something that is not allowed: %(what)s", what=str(exc))) from None
    # An expression that fails on the row's values ({{ name.first }}, {{ 1/0 }}, {{ 'a' + 1 }}) is the
    # template's fault: a clear refusal, not a 500 on the preview or a render job that dies unexplained.
    except (TemplateRuntimeError, ArithmeticError, LookupError, TypeError, ValueError) as exc:
        if isinstance(exc, TemplateError):
            raise
        raise TemplateError(N_("The template could not be filled in: %(error)s", error=str(exc))) from None
    except RecursionError:
        raise TemplateBroken(N_("The template could not be filled in: a macro calls itself without end.")) from None
    except MemoryError:
        raise TemplateTooCostly(N_("The template needs more memory than one document may take.")) from None
    # Anything else a filter or a method raises (``'text'|xmlattr``: AttributeError) is still the template's
    # fault: it failed one recipient's whole render chunk, and the template's save with a 500.
    except Exception as exc:  # noqa: BLE001 - see above
        raise TemplateBroken(N_("The template could not be filled in: %(error)s",
                                error=f"{type(exc).__name__}: {exc}")) from None


def _check_cost(source: str, context: dict) -> None:
    """Refuse at save a template too costly or broken for any row; value errors depend on the real rows."""
    try:
        render_html(source, context)
    except TemplateBroken:
        raise
    except TemplateError:
        pass


def render_html(source: str, context: dict) -> str:
    """Render a document template to HTML: every value is escaped, nothing outside ``context`` is reachable."""
    return _render("html", source, context)


def render_text(source: str, context: dict) -> str:
    """Render a mail subject or plain-text body."""
    return _render("text", source, context)

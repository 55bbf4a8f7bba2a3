"""The save-time check of HTML templates: nothing that makes the renderer fetch a resource or run a script, no
variable where recipient data would choose what is loaded or written as markup. More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from jinja2 import TemplateSyntaxError, nodes

from bulksign.core.messages import N_
from bulksign.doc_templates.errors import TemplateError, syntax_error
from bulksign.doc_templates.jinja_sandbox import sandbox

#: Attributes through which a tag makes the renderer fetch something (``href`` except on links).
_URL_ATTRIBUTES = frozenset(
    {
        "src",
        "srcset",
        "poster",
        "data",
        "background",
        "href",
        "xlink:href",
        "lowsrc",
        "dynsrc",
        "codebase",
        "archive",
        "manifest",
        "action",
        "formaction",
    }
)
#: Tags whose ``href`` is a link for the reader, not a fetch by the renderer.
_LINK_TAGS = frozenset({"a", "area"})
#: Tags the renderer could load something through even without a URL attribute we know of.
_REFUSED_TAGS = {
    "script": N_("JavaScript is not allowed in a document template (the renderer has it switched off)."),
    "base": N_("<base> changes where every link and image is loaded from; it is not allowed."),
}
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
    return N_(
        "loads %(url)r: a document may not fetch external or local files (http, https, file, ftp, // or "
        "relative paths). Embed images as data: URLs and styles inline.",
        url=url.strip()[:80],
    )


def _css_unescape(css: str) -> str:
    """CSS escapes decoded, so that ``\\75 rl(`` is seen as ``url(``."""

    def one(match: re.Match[str]) -> str:
        if match.group(1):
            code = int(match.group(1), 16)
            return chr(code) if 0 < code <= 0x10FFFF else "\ufffd"
        return match.group(2)

    return _CSS_ESCAPE.sub(one, css)


class _SafetyScanner(HTMLParser):
    """Walks the template source as HTML and records the first thing that would fetch or run something."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problem: TemplateError | None = None
        self._raw_tag: str | None = None

    def _refuse(self, message: N_, line: int | None = None) -> None:
        if self.problem is None:
            self.problem = TemplateError(message, line or self.getpos()[0])

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._check_tag(tag, attrs)
        if tag in ("style", "script"):
            self._raw_tag = tag

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._check_tag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag == self._raw_tag:
            self._raw_tag = None

    def handle_data(self, data: str) -> None:
        if self._raw_tag == "style":
            self._check_css(data, N_("<style>"), self.getpos()[0])

    def handle_pi(self, data: str) -> None:
        self._refuse(N_("Processing instructions (<?...>) are not allowed."))

    def _check_tag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        line = self.getpos()[0]
        if tag in _REFUSED_TAGS:
            self._refuse(_REFUSED_TAGS[tag], line)
        if "{" in tag or "}" in tag:
            self._refuse(N_("A tag name may not be written by a {{ variable }}."), line)
        if _UNQUOTED_JINJA.search(self.get_starttag_text() or ""):
            self._refuse(
                N_(
                    "<%(tag)s> has a {{ variable }} in an unquoted attribute value: a value with spaces "
                    "would add attributes. Put the value in double quotes.",
                    tag=tag,
                ),
                line,
            )
        for name, value in attrs:
            value = value or ""
            if "{" in name or "}" in name or "%" in name:
                self._refuse(
                    N_(
                        "<%(tag)s> has a {{ variable }} or {%% tag %%} between its attributes; variables "
                        "are allowed only inside quoted attribute values.",
                        tag=tag,
                    ),
                    line,
                )
                continue
            if name == "style":
                self._check_css(value, N_("the style of <%(tag)s>", tag=tag), line)
            elif name == "srcdoc":
                self._refuse(N_("<%(tag)s srcdoc> embeds a second document; it is not allowed.", tag=tag), line)
            elif tag == "meta" and name == "http-equiv" and value.strip().lower() == "refresh":
                self._refuse(
                    N_("<meta http-equiv=refresh> makes the renderer load another page; it is not allowed."), line
                )
            elif name in _URL_ATTRIBUTES and not (name == "href" and tag in _LINK_TAGS):
                if _JINJA.search(value):
                    self._refuse(
                        N_(
                            "<%(tag)s %(name)s> uses a {{ variable }}: recipient data may not choose what "
                            "the renderer loads. Put the variable in the text instead.",
                            tag=tag,
                            name=name,
                        ),
                        line,
                    )
                    continue
                urls = (
                    [part.strip().split(" ")[0] for part in re.split(r",\s+", value)] if name == "srcset" else [value]
                )
                for url in urls:
                    problem = _resource_problem(url)
                    if problem:
                        self._refuse(N_("<%(tag)s %(name)s> %(problem)s", tag=tag, name=name, problem=problem), line)

    def _check_css(self, css: str, where: N_, line: int) -> None:
        if jinja := _JINJA.search(css):
            offset = css[: jinja.start()].count("\n")
            self._refuse(
                N_("%(where)s uses a {{ variable }}: recipient data may not write styles.", where=where), line + offset
            )
            return
        plain = _css_unescape(css)
        found = [(m.start(), m.group(2) if m.group(2) is not None else m.group(4)) for m in _CSS_URL.finditer(plain)]
        found += [(m.start(), m.group(2)) for m in _CSS_STRING_URL.finditer(plain)]
        for start, url in sorted(found):
            problem = _resource_problem(url)
            if problem:
                self._refuse(
                    N_("%(where)s %(problem)s", where=where, problem=problem), line + plain[:start].count("\n")
                )


def unsafe_jinja(ast: nodes.Template) -> TemplateError | None:
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
    problem = unsafe_jinja(ast)
    if problem:
        raise problem
    tag = _JINJA_TAG.search(source)
    if tag:
        raise TemplateError(
            N_("A tag name may not be written by a {{ variable }} or {% tag %}."), source[: tag.start()].count("\n") + 1
        )
    scanner = _SafetyScanner()
    scanner.feed(source)
    scanner.close()
    if scanner.problem:
        raise scanner.problem

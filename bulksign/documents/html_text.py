"""One pass over a filled HTML document's body: whether it closes what it opens, and what its pages may show.
More in docs/architecture/documents.md."""

from __future__ import annotations

import html
import re
from collections import Counter
from dataclasses import dataclass, field

#: Elements without an end tag.
VOID = frozenset(
    "area base basefont bgsound br col embed frame hr image img input keygen link meta param source track wbr".split()
)
#: Formatting elements: popped without their end tag, HTML's parser keeps them in its list of active formatting
#: elements and opens them again at the next text, the next recipient's included.
_FORMATTING = frozenset("a b big code em font i nobr s small strike strong tt u".split())
#: What the frame's ``</div>`` cannot close: a ``<div>`` takes it for its own; the others are scope boundaries,
#: parser modes or foreign content in which a ``</div>`` is ignored.
_ESCAPES = _FORMATTING | frozenset(
    "div table caption colgroup tbody thead tfoot tr td th object applet marquee template form select svg math "
    "frameset frame".split()
)
#: End tags that clear the formatting elements opened inside them (table cells and their kin).
_CLEARS_FORMATTING = frozenset("table caption tbody thead tfoot tr td th object applet marquee template".split())
#: Elements whose text the renderer does not print as text.
_RAW_HIDDEN = frozenset({"style", "script", "iframe", "noembed", "noframes", "title"})
#: Elements whose content is text up to their end tag (no tags inside), printed.
_RAW_SHOWN = frozenset({"textarea", "xmp"})
_FOREIGN = frozenset({"svg", "math"})
_TOKEN = re.compile(
    r"<!--.*?(?:-->|\Z)|<!\[CDATA\[.*?(?:\]\]>|\Z)|<[!?][^>]*>?"
    r"|<(/?)([a-zA-Z][^\s/>]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>",
    re.S,
)
_ATTRIBUTE = re.compile(r"([^\s\"'>/=]+)(?:\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>]+)))?")


@dataclass
class Scanned:
    """What one pass found; ``unbalanced`` names what would escape the frame (None: nothing)."""

    unbalanced: str | None = None
    #: The body's printed text, as one string (blocks separated by spaces).
    text: str = ""
    #: The part of it in table header and footer rows, which the renderer prints again on every page a table spans.
    repeated: str = ""
    #: Every link's address, as the renderer reads it (entities decoded).
    hrefs: set[str] = field(default_factory=set)
    #: How many distinct images the body draws (``<img src>``).
    images: int = 0
    #: Per list, (its tag, its ``type``/``start``/``reversed`` as written, its items' ``value``s or None).
    lists: list[tuple[str, dict[str, str], list[str | None]]] = field(default_factory=list)
    #: The content of the body's own ``<style>`` elements, in order.
    styles: list[str] = field(default_factory=list)
    #: Every attribute's values by name (a style sheet's ``attr(name)`` prints them).
    attributes: Counter = field(default_factory=Counter)


def _attributes(raw: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, double, single, bare in _ATTRIBUTE.findall(raw):
        found.setdefault(name.lower(), html.unescape(double or single or bare or ""))
    return found


def scan(body: str) -> Scanned:
    """Read ``body`` (a document's content after its ``<body>`` tag) once."""
    out = Scanned()
    text: list[str] = []
    repeated: list[str] = []
    stack = _OpenElements()
    images: set[str] = set()
    lists: list[list[str | None]] = []
    position = 0
    length = len(body)
    while position < length:
        token = _TOKEN.search(body, position)
        if token is None:
            text.append(body[position:])
            break
        text.append(body[position : token.start()])
        if stack.has("thead") or stack.has("tfoot"):
            repeated.append(text[-1])
        position = token.end()
        name = token.group(2)
        if name is None:  # a comment, a doctype, a processing instruction
            if token.group(0).startswith("<![CDATA[") and stack and stack[-1] in _FOREIGN:
                text.append(token.group(0)[9:-3])
            continue
        name = name.lower()
        closing = token.group(1) == "/"
        if closing:
            problem = stack.close(name)
            if problem:
                out.unbalanced = out.unbalanced or problem
            if name in ("ol", "ul", "menu", "dir") and lists:
                lists.pop()
            text.append(" ")
            continue
        attributes = _attributes(token.group(3))
        for key, value in attributes.items():
            out.attributes[key, value] += 1
        if name in ("a", "area") and "href" in attributes:
            out.hrefs.add(attributes["href"].strip())
        if name in ("img", "image", "input") and attributes.get("src"):
            images.add(attributes["src"])
        for shown in ("alt", "value", "placeholder"):
            if name in ("img", "input", "button") and shown in attributes:
                text.append(f" {attributes[shown]} ")
        if name in ("ol", "ul", "menu", "dir"):
            items: list[str | None] = []
            lists.append(items)
            out.lists.append(
                (name, {k: attributes[k] for k in ("type", "start", "reversed") if k in attributes}, items)
            )
        elif name == "li" and lists:
            lists[-1].append(attributes.get("value"))
        text.append(" ")
        self_closing = token.group(3).rstrip().endswith("/")
        if name in VOID or (self_closing and stack and stack.in_foreign()):
            continue
        if name == "plaintext":
            out.unbalanced = out.unbalanced or "<plaintext>"
            text.append(body[position:])
            break
        if name in _RAW_HIDDEN or name in _RAW_SHOWN:
            end = re.compile(rf"</{name}\s*>", re.I).search(body, position)
            if end is None:
                out.unbalanced = out.unbalanced or f"<{name}> not closed"
                break
            content = body[position : end.start()]
            if name == "style":
                out.styles.append(content)
            elif name in _RAW_SHOWN:
                text.append(f" {content} ")
            position = end.end()
            continue
        stack.push(name)
    for name in stack.names:
        if name in _ESCAPES:
            out.unbalanced = out.unbalanced or f"<{name}> not closed"
    out.text = html.unescape("".join(text))
    out.repeated = html.unescape(" ".join(repeated))
    out.images = len(images)
    return out


class _OpenElements:
    """The elements open at a point of the body, innermost last, with a count per name so that asking whether one
    is open costs the same however deep the nesting (a template may nest a hundred thousand elements)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._open: Counter[str] = Counter()

    def __bool__(self) -> bool:
        return bool(self.names)

    def __getitem__(self, index: int) -> str:
        return self.names[index]

    def has(self, name: str) -> bool:
        return self._open[name] > 0

    def in_foreign(self) -> bool:
        return any(self._open[name] for name in _FOREIGN)

    def push(self, name: str) -> None:
        self.names.append(name)
        self._open[name] += 1

    def _pop(self) -> str:
        top = self.names.pop()
        self._open[top] -= 1
        return top

    def close(self, name: str) -> str | None:
        """Pop ``name`` as the parser would; what escapes the frame, if anything."""
        if name in ("body", "html"):
            return None
        if not self.has(name):
            # The parser ignores it, but for a </div>: it would close the frame's own.
            return f"</{name}> closes nothing of its own" if name == "div" else None
        while self.names:
            top = self._pop()
            if top == name:
                return None
            if top in _FORMATTING and name not in _CLEARS_FORMATTING:
                return f"<{top}> closed by </{name}>"
        return None

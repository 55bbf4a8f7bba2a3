"""The frame every HTML document is printed in, alone or with other recipients' (``together``).
More in docs/architecture/documents.md."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

#: Marks the frame's own elements and the link that finds each document's first page; a template that names it
#: could reach into the frame, and is never framed with others (``template_problem``).
RESERVED = "bulksign-frame"
#: Where each frame's empty link points (``.invalid`` resolves nowhere); the split takes the links out again.
FIRST_PAGE_URI = "https://bulksign.invalid/first-page"


def _important(declarations: str) -> str:
    return ";".join(f"{d.strip()}!important" for d in declarations.split(";") if d.strip())


#: What a style sheet's positional selectors (``:nth-child``) could set on one frame and not on the next, pinned to
#: what the page's body gives every frame.
_INHERITED = (
    "color:inherit;font-family:inherit;font-size:inherit;font-style:inherit;font-variant:inherit;"
    "font-weight:inherit;line-height:inherit;letter-spacing:inherit;word-spacing:inherit;text-align:inherit;"
    "text-indent:inherit;text-transform:inherit;white-space:inherit;direction:inherit;visibility:inherit;"
    "list-style-type:inherit;list-style-position:inherit;list-style-image:inherit;quotes:inherit;"
    "border-collapse:inherit;border-spacing:inherit;caption-side:inherit;empty-cells:inherit;orphans:inherit;"
    "widows:inherit;word-break:inherit;word-wrap:inherit;-webkit-hyphens:inherit;text-shadow:inherit;"
    "-webkit-writing-mode:inherit;writing-mode:inherit"
)
_BOX = (
    "float:none;clear:none;padding:0;border:0 none;width:auto;height:auto;min-width:0;max-width:none;min-height:0;"
    "max-height:none;box-sizing:content-box;zoom:1;-webkit-column-count:auto;opacity:1;-webkit-filter:none;"
    "background:none;outline:0;box-shadow:none;clip:auto;counter-increment:none;text-decoration:none;"
    "vertical-align:baseline;page-break-before:auto;page-break-after:auto;page-break-inside:auto"
)
#: The body's one child, holding every frame: its top margin is the body's, which each frame takes again.
_RUN = _important(f"display:block;position:static;overflow:visible;margin:0;margin-top:inherit;{_BOX};{_INHERITED}")
#: A recipient's frame: clips; a later one starts on a new page with the body's top margin.
_DOCUMENT = _important(
    f"display:block;position:relative;overflow:hidden;margin:0;margin-top:inherit;{_BOX};"
    f"-webkit-transform:none;transform:none;{_INHERITED}"
)
#: Inside it, what positions everything absolute and fixed of the recipient's body.
_INNER = _important(
    f"display:block;position:relative;overflow:visible;margin:0;{_BOX};counter-reset:none;"
    "-webkit-transform:translate(0,0);transform:translate(0,0)"
)
#: A later recipient's start: a new page, and on it a line of 1/64 px (WebKit's smallest length) that the frame's
#: top margin cannot collapse through to the break (which would drop it); its margin of -1/64 px takes it back.
_BREAK = _important(
    "display:block;position:static;overflow:hidden;visibility:hidden;margin:0 0 -0.015625px 0;"
    f"{_BOX};height:0.015625px;page-break-before:always"
)
_LINK = _important(
    "display:block;position:absolute;left:0;top:0;right:auto;bottom:auto;width:1px;height:1px;margin:0;padding:0;"
    "border:0 none;overflow:hidden;font-size:0;line-height:0;float:none;-webkit-transform:none;transform:none"
)
#: Ahead of the body: a trailing margin or padding of the body would add a blank last page to a recipient printed
#: last or alone, and to no other; the selector outweighs any template's own rule for the body.
_HEAVY = f":not(#{RESERVED}):not(#{RESERVED}-)"
_NO_TRAILING_SPACE = (
    f"<style>html{_HEAVY},html{_HEAVY} body{_HEAVY}"
    "{margin-bottom:0!important;padding-bottom:0!important;border-bottom-width:0!important}</style>"
)

_HEAD_TOKEN = re.compile(
    r"\s+|<!--.*?-->|<![^>]*>|<\?[^>]*>|</(?:html|head)\s*>"
    r"|<(html|head|meta|link|base|basefont|bgsound|title|style|noscript)\b(?:[^>\"']|\"[^\"]*\"|'[^']*')*>",
    re.I | re.S,
)
_BODY_TAG = re.compile(r"<body\b(?:[^>\"']|\"[^\"]*\"|'[^']*')*>", re.I)
_RAW_HEAD = ("title", "style", "noscript")
_ENDS = re.compile(r"</(?:body|html)\s*>", re.I)
_COUNTERS = re.compile(r"counter-(?:reset|increment)\s*:\s*([^;}\"'!]*)|counters?\(\s*([-\w]+)", re.I)
_COUNTER_NAME = re.compile(r"-?[_a-zA-Z][-\w]*")


@dataclass(frozen=True)
class Document:
    """A filled HTML document as the frame takes it: what comes before the body's content (ending with a
    ``<body>`` tag, the template's or ours) and that content, without ``</body>`` and ``</html>``."""

    head: str
    body: str


def split(filled: str) -> Document:
    """``filled`` at the start of its body, as HTML's parser finds it: after a ``<body>`` tag, or else at the first
    thing the head cannot hold (text, or an element of the body)."""
    position = 0
    while True:
        token = _HEAD_TOKEN.match(filled, position)
        if token is None:
            break
        position = token.end()
        raw = (token.group(1) or "").lower()
        if raw in _RAW_HEAD:
            end = re.compile(rf"</{raw}\s*>", re.I).search(filled, position)
            position = end.end() if end else len(filled)
    body_tag = _BODY_TAG.match(filled, position)
    if body_tag:
        return Document(
            filled[: body_tag.start()] + _NO_TRAILING_SPACE + body_tag.group(0), _content(filled, body_tag.end())
        )
    return Document(filled[:position] + _NO_TRAILING_SPACE + "<body>", _content(filled, position))


def _content(filled: str, start: int) -> str:
    return _ENDS.sub("", filled[start:])


def counter_names(css: str) -> list[str]:
    """The CSS counters ``css`` resets, increments or prints (``list-item`` is HTML's own)."""
    names: set[str] = set()
    for listed, used in _COUNTERS.findall(css):
        for name in _COUNTER_NAME.findall(listed) if listed else [used]:
            if name.lower() not in ("none", "inherit", "initial", "list-item"):
                names.add(name)
    return sorted(names)


def framed(head: str, bodies: Sequence[str], *, counters: Sequence[str] = ()) -> str:
    """One HTML document holding ``bodies`` each in a frame, a later one on a new page, after ``head``."""
    reset = f"counter-reset:{' '.join(f'{name} 0' for name in counters)}!important;" if counters else ""
    link = f'<a href="{FIRST_PAGE_URI}" style="{_LINK}"></a>'
    frames = [
        f'<div data-{RESERVED} style="{reset}{_DOCUMENT}">{link}<div data-{RESERVED} style="{_INNER}">{body}</div></div>'
        for body in bodies
    ]
    between = f'<div data-{RESERVED} style="{_BREAK}"></div>'
    return f'{head}<div data-{RESERVED} style="{_RUN}">{between.join(frames)}</div></body></html>'

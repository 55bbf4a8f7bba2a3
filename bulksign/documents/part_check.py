"""Every part of a run checked against its own recipient's HTML before it is stored (``together``).
More in docs/architecture/documents.md."""

from __future__ import annotations

import enum
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from urllib.parse import unquote

from bulksign.core.messages import N_
from bulksign.documents import pdf_fonts
from bulksign.documents.html_text import Scanned

#: Of its own letters and digits, the share a part must show: less, and its text is drawn in a way that cannot be
#: read back (shapes, an effect), so nothing could be checked.
MIN_SHOWN = 0.9
#: How far, in points, a frame may start from where the first one starts.
_TOLERANCE_PT = 0.01
_CONTENT = re.compile(r"content\s*:\s*([^;}]*)", re.I)
_STRING = re.compile(r"\"((?:[^\"\\]|\\.)*)\"|'((?:[^'\\]|\\.)*)'", re.S)
_ATTR = re.compile(r"attr\(\s*([-\w]+)", re.I)
_LIST_STYLE = re.compile(r"list-style(?:-type)?\s*:\s*([-\w\s]+)", re.I)
_URL = re.compile(r"url\(", re.I)
_WORKING_FILE = re.compile(r"^file:///[^#]*?/bulksign-pdf-[^/]*/(?:wktemp-[^/#]*\.html)?")
_OL_TYPES = {"a": "lower-alpha", "A": "upper-alpha", "i": "lower-roman", "I": "upper-roman"}
#: Counter and list styles whose markers are letters, by the letters they use.
_LETTER_STYLES = {
    "roman": "ivxlcdm",
    "alpha": "abcdefghijklmnopqrstuvwxyz",
    "latin": "abcdefghijklmnopqrstuvwxyz",
    "greek": "αβγδεζηθικλμνξοπρστυφχψω",
}


class Problem(enum.Enum):
    """Why a part is not its recipient's document alone; ``message`` says it to staff."""

    START = N_(
        "its documents do not all start at the same place on their first page (a border or padding at the top of "
        "the page's body? use a margin instead)"
    )
    PAGE_SIZE = N_("its pages are not all of one size")
    FOREIGN = N_("a document printed with others showed text, a link or an image that is not its own recipient's")
    UNREADABLE = N_(
        "some of its text is printed in a way that cannot be read back and checked (semi-transparent text, an "
        "effect, an embedded font)"
    )

    @property
    def message(self) -> N_:
        return self.value


@dataclass(frozen=True)
class Shown:
    """What a part's pages hold, read during the split."""

    pdf: bytes
    #: Where its first page's first-page link is (x0, y0, x1, y1, page width, page height).
    start: tuple[float, ...]
    #: Every page's size, as (width, height).
    pages: tuple[tuple[float, float], ...]
    #: Its text layer's letters and digits (``letters``), with their counts.
    characters: Counter
    uris: frozenset[str]
    images: int


@dataclass(frozen=True)
class Sheet:
    """What a run's style sheets (its head's and its bodies') may print, read once for all of its parts."""

    #: Letters and digits printed any number of times (``content`` strings, counters).
    unbounded: frozenset[str]
    #: Attributes whose values ``attr()`` prints.
    printed_attributes: frozenset[str]
    #: List styles set anywhere (``list-style-type``): any list may be numbered so.
    list_styles: frozenset[str]
    images: int

    @classmethod
    def of(cls, css: str) -> Sheet:
        unbounded: set[str] = set()
        printed: set[str] = set()
        for value in _CONTENT.findall(css):
            for double, single in _STRING.findall(value):
                unbounded |= set(letters(double or single))
            printed |= {name.lower() for name in _ATTR.findall(value)}
            if "counter" in value.lower():
                unbounded |= set("0123456789")
                unbounded |= {ch for style, abc in _LETTER_STYLES.items() if style in value.lower() for ch in abc}
        return cls(frozenset(unbounded), frozenset(printed), frozenset(_list_styles(css)), len(_URL.findall(css)))


@dataclass(frozen=True)
class Expected:
    """What a part may show: its own letters and digits with those its style sheet may add."""

    characters: Counter
    #: Those a table prints again on each further page it spans (its header and footer rows).
    repeated: Counter
    #: Letters and digits a style sheet prints any number of times (``content`` strings, counters).
    unbounded: frozenset[str]
    hrefs: frozenset[str]
    images: int

    @classmethod
    def of(cls, scanned: Scanned, sheet: Sheet) -> Expected:
        """From one pass over the body (``html_text.scan``) and the style sheets it is printed with."""
        printed = [scanned.text]
        images = scanned.images + sheet.images
        list_styles = set(sheet.list_styles)
        for (name, value), count in scanned.attributes.items():
            if name in sheet.printed_attributes:
                printed += [value] * count
            if name == "style":
                images += len(_URL.findall(value)) * count
                list_styles |= _list_styles(value)
        printed += _markers(scanned, list_styles)
        return cls(
            characters=letters(" ".join(printed)),
            repeated=letters(scanned.repeated),
            unbounded=sheet.unbounded,
            hrefs=frozenset(_link_key(href) for href in scanned.hrefs),
            images=images,
        )


def letters(text: str) -> Counter:
    """The letters and digits of ``text`` as compared here: compatibility forms folded (ligatures, widths) and case
    folded (``text-transform``)."""
    counted = Counter(unicodedata.normalize("NFKC", text).casefold())
    for ch in [ch for ch in counted if not ch.isalnum()]:
        del counted[ch]
    return counted


def glyph_letters(glyphs: Counter) -> Counter:
    """``letters`` of the text shown glyph by glyph (each glyph's text with how often it is shown)."""
    found: Counter = Counter()
    for text, count in glyphs.items():
        for ch, n in letters(text).items():
            found[ch] += n * count
    return found


def problem(expected: Expected, shown: Shown, *, first: Shown) -> Problem | None:
    """Why the part ``shown`` is not its recipient's document alone, or None; ``first``: the run's first part."""
    if any(abs(a - b) > _TOLERANCE_PT for a, b in zip(shown.start, first.start)):
        return Problem.START
    if any(page != first.pages[0] for page in shown.pages):
        return Problem.PAGE_SIZE
    if not _own_letters(expected, shown):
        return Problem.FOREIGN
    own = sum(expected.characters.values())
    if own and sum((shown.characters & expected.characters).values()) < MIN_SHOWN * own:
        return Problem.UNREADABLE
    if any(_link_key(uri) not in expected.hrefs for uri in shown.uris):
        return Problem.FOREIGN
    if shown.images > expected.images:
        return Problem.FOREIGN
    return None


def _own_letters(expected: Expected, shown: Shown) -> bool:
    """Whether every letter and digit the part shows is its own: no more of one than its HTML holds, with what the
    style sheet adds and a table's header rows on each further page. A line cut off at a page's edge is drawn on
    both pages (a table row that straddles them): when the count is over, the lines outside the printable areas
    are told apart (slower) and may only repeat the part's own letters."""
    further = len(shown.pages) - 1

    def over(found: Counter) -> bool:
        return any(
            count > expected.characters[ch] + further * expected.repeated[ch] and ch not in expected.unbounded
            for ch, count in found.items()
        )

    if not over(shown.characters):
        return True
    inside, outside = (glyph_letters(text) for text in pdf_fonts.placed_text(shown.pdf))
    return not over(inside) and not any(count > expected.characters[ch] for ch, count in outside.items())


def _link_key(uri: str) -> str:
    """A link as compared: the renderer percent-encodes, may add a trailing slash, and makes a relative address
    (``#end``, ``rules.html``) a file's in its working folder."""
    return _WORKING_FILE.sub("", unquote(uri.strip())).rstrip("/").lower()


def _list_styles(css: str) -> set[str]:
    return {style.strip().lower() for found in _LIST_STYLE.findall(css) for style in found.split()}


def _markers(scanned: Scanned, styles: set[str]) -> list[str]:
    """The markers of the body's list items, in every style they may be numbered in."""
    markers = []
    for tag, settings, items in scanned.lists:
        kinds = set(styles)
        if tag == "ol":
            kinds.add(_OL_TYPES.get(settings.get("type", "1"), "decimal"))
        markers += [_marker(number, kind) for number in _numbers(settings, items) for kind in kinds]
    return markers


def _numbers(settings: dict[str, str], items: list[str | None]) -> list[int]:
    """The ordinal of each item of a list, as HTML numbers them (``start``, ``reversed``, an item's ``value``)."""
    reversed_ = "reversed" in settings
    try:
        number = int(settings["start"]) if "start" in settings else (len(items) if reversed_ else 1)
    except ValueError:
        number = 1
    numbers = []
    for value in items:
        if value is not None:
            try:
                number = int(value)
            except ValueError:
                pass
        numbers.append(number)
        number += -1 if reversed_ else 1
    return numbers


def _marker(number: int, kind: str) -> str:
    if "roman" in kind and 0 < number < 4000:
        return _roman(number)
    for style, alphabet in _LETTER_STYLES.items():
        if style in kind and number > 0:
            return _alphabetic(number, alphabet)
    return f"0{number}" if "leading-zero" in kind else str(number)


def _roman(number: int) -> str:
    out = ""
    for value, numeral in zip(
        (1000, 900, 500, 400, 100, 90, 50, 40, 10, 9, 5, 4, 1),
        ("m", "cm", "d", "cd", "c", "xc", "l", "xl", "x", "ix", "v", "iv", "i"),
    ):
        while number >= value:
            out, number = out + numeral, number - value
    return out


def _alphabetic(number: int, alphabet: str) -> str:
    out = ""
    while number > 0:
        number, rest = divmod(number - 1, len(alphabet))
        out = alphabet[rest] + out
    return out

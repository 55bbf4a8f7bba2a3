"""Text the signed PDF and its audit certificate print: each character in the first of our embedded fonts that has a
glyph for it, so a Chinese, Japanese or Korean value prints in its letters rather than as empty boxes.
More in docs/architecture/documents.md."""

from __future__ import annotations

import functools
from xml.sax.saxutils import escape

REGULAR = "DejaVuSans"
BOLD = "DejaVuSans-Bold"
CJK = "WenQuanYiZenHei"
#: Each font by name: its file and, in a collection, which of its fonts.
FONT_FILES = {
    REGULAR: ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", 0),
    BOLD: ("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf", 0),
    CJK: ("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc", 0),
}
#: The fonts a character is looked for in, in order, when text is set in a font (the CJK font has no bold).
FALLBACKS = {REGULAR: (REGULAR, CJK), BOLD: (BOLD, CJK)}


@functools.cache
def register_fonts() -> None:
    """Register our fonts with ReportLab, once per process."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    for name, (path, index) in FONT_FILES.items():
        pdfmetrics.registerFont(TTFont(name, path, subfontIndex=index))


@functools.cache
def _glyphs(font: str) -> frozenset[int]:
    """The code points ``font`` has a glyph for."""
    from reportlab.pdfbase import pdfmetrics

    register_fonts()
    return frozenset(code for code, glyph in pdfmetrics.getFont(font).face.charToGlyph.items() if glyph)


def _font_for(char: str, font: str) -> str | None:
    return next((f for f in FALLBACKS[font] if ord(char) in _glyphs(f)), None)


def unprintable(text: str) -> str:
    """The characters of ``text`` (each once, in order) that none of our fonts can print; "" when all can."""
    return "".join(dict.fromkeys(c for c in text if not c.isspace() and _font_for(c, REGULAR) is None))


def runs(text: str, font: str = REGULAR) -> list[tuple[str, str]]:
    """``text`` cut into (font, part) runs: each character in the first of ``font``'s fallbacks that has it (a space
    in the run before it; a character none has in ``font``)."""
    found: list[tuple[str, str]] = []
    for char in text:
        current = found[-1][0] if found else font
        chosen = current if char.isspace() else _font_for(char, font) or font
        if found and found[-1][0] == chosen:
            found[-1] = (chosen, found[-1][1] + char)
        else:
            found.append((chosen, char))
    return found


def width(text: str, font: str, size: float) -> float:
    """How wide ``text`` prints in ``font`` (with its fallbacks) at ``size``."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    return sum(stringWidth(part, each, size) for each, part in runs(text, font))


def draw(c, x: float, y: float, text: str, font: str, size: float) -> None:
    """``text`` on the canvas ``c`` from (x, y), each run in its font."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    for each, part in runs(text, font):
        c.setFont(each, size)
        c.drawString(x, y, part)
        x += stringWidth(part, each, size)


def fit(text: str, font: str, size: float, room: float) -> str:
    """``text``, cut (…) to ``room`` wide."""
    if width(text, font, size) <= room:
        return text
    while text and width(text + "…", font, size) > room:
        text = text[:-1]
    return text + "…"


def wrap(text: str, font: str, size: float, room: float) -> list[str]:
    """``text`` in lines of at most ``room`` wide where it can break: at spaces, and beside each character only a
    fallback font has (CJK text runs without spaces). A word of our font's letters too long for a line stays whole:
    the caller makes the type smaller or cuts it (``fit``)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        for i, piece in enumerate(_pieces(word, font)):
            joined = f"{line} {piece}" if i == 0 and line else line + piece
            if line and width(joined, font, size) > room:
                lines.append(line)
                joined = piece
            line = joined
    return [*lines, line] if line else lines


def _pieces(word: str, font: str) -> list[str]:
    """``word`` cut where a line may break: before and after each character ``font`` itself has no glyph for."""
    pieces: list[str] = []
    for char in word:
        own = ord(char) in _glyphs(font)
        if own and pieces and ord(pieces[-1][-1]) in _glyphs(font):
            pieces[-1] += char
        else:
            pieces.append(char)
    return pieces


def markup(text: str, font: str = REGULAR) -> str:
    """``text`` as ReportLab paragraph markup set in ``font``: escaped, a run in a fallback font in its own tag."""
    return "".join(
        escape(part) if each == font else f'<font name="{each}">{escape(part)}</font>'
        for each, part in runs(text, font)
    )

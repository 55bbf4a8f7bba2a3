"""Which glyphs a PDF's embedded TrueType fonts print for each character: a character drawn in a font without it
is printed as the font's missing-glyph box (``.notdef``), though its text (``/ToUnicode``) still extracts."""

from __future__ import annotations

import io
import re

from fontTools.ttLib import TTFont
from pypdf import PdfReader


def _fonts(resources):
    """The fonts of a page's resources and of the forms it draws, as references."""
    if not resources:
        return
    resources = resources.get_object()
    yield from (resources.get("/Font") or {}).values()
    for xobject in (resources.get("/XObject") or {}).values():
        yield from _fonts(xobject.get_object().get("/Resources"))


def _to_unicode(font) -> list[tuple[int, int]]:
    """(code, code point) pairs of a font's ``/ToUnicode`` map."""
    text = font["/ToUnicode"].get_object().get_data().decode("latin-1")
    pairs = []
    for block in re.findall(r"beginbfchar(.*?)endbfchar", text, re.S):
        pairs += [(int(a, 16), int(b, 16)) for a, b in re.findall(r"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>", block)]
    for block in re.findall(r"beginbfrange(.*?)endbfrange", text, re.S):
        for a, b, c in re.findall(r"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>", block):
            pairs += [(code, int(c, 16) + code - int(a, 16)) for code in range(int(a, 16), int(b, 16) + 1)]
    return pairs


def printed_glyphs(pdf: bytes) -> dict[str, set[bool]]:
    """Each character the PDF's simple TrueType fonts (ReportLab's) map, with whether the glyph its code draws is a
    real one (True) or the missing-glyph box (False), over every font that maps it."""
    found: dict[str, set[bool]] = {}
    seen = set()
    for page in PdfReader(io.BytesIO(pdf)).pages:
        for ref in _fonts(page.get("/Resources")):
            font = ref.get_object()
            if id(font) in seen or "/ToUnicode" not in font or font.get("/Subtype") != "/TrueType":
                continue
            seen.add(id(font))
            file = font["/FontDescriptor"].get("/FontFile2")
            if file is None:
                continue
            subset = TTFont(io.BytesIO(file.get_object().get_data()))
            cmap = {}
            for table in subset["cmap"].tables:
                cmap.update(table.cmap)
            for code, point in _to_unicode(font):
                glyph = cmap.get(code)
                found.setdefault(chr(point), set()).add(glyph is not None and subset.getGlyphID(glyph) != 0)
    return found

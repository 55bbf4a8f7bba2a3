"""A run's embedded TrueType programs and ``ToUnicode`` maps, each read once for all of the run's parts, and
written again for a part with only the glyphs and codes it shows (``pdf_fonts`` cuts the fonts with them)."""

from __future__ import annotations

import logging
from collections.abc import Set as AbstractSet
from io import BytesIO

from fontTools.ttLib import TTFont
from fontTools.ttLib.tables._g_l_y_f import Glyph
from pypdf.filters import FlateDecode
from pypdf.generic import StreamObject

from bulksign.documents.pdf_objects import Replacement

# What fontTools warns of in every font Qt writes (a creation date of 0, an italic font's flags), on every part.
logging.getLogger("fontTools.ttLib.tables._h_e_a_d").setLevel(logging.ERROR)
logging.getLogger("fontTools.ttLib.tables.O_S_2f_2").setLevel(logging.ERROR)


class RunFonts:
    """The font programs and ToUnicode maps of one run, each read once for all of the run's parts (by its decoded
    bytes: every part's clone of a run's font holds the same), instead of once per part: parsing a program with
    fontTools was half of what cutting a part's fonts cost."""

    def __init__(self) -> None:
        self._programs: dict[tuple[str, bytes], FontProgram] = {}
        self._maps: dict[bytes, dict[int, str]] = {}
        #: A font cut down for a part (``pdf_fonts``), by the font's number and the codes kept: parts that show
        #: the same letters share it.
        self.cuts: dict[tuple[int, frozenset[int]], dict[int, Replacement]] = {}

    def program(self, stream: StreamObject) -> FontProgram:
        # Known by its bytes as stored (compressed, the same in every part's clone): decoding each part's clone
        # only to look it up cost ~0.3 ms of CPU a document of the bench's.
        stored = (str(stream.get("/Filter")), StreamObject.get_data(stream))
        if stored not in self._programs:
            self._programs[stored] = FontProgram(stream.get_data())
        return self._programs[stored]

    def unicode_map(self, cmap: bytes) -> dict[int, str]:
        if cmap not in self._maps:
            self._maps[cmap] = unicode_map(cmap)
        return self._maps[cmap]


class FontProgram:
    """A run's TrueType program, parsed once; ``emptied`` writes it for a part, once for each set of glyphs the
    run's parts keep (the parts of a long contract share most of their letters: the bench's 40 parts of a run kept
    11 sets of glyphs in its two fonts, not 80)."""

    def __init__(self, data: bytes) -> None:
        self._font = TTFont(BytesIO(data), recalcBBoxes=False, recalcTimestamp=False)
        self._order = self._font.getGlyphOrder()
        glyf = self._font["glyf"]
        self._glyphs = dict(glyf.glyphs)
        self._metrics = dict(self._font["hmtx"].metrics)
        self._parts = {  # glyph id → the glyphs it is a composite of
            code: [self._font.getGlyphID(part) for part in self._glyphs[name].getComponentNames(glyf)]
            for code, name in enumerate(self._order)
        }
        self._written: dict[frozenset[int], tuple[bytes, bytes]] = {}
        # A simple font's codes → its glyph ids, through the program's own cmap: (3, 0) has them at 0xF000 + code.
        self._by_code: dict[int, int] = {}
        for table in self._font["cmap"].tables if "cmap" in self._font else ():
            offset = 0xF000 if (table.platformID, table.platEncID) == (3, 0) else 0
            for code, name in table.cmap.items():
                if offset <= code < offset + 256:
                    self._by_code.setdefault(code - offset, self._font.getGlyphID(name))

    def glyphs_of(self, codes: set[int]) -> set[int]:
        """The glyph ids a simple font's one-byte ``codes`` show."""
        return {self._by_code[code] for code in codes if code in self._by_code}

    def emptied(self, codes: AbstractSet[int]) -> tuple[bytes, bytes]:
        """The program with the outline and width of every glyph but ``codes`` (and the parts of theirs that are
        composites) emptied, and the same compressed (``/FlateDecode``); the others' bytes are kept as they are,
        not decoded and encoded again (fontTools' subsetter did that for every kept glyph: most of a part's cost)."""
        kept, todo = set(), [code for code in codes if code < len(self._order)]
        while todo:
            code = todo.pop()
            if code not in kept:
                kept.add(code)
                todo += self._parts[code]
        if frozenset(kept) in self._written:
            return self._written[frozenset(kept)]
        # Every part sets all of them: none keeps what the part before it kept.
        self._font["glyf"].glyphs = {
            name: self._glyphs[name] if code in kept else Glyph() for code, name in enumerate(self._order)
        }
        # A glyph's width alone could tell which letter it was.
        self._font["hmtx"].metrics = {
            name: self._metrics[name] if code in kept else (0, 0) for code, name in enumerate(self._order)
        }
        out = BytesIO()
        self._font.save(out, reorderTables=None)  # tables in the writer's own order: no second pass reorders them
        self._written[frozenset(kept)] = out.getvalue(), FlateDecode.encode(out.getvalue())
        return self._written[frozenset(kept)]


def unicode_map(cmap: bytes) -> dict[int, str]:
    """Code → text of a ``ToUnicode`` CMap's ``bfchar`` and ``bfrange`` entries (as Qt writes them: 2-byte codes)."""
    mapping: dict[int, str] = {}
    text = cmap.decode("latin-1")
    for section in text.split("beginbf")[1:]:
        kind, body = section.split("\n", 1)[0], section.split("\n", 1)[1].split("endbf")[0]
        tokens = _tokens(body)
        if kind.endswith("char"):
            for i in range(0, len(tokens) - 1, 2):
                mapping[int(tokens[i], 16)] = bytes.fromhex(tokens[i + 1]).decode("utf-16-be")
        else:
            i = 0
            while i < len(tokens):
                first, last, target = int(tokens[i], 16), int(tokens[i + 1], 16), tokens[i + 2]
                if isinstance(target, list):
                    for offset, value in enumerate(target):
                        mapping[first + offset] = bytes.fromhex(value).decode("utf-16-be")
                else:
                    start = int(target, 16)
                    for offset in range(last - first + 1):
                        mapping[first + offset] = chr(start + offset)
                i += 3
    return mapping


def _tokens(body: str) -> list:
    """The ``<hex>`` tokens of a CMap section, ``[ … ]`` arrays as lists."""
    tokens: list = []
    stack = [tokens]
    i = 0
    while i < len(body):
        char = body[i]
        if char == "<":
            end = body.index(">", i)
            stack[-1].append(body[i + 1 : end])
            i = end + 1
        elif char == "[":
            stack[-1].append([])
            stack.append(stack[-1][-1])
            i += 1
        elif char == "]":
            stack.pop()
            i += 1
        else:
            i += 1
    return tokens


def cmap(mapping: dict[int, str], *, code_bytes: int = 2) -> bytes:
    entries = sorted(mapping.items())
    lines = [
        "/CIDInit /ProcSet findresource begin",
        "12 dict begin",
        "begincmap",
        "/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def",
        "/CMapName /Adobe-Identity-UCS def",
        "/CMapType 2 def",
        "1 begincodespacerange",
        "<00> <FF>" if code_bytes == 1 else "<0000> <FFFF>",
        "endcodespacerange",
    ]
    for start in range(0, len(entries), 100):  # at most 100 entries a section
        chunk = entries[start : start + 100]
        lines.append(f"{len(chunk)} beginbfchar")
        lines += [f"<{code:0{2 * code_bytes}X}> <{text.encode('utf-16-be').hex().upper()}>" for code, text in chunk]
        lines.append("endbfchar")
    lines += ["endcmap", "CMapName currentdict /CMap defineresource pop", "end", "end", ""]
    return "\n".join(lines).encode("ascii")

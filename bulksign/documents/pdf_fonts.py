"""A part of a wkhtmltopdf run keeps of each font only the glyphs its own pages show (``together``).

Qt embeds one subset of each font per run: a TrueType font (``/FontFile2``) under a ``/Type0`` font with
``/Identity-H`` codes, whose glyphs it numbers in the order the run first uses them, with a ``/ToUnicode`` map,
widths (``/W``) and a ``/CIDSet`` for every glyph of the run. Split off, a recipient's part would carry the other
recipients' letters in them (not their text, but which letters they used). Here each font of a part is cut down
to the codes its pages show: the outlines and widths of the other glyphs emptied (fontTools, glyph numbers kept, so
the pages' codes stay as they are), the map and widths listed for its own codes only, the ``/CIDSet`` dropped (it is
optional, and it would list them all).
"""

from __future__ import annotations

import logging
import re
import struct
from io import BytesIO

from fontTools.ttLib import TTFont
from fontTools.ttLib.tables._g_l_y_f import Glyph
from pypdf import PdfWriter
from pypdf.filters import FlateDecode
from pypdf.generic import ArrayObject, EncodedStreamObject, NameObject, NumberObject, StreamObject

# What fontTools warns of in every font Qt writes (a creation date of 0, an italic font's flags), on every part.
logging.getLogger("fontTools.ttLib.tables._h_e_a_d").setLevel(logging.ERROR)
logging.getLogger("fontTools.ttLib.tables.O_S_2f_2").setLevel(logging.ERROR)


#: What a part's pages are cloned without (``PdfWriter.add_page``'s ``excluded_keys``, at every depth): a font's
#: ``/CIDSet`` lists every glyph of the run, and deleted from a clone it stayed in the part, unused but written.
NOT_CLONED = ("/CIDSet",)


class FontError(RuntimeError):
    """A font of the run is not one this module knows how to cut down (the caller renders each alone)."""


class RunFonts:
    """The font programs and ToUnicode maps of one run, each read once for all of the run's parts (by its decoded
    bytes: every part's clone of a run's font holds the same), instead of once per part: parsing a program with
    fontTools was half of what cutting a part's fonts cost (issue 32)."""

    def __init__(self) -> None:
        self._programs: dict[tuple[str, bytes], _Program] = {}
        self._maps: dict[bytes, dict[int, str]] = {}

    def program(self, stream: StreamObject) -> _Program:
        # Known by its bytes as stored (compressed, the same in every part's clone): decoding each part's clone
        # only to look it up cost ~0.3 ms of CPU a document of the bench's.
        stored = (str(stream.get("/Filter")), StreamObject.get_data(stream))
        if stored not in self._programs:
            self._programs[stored] = _Program(stream.get_data())
        return self._programs[stored]

    def unicode_map(self, cmap: bytes) -> dict[int, str]:
        if cmap not in self._maps:
            self._maps[cmap] = unicode_map(cmap)
        return self._maps[cmap]


def keep_own_glyphs(writer: PdfWriter, *, run: RunFonts) -> list[bytes | None]:
    """Cut every font of ``writer``'s pages (added without ``NOT_CLONED``) down to the glyphs those pages show
    (``run``: the parsed fonts of the run ``writer``'s pages come from); FontError for a font, or a page, of another
    make than Qt's (then nothing is promised about it). Returns each page's content without its text objects
    (``_read``), None for a page whose text objects are not all Qt's plain ones: read here anyway, it spares the
    search for marks (``signature_box``) PDFium's reading of every glyph."""
    used: dict[int, tuple[object, set[int]]] = {}  # font object's id → (font, codes shown)
    without_text: list[bytes | None] = []
    for page in writer.pages:
        resources = page.get("/Resources", {})
        if any(x.get_object().get("/Subtype") == "/Form" for x in resources.get("/XObject", {}).values()):
            raise FontError("a page draws a form XObject, whose text is not read here")
        fonts = {str(name)[1:]: font.get_object() for name, font in resources.get("/Font", {}).items()}
        for font in fonts.values():  # a font the page lists but shows nothing in keeps nothing
            used.setdefault(id(font), (font, set()))
        shown, page_without_text = _read(page.get_contents().get_data())
        without_text.append(page_without_text)
        for name, codes in shown.items():
            if name not in fonts:
                raise FontError(f"a page uses the font {name} that its resources do not list")
            used[id(fonts[name])][1].update(codes)
    for font, codes in used.values():
        _cut(font, codes | {0}, run=run)
    return without_text


#: Qt's text objects: a line ``BT``, a ``Tf``, positions (``Tm``, ``Td``) and one ``<hex> Tj`` per glyph, a line
#: ``ET``. Read with plain splits and two expressions instead of pypdf's content parser, which took ~150 ms a part; a
#: text object begun or ended otherwise, a ``Tj`` outside one, a literal string, ``TJ`` or a quote in one is not Qt's
#: and refuses the run. An inline image could hold any bytes: refused too.
_TEXT_BEGIN, _TEXT_END = b"\nBT\n", b"\nET\n"
_FONT = re.compile(rb"/([^\s/<>\[\]()]+)\s+[-+\d.]+\s+Tf")
_GLYPHS = re.compile(rb"<([0-9A-Fa-f]*)>\s*Tj")
#: Bytes Qt never writes in a text object (a literal string, ``TJ``, the quote operators): plain searches, stricter
#: than the operators' grammar and ten times faster than an expression for it. Searched for in the text objects
#: that are not plain (below) only: a plain one holds none of them.
_NOT_QT = (b"(", b"TJ", b"'", b'"')
#: Looked for around the text objects and in those that are not plain (a plain one cannot hold it): searching the
#: whole page, glyphs included, cost a tenth of reading it.
_INLINE_IMAGE = re.compile(rb"(?<![^\s])BI(?![^\s])")
#: A text object as Qt writes plain text: its font and matrix on its first line, then one glyph a line. It sets
#: nothing but the text state (no colour, no graphics state, no drawing), so a page's drawings, their places and
#: their colours, are the same without it: such objects are left out of ``_read``'s page without text.
#: An operand of digits and signs is a number (or nothing PDFium reads), never an operator: checked no closer.
_NUMBER = rb"[-+.0-9]+"
_PLAIN_START = re.compile(rb"/([^\s/<>\[\]()]+) " + _NUMBER + rb" Tf(?: " + _NUMBER + rb"){6} Tm")
_PLAIN_GLYPH = re.compile(rb"\n" + _NUMBER + rb" " + _NUMBER + rb" Td <([0-9A-Fa-f]*)> Tj(?![^\n])")


def _shown(content: bytes) -> dict[str, set[int]]:
    """Font resource name → the 2-byte codes a page's content stream shows in it."""
    return _read(content)[0]


def _read(content: bytes) -> tuple[dict[str, set[int]], bytes | None]:
    """``_shown``, and the content without its text objects where all are Qt's plain ones (else None)."""
    strings: dict[bytes, set[bytes]] = {}  # font → the distinct hex strings shown in it, decoded once at the end
    before, *objects = content.split(_TEXT_BEGIN)
    if b"Tj" in before:
        raise FontError("a glyph shown outside a text object")
    if _inline_image(before):
        raise FontError("a page holds an inline image")
    kept: list[bytes] | None = [before]  # what is around the text objects
    for text in objects:
        body, ended, after = text.partition(_TEXT_END)
        if not ended or b"Tj" in after:
            raise FontError("a text object not ended as Qt ends it, or a glyph shown outside one")
        if _inline_image(after):
            raise FontError("a page holds an inline image")
        start = _PLAIN_START.match(body)
        if start and (start.end() == len(body) or body[start.end() : start.end() + 1] == b"\n"):
            glyphs = _PLAIN_GLYPH.findall(body, start.end())
            if len(glyphs) == body.count(b"\n"):  # every line after the first is one glyph's, and nothing else
                strings.setdefault(start.group(1), set()).update(glyphs)
                if kept is not None:
                    kept.append(after)
                continue
        kept = None
        if _inline_image(body):
            raise FontError("a page holds an inline image")
        if any(marker in body for marker in _NOT_QT):
            raise FontError("a text object shows text as Qt does not write it")
        # [before the first Tf, font, what it shows, font, what it shows …]
        pieces = _FONT.split(body)
        if b"Tj" in pieces[0]:
            raise FontError("a glyph shown before its font")
        for name, run in zip(pieces[1::2], pieces[2::2]):
            strings.setdefault(name, set()).update(_GLYPHS.findall(run))
    shown: dict[str, set[int]] = {}
    for name, found in strings.items():
        if any(len(glyphs) % 4 for glyphs in found):
            raise FontError("a glyph code not of 2 bytes")
        raw = bytes.fromhex(b"".join(found).decode("ascii"))
        shown.setdefault(name.decode("latin-1"), set()).update(struct.unpack(f">{len(raw) // 2}H", raw))
    return shown, None if kept is None else b"\n".join(kept)


def _inline_image(content: bytes) -> bool:
    return b"BI" in content and _INLINE_IMAGE.search(content) is not None


def _cut(font, codes: set[int], *, run: RunFonts) -> None:
    if font.get("/Subtype") != "/Type0" or font.get("/Encoding") != "/Identity-H":
        raise FontError(f"font {font.get('/BaseFont')} is not an Identity-H Type0 font")
    cid_font = font["/DescendantFonts"][0].get_object()
    if cid_font.get("/CIDToGIDMap", "/Identity") != "/Identity" or "/FontFile2" not in cid_font["/FontDescriptor"]:
        raise FontError(f"font {font.get('/BaseFont')} is not an embedded TrueType font with identical glyph ids")
    descriptor = cid_font["/FontDescriptor"].get_object()
    program = descriptor["/FontFile2"].get_object()
    data, compressed = run.program(program).emptied(codes)
    if isinstance(program, EncodedStreamObject) and program.get("/Filter") == "/FlateDecode":
        # The bytes as written, compressed once for each set of glyphs the run's parts keep: ``set_data``
        # compressed the program again for every part (~0.7 ms of CPU a document of the bench's, issue 32).
        StreamObject.set_data(program, compressed)
        program.decoded_self = None
    else:
        program.set_data(data)
    program[NameObject("/Length1")] = NumberObject(len(data))
    widths = _widths(cid_font.get("/W", ArrayObject()))
    cid_font[NameObject("/W")] = ArrayObject(
        item
        for code in sorted(codes)
        if code in widths
        for item in (NumberObject(code), ArrayObject([NumberObject(widths[code])]))
    )
    if "/ToUnicode" in font:
        stream = font["/ToUnicode"].get_object()
        unicode = run.unicode_map(stream.get_data())
        stream.set_data(_cmap({code: unicode[code] for code in sorted(codes) if code in unicode}))


class _Program:
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

    def emptied(self, codes: set[int]) -> tuple[bytes, bytes]:
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
        self._font.save(out)
        self._written[frozenset(kept)] = out.getvalue(), FlateDecode.encode(out.getvalue())
        return self._written[frozenset(kept)]


def _widths(array) -> dict[int, int | float]:
    """``/W``'s widths by code: ``c [w1 w2 …]`` and ``c_first c_last w`` runs."""
    widths: dict[int, int | float] = {}
    items = [item.get_object() for item in array]
    i = 0
    while i < len(items):
        first = int(items[i])
        if isinstance(items[i + 1], list):
            for offset, width in enumerate(items[i + 1]):
                widths[first + offset] = width
            i += 2
        else:
            for code in range(first, int(items[i + 1]) + 1):
                widths[code] = items[i + 2]
            i += 3
    return widths


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


def _cmap(mapping: dict[int, str]) -> bytes:
    entries = sorted(mapping.items())
    lines = [
        "/CIDInit /ProcSet findresource begin",
        "12 dict begin",
        "begincmap",
        "/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def",
        "/CMapName /Adobe-Identity-UCS def",
        "/CMapType 2 def",
        "1 begincodespacerange",
        "<0000> <FFFF>",
        "endcodespacerange",
    ]
    for start in range(0, len(entries), 100):  # at most 100 entries a section
        chunk = entries[start : start + 100]
        lines.append(f"{len(chunk)} beginbfchar")
        lines += [f"<{code:04X}> <{text.encode('utf-16-be').hex().upper()}>" for code, text in chunk]
        lines.append("endbfchar")
    lines += ["endcmap", "CMapName currentdict /CMap defineresource pop", "end", "end", ""]
    return "\n".join(lines).encode("ascii")

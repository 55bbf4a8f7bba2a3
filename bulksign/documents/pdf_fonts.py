"""A part of a wkhtmltopdf run keeps of each font only the glyphs its own pages show (``together``).
More in docs/architecture/documents.md."""

from __future__ import annotations

import re
import struct
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from io import BytesIO
from typing import cast

from pypdf import PageObject, PdfReader
from pypdf.filters import decode_stream_data
from pypdf.generic import (
    ArrayObject,
    DecodedStreamObject,
    DictionaryObject,
    EncodedStreamObject,
    IndirectObject,
    NameObject,
    NumberObject,
    StreamObject,
)

from bulksign.core.errors import BulksignError
from bulksign.documents import font_programs
from bulksign.documents.font_programs import RunFonts
from bulksign.documents.pdf_objects import Replacement


class FontError(BulksignError):
    """A font of the run is not one this module knows how to cut down (the caller renders each alone)."""


@dataclass(frozen=True)
class Kept:
    """A part's fonts cut down, and what cutting them read of its pages on the way."""

    #: The run's font objects the part writes in their place (``pdf_objects``), by number.
    objects: dict[int, Replacement]
    #: Each page's content without its text objects (``_read``), None for a page whose text objects are not all
    #: Qt's plain ones: read here anyway, it spares the search for marks (``signature_box``) PDFium's reading of
    #: every glyph.
    without_text: list[bytes | None]
    #: The text the pages show, glyph by glyph (each glyph's ``ToUnicode`` text, with how often it is shown).
    text: Counter


def keep_own_glyphs(pages: Sequence[PageObject], *, run: RunFonts, seen: TextObjects) -> Kept:
    """Every font of the run's ``pages`` cut down to the glyphs those pages show (``run``: the parsed fonts of their
    run, ``seen``: the text objects read in it so far); FontError for a font, or a page, of another make than Qt's
    (then nothing is promised about it)."""
    used: dict[int, set[int]] = {}  # font object's number → codes shown
    fonts_by_number: dict[int, IndirectObject] = {}
    without_text: list[bytes | None] = []
    text: Counter = Counter()
    for page in pages:
        resources = page.get("/Resources", {})
        if any(x.get_object().get("/Subtype") == "/Form" for x in resources.get("/XObject", {}).values()):
            raise FontError("a page draws a form XObject, whose text is not read here")
        fonts = {str(name)[1:]: font for name, font in resources.get("/Font", {}).items()}
        if not all(isinstance(font, IndirectObject) for font in fonts.values()):
            raise FontError("a page's font is not an object of its own")
        for font in fonts.values():  # a font the page lists but shows nothing in keeps nothing
            used.setdefault(font.idnum, set())
            fonts_by_number[font.idnum] = font
        contents = page["/Contents"] if "/Contents" in page else None
        if not isinstance(contents, StreamObject):
            raise FontError("a page's content is not one stream")
        # Decoded here, not through the stream (which would keep the decoded bytes as long as the run's reader).
        read = _read(decode_stream_data(contents), seen=seen)
        without_text.append(read.without_text)
        for name, codes in read.shown.items():
            if name not in fonts:
                raise FontError(f"a page uses the font {name} that its resources do not list")
            used[fonts[name].idnum].update(codes)
            _add_text(text, fonts[name].get_object(), codes, run=run)
    objects: dict[int, Replacement] = {}
    for number, font_codes in used.items():
        objects.update(_cut(fonts_by_number[number], frozenset(font_codes | {0}), run=run))
    return Kept(objects, without_text, text)


def placed_text(pdf: bytes) -> tuple[Counter, Counter]:
    """The text a PDF of Qt's shows inside its pages' printable areas and outside them (``Read.clipped``), glyph by
    glyph as in ``Kept.text``: slower than cutting the fonts, for when it matters."""
    inside: Counter = Counter()
    outside: Counter = Counter()
    run = RunFonts()
    for page in PdfReader(BytesIO(pdf)).pages:
        resources = cast(DictionaryObject, page["/Resources"])
        fonts = {str(name)[1:]: font.get_object() for name, font in resources.get("/Font", {}).items()}
        contents = page.get_contents()
        assert contents is not None  # a page Qt printed has its content stream
        read = _read(contents.get_data(), placed=True)
        for shown, into in ((read.shown, inside), (read.clipped, outside)):
            for name, codes in shown.items():
                _add_text(into, fonts[name], codes, run=run)
    return inside, outside


def _add_text(into: Counter, font, codes: Counter, *, run: RunFonts) -> None:
    unicode = font.get("/ToUnicode")
    mapping = run.unicode_map(unicode.get_object().get_data()) if unicode is not None else {}
    for code, count in codes.items():
        into[mapping.get(code, "\ufffd")] += count


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


#: A page's printable area, the first clip Qt sets on it: ``0 0 m w 0 l w h l 0 h l 0 0 l h W* n``.
_PAGE_CLIP = re.compile(
    rb"\n0 0 m\n"
    + _NUMBER
    + rb" 0 l\n"
    + _NUMBER
    + rb" ("
    + _NUMBER
    + rb") l\n0 "
    + _NUMBER
    + rb" l\n0 0 l\nh\nW\* n\n"
)
#: Qt's text matrix: text space with its y axis down, as the page's.
_FLIPPED = b" 1 0 0 -1 0 0 Tm"


@dataclass(frozen=True)
class Read:
    """What one page's content stream shows (font resource name → each code shown, with how often), inside its
    printable area and outside it (``Kept.clipped``), and the stream without its text objects where all are Qt's
    plain ones (else None)."""

    shown: dict[str, Counter]
    clipped: dict[str, Counter]
    without_text: bytes | None


def _shown(content: bytes) -> dict[str, Counter]:
    """Font resource name → the 2-byte codes a page's content stream shows in it, each with how often."""
    read = _read(content)
    shown = {name: Counter(codes) for name, codes in read.shown.items()}
    for name, codes in read.clipped.items():
        shown.setdefault(name, Counter()).update(codes)
    return shown


@dataclass(frozen=True)
class TextObject:
    """One text object of a page's content and what follows it up to the next one, read (``_read``). It depends on
    its bytes alone, so a run reads each distinct one once (``TextObjects``): its documents share most of their
    lines, at the same places (the bench's run of 40 three-page contracts: 3,560 text objects, 363 distinct)."""

    #: (font resource name, the hex strings shown in it), in order.
    shown: tuple[tuple[bytes, tuple[bytes, ...]], ...]
    #: What follows the text object, up to the next one.
    after: bytes
    #: A plain one's first line (font and matrix) and the start of the next (its first glyph's place), for
    #: ``_outside``; None for a text object that is not plain.
    opening: tuple[bytes, bytes] | None


class TextObjects:
    """The text objects of a run's pages read so far, by their bytes (``TextObject``), until they hold
    ``max_bytes`` of them (about 2.3 times that in memory): past that, a new one is read and not kept. A run's first
    documents fill it, and the later ones find their shared lines there; a run of long documents whose lines are
    all their own cannot hold its whole text in memory (the bench's run of 40 contracts kept 1.8 MB)."""

    def __init__(self, *, max_bytes: int = 8 << 20) -> None:
        self._read: dict[bytes, TextObject] = {}
        self._left = max_bytes

    def __len__(self) -> int:
        return len(self._read)

    def read(self, text: bytes) -> TextObject:
        found = self._read.get(text)
        if found is None:
            found = _text_object(text)
            if len(text) <= self._left:
                self._read[text] = found
                self._left -= len(text)
        return found


def _read(content: bytes, *, placed: bool = False, seen: TextObjects | None = None) -> Read:
    """A page's content stream, read (``Read``); ``placed``: each line's place looked at too, to tell the lines
    outside the printable area (``Read.clipped``), else none is; ``seen``: the text objects its run read so far."""
    strings: dict[bytes, list[bytes]] = {}  # font → the hex strings shown in it, counted and decoded once at the end
    outside: dict[bytes, list[bytes]] = {}  # the same, of lines outside the printable area
    clip = _PAGE_CLIP.search(content) if placed else None
    height = float(clip.group(1)) if clip else None
    before, *objects = content.split(_TEXT_BEGIN)
    if b"Tj" in before:
        raise FontError("a glyph shown outside a text object")
    if _inline_image(before):
        raise FontError("a page holds an inline image")
    kept: list[bytes] | None = [before]  # what is around the text objects
    previous = before
    for text in objects:
        read = seen.read(text) if seen is not None else _text_object(text)
        into = strings
        if read.opening is None:
            kept = None
        else:
            if height is not None and _outside(previous, *read.opening, height):
                into = outside
            if kept is not None:
                kept.append(read.after)
        for name, glyphs in read.shown:
            into.setdefault(name, []).extend(glyphs)
        previous = read.after
    return Read(_codes(strings), _codes(outside), None if kept is None else b"\n".join(kept))


def _text_object(text: bytes) -> TextObject:
    """A text object (what follows ``BT``) and what follows it up to the next one, read; FontError where it is not
    as Qt writes it."""
    body, ended, after = text.partition(_TEXT_END)
    if not ended or b"Tj" in after:
        raise FontError("a text object not ended as Qt ends it, or a glyph shown outside one")
    if _inline_image(after):
        raise FontError("a page holds an inline image")
    start = _PLAIN_START.match(body)
    if start and (start.end() == len(body) or body[start.end() : start.end() + 1] == b"\n"):
        glyphs = _PLAIN_GLYPH.findall(body, start.end())
        if len(glyphs) == body.count(b"\n"):  # every line after the first is one glyph's, and nothing else
            opening = (body[: start.end()], body[start.end() + 1 : start.end() + 64])
            return TextObject(((start.group(1), tuple(glyphs)),), after, opening)
    if _inline_image(body):
        raise FontError("a page holds an inline image")
    if any(marker in body for marker in _NOT_QT):
        raise FontError("a text object shows text as Qt does not write it")
    # [before the first Tf, font, what it shows, font, what it shows …]
    pieces = _FONT.split(body)
    if b"Tj" in pieces[0]:
        raise FontError("a glyph shown before its font")
    shown = tuple((name, tuple(_GLYPHS.findall(run))) for name, run in zip(pieces[1::2], pieces[2::2]))
    return TextObject(shown, after, None)


def _outside(previous: bytes, first_line: bytes, next_line: bytes, height: float) -> bool:
    """Whether a plain text object's line lies outside its page's printable area (0 to ``height`` down the page):
    its first glyph's place (``Td``, at the start of ``next_line``) through Qt's text matrix (``first_line``) and
    the last ``cm`` before it, which Qt sets for each thing it draws. Anything else, or in doubt: inside."""
    at = previous.rfind(b" cm\n")
    if previous.endswith(b" cm"):  # just before the text object: its line's end went with the split
        at = len(previous) - 3
    if at < 0 or not first_line.endswith(_FLIPPED):
        return False
    matrix = previous[previous.rfind(b"\n", 0, at) + 1 : at].split()
    glyph = next_line.split(b" ", 2)
    if len(matrix) != 6 or matrix[1] != b"0" or matrix[2] != b"0" or len(glyph) < 3:
        return False
    try:
        baseline = float(matrix[3]) * -float(glyph[1]) + float(matrix[5])
    except ValueError:
        return False
    return not 0 <= baseline <= height


def _codes(strings: dict[bytes, list[bytes]]) -> dict[str, Counter]:
    """Hex strings by font → 2-byte codes by font name, with their counts."""
    shown: dict[str, Counter] = {}
    for name, listed in strings.items():
        found = Counter(listed)
        if any(len(glyphs) % 4 for glyphs in found):
            raise FontError("a glyph code not of 2 bytes")
        codes = shown.setdefault(name.decode("latin-1"), Counter())
        for glyphs, count in found.items():
            if len(glyphs) == 4:  # one glyph: Qt's plain text objects show one a line
                codes[int(glyphs, 16)] += count
                continue
            raw = bytes.fromhex(glyphs.decode("ascii"))
            for code in struct.unpack(f">{len(raw) // 2}H", raw):
                codes[code] += count
    return shown


def _inline_image(content: bytes) -> bool:
    return b"BI" in content and _INLINE_IMAGE.search(content) is not None


def _cut(font: IndirectObject, codes: frozenset[int], *, run: RunFonts) -> dict[int, Replacement]:
    """A Type0 font of Qt's cut down to ``codes``: its CID font's widths, its descriptor (without the run's
    ``/CIDSet``), its program and its ``ToUnicode`` map written again for the part, once for each set of codes."""
    key = (font.idnum, codes)
    if key in run.cuts:
        return run.cuts[key]
    type0 = cast(DictionaryObject, font.get_object())
    name = type0.get("/BaseFont")
    if type0.get("/Subtype") != "/Type0" or type0.get("/Encoding") != "/Identity-H":
        raise FontError(f"font {name} is not an Identity-H Type0 font")
    descendants = cast(ArrayObject, type0.get("/DescendantFonts", ArrayObject()))
    cid_ref = descendants[0] if len(descendants) == 1 else None
    cid_font = _object(cid_ref, name)
    descriptor_ref = cid_font.raw_get("/FontDescriptor")
    descriptor = _object(descriptor_ref, name)
    program_ref, unicode_ref = descriptor.raw_get("/FontFile2"), type0.raw_get("/ToUnicode")
    program, unicode_stream = _object(program_ref, name), _object(unicode_ref, name)
    if cid_font.get("/CIDToGIDMap", "/Identity") != "/Identity":
        raise FontError(f"font {name} does not show glyphs by their own ids")
    if program.get("/Filter") not in (None, "/FlateDecode") or "/DecodeParms" in program:
        raise FontError(f"font {name}'s program is not stored as Qt stores it")
    data, compressed = run.program(cast(StreamObject, program)).emptied(codes)
    widths = _widths(cid_font.get("/W", ArrayObject()))
    unicode = run.unicode_map(cast(StreamObject, unicode_stream).get_data())
    cut = {
        cast(IndirectObject, program_ref).idnum: _stream(
            program, compressed if "/Filter" in program else data, {NameObject("/Length1"): NumberObject(len(data))}
        ),
        cast(IndirectObject, cid_ref).idnum: _with(
            cid_font,
            {
                NameObject("/W"): ArrayObject(
                    item
                    for code in sorted(codes)
                    if code in widths
                    for item in (NumberObject(code), ArrayObject([NumberObject(widths[code])]))
                )
            },
        ),
        cast(IndirectObject, descriptor_ref).idnum: _with(descriptor, {}, without="/CIDSet"),
        cast(IndirectObject, unicode_ref).idnum: _stream(
            DictionaryObject(),
            font_programs.cmap({code: unicode[code] for code in sorted(codes) if code in unicode}),
            {},
        ),
    }
    run.cuts[key] = {number: Replacement.of(obj) for number, obj in cut.items()}
    return run.cuts[key]


def _object(reference: object, font: object) -> DictionaryObject:
    """The dictionary (or stream) ``reference`` names, where it is an object of its own as Qt writes it."""
    target = reference.get_object() if isinstance(reference, IndirectObject) else None
    if not isinstance(target, DictionaryObject):
        raise FontError(f"font {font} is not an embedded TrueType font as Qt writes it")
    return target


def _with(original: DictionaryObject, entries: dict, *, without: str = "") -> DictionaryObject:
    """A copy of ``original`` with ``entries`` set and ``without`` left out."""
    copy = DictionaryObject({key: value for key, value in original.items() if key != without})
    copy.update(entries)
    return copy


def _stream(original: DictionaryObject, data: bytes, entries: dict) -> DecodedStreamObject:
    """A stream of ``data`` as stored (its length set on writing) with ``original``'s entries and ``entries``."""
    stream = DecodedStreamObject()
    stream.update({key: value for key, value in original.items() if key != "/Length"})
    stream.update(entries)
    stream.set_data(data)
    return stream


def _set_program(program: StreamObject, data: bytes, compressed: bytes) -> None:
    if isinstance(program, EncodedStreamObject) and program.get("/Filter") == "/FlateDecode":
        # The bytes as written, compressed once for each set of glyphs the run's parts keep: ``set_data``
        # compressed the program again for every part (~0.7 ms of CPU a document of the bench's).
        StreamObject.set_data(program, compressed)
        program.decoded_self = None
    else:
        program.set_data(data)
    program[NameObject("/Length1")] = NumberObject(len(data))


def cut_simple_font(font, codes: set[int], *, run: RunFonts) -> None:
    """A simple (one-byte) font of LibreOffice's cut down to ``codes``: the other glyphs, widths and ToUnicode entries
    emptied; FontError for any other kind of font."""
    descriptor = font.get("/FontDescriptor")
    descriptor = descriptor.get_object() if descriptor is not None else {}
    if font.get("/Subtype") not in ("/TrueType", "/Type1") or "/FontFile" in descriptor or "/FontFile3" in descriptor:
        raise FontError(f"font {font.get('/BaseFont')} is not a simple TrueType font")
    if "/FontFile2" in descriptor:
        program = descriptor["/FontFile2"].get_object()
        parsed = run.program(program)
        _set_program(program, *parsed.emptied(parsed.glyphs_of(codes) | {0}))
    if "/Widths" in font:
        first = int(font.get("/FirstChar", 0))
        widths = font["/Widths"].get_object()
        font[NameObject("/Widths")] = ArrayObject(
            width if first + offset in codes else NumberObject(0) for offset, width in enumerate(widths)
        )
    if "/ToUnicode" in font:
        stream = font["/ToUnicode"].get_object()
        unicode = run.unicode_map(stream.get_data())
        stream.set_data(
            font_programs.cmap({code: unicode[code] for code in sorted(codes) if code in unicode}, code_bytes=1)
        )


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

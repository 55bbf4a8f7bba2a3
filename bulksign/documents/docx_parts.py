"""A LibreOffice run of several Word copies cut into one PDF per copy, at the pages its named destinations mark.
More in docs/architecture/documents.md."""

from __future__ import annotations

import re
from dataclasses import dataclass
from io import BytesIO
from typing import cast

from pypdf import PdfReader, PdfWriter
from pypdf.generic import ArrayObject, BooleanObject, DictionaryObject, NameObject, TextStringObject

from bulksign.core.errors import BulksignError
from bulksign.documents import font_programs, pdf_fonts

#: The bookmark ``doc_templates.docx_copies`` puts at each copy's start: this and the copy's index (letters and
#: digits: LibreOffice writes them as they are in the destination's name).
FIRST_PAGE = "bulksignFirstPageOfCopy"
#: Document properties each part takes from its own copy rather than from the run.
OWN_PROPERTIES = ("/Title", "/Author", "/Subject")
#: Keys a part's clone leaves out, at any depth: a font's lists of the run's glyphs.
_NOT_CLONED = ("/CIDSet", "/CharSet")
_NAME = re.compile(rb"/([^\s/<>\[\]()%{}]+)")
_TEXT_OBJECT = re.compile(rb"(?<![^\s])BT(?![^\s])(.*?)(?<![^\s])ET(?![^\s])", re.S)
_SHOWN = re.compile(rb"/([^\s/<>\[\]()%{}]+)\s+[-+\d.]+\s+Tf|<([0-9A-Fa-f\s]*)>")
_INLINE_IMAGE = re.compile(rb"(?<![^\s])BI(?![^\s])")


class SplitError(BulksignError):
    """The run's PDF does not cut into the copies it was made of."""


@dataclass(frozen=True)
class Piece:
    """One copy's pages of the run, as a PDF of their own."""

    pdf: bytes
    #: Which of the run's pages it holds.
    pages: range
    #: The addresses of its links to outside; None: a page holds an annotation other than a link, or a link to a
    #: page of another copy.
    links: tuple[str, ...] | None
    #: What its links say of themselves (``/Contents``: LibreOffice writes the linked text there).
    said: str = ""


def first_pages(reader: PdfReader, count: int) -> list[int]:
    """The page (from 0) where each of ``count`` copies starts; SplitError if any is missing or out of order."""
    found: dict[int, int] = {}
    for name, destination in reader.named_destinations.items():
        number = str(name).lstrip("/").removeprefix(FIRST_PAGE)
        if str(name).lstrip("/").startswith(FIRST_PAGE) and number.isdigit():
            page = reader.get_destination_page_number(destination)
            found[int(number)] = -1 if page is None else page
    firsts = [found.get(index, -1) for index in range(count)]
    if len(found) != count or firsts[:1] != [0] or any(b <= a for a, b in zip(firsts, firsts[1:])):
        raise SplitError(f"first pages {firsts[:10]} found for {count} copies")
    return firsts


def split(pdf: bytes, properties: list[tuple[tuple[str, str], ...]]) -> list[Piece]:
    """The run as one Piece per copy (``properties``: each copy's own title, author, subject); SplitError when it
    does not cut, pdf_fonts.FontError for a font that cannot be cut down."""
    reader = PdfReader(BytesIO(pdf))
    firsts = first_pages(reader, len(properties))
    shared = {k: v for k, v in (reader.metadata or {}).items() if k not in OWN_PROPERTIES}
    language = reader.root_object.get("/Lang")
    fonts = font_programs.RunFonts()
    numbers = {
        page.indirect_reference.idnum: index
        for index, page in enumerate(reader.pages)
        if page.indirect_reference is not None  # every page a reader reads has one
    }
    pieces = []
    for start, end, own in zip(firsts, [*firsts[1:], len(reader.pages)], properties):
        shown: list[dict[str, set[int]]] = []
        links = _Links(reader, numbers, range(start, end))
        for index in range(start, end):
            shown.append(_keep_used_resources(reader.pages[index]))
            links.take_out(index)
        writer = PdfWriter()
        for index in range(start, end):
            writer.add_page(reader.pages[index], excluded_keys=_NOT_CLONED)
        links.put_back(writer)
        used: dict[int, tuple[object, set[int]]] = {}
        for page, codes in zip(writer.pages, shown):
            named = {
                str(name)[1:]: font.get_object()
                for name, font in cast(DictionaryObject, page["/Resources"]).get("/Font", {}).items()
            }
            for name, font_codes in codes.items():
                if name not in named:
                    raise SplitError(f"a page shows text in the font {name} that its resources do not list")
                used.setdefault(id(named[name]), (named[name], set()))[1].update(font_codes)
        for font, font_codes in used.values():
            pdf_fonts.cut_simple_font(font, font_codes, run=fonts)
        writer.add_metadata({**shared, **dict(own)})
        if language is not None:
            writer._root_object[NameObject("/Lang")] = TextStringObject(str(language))
        if any(key == "/Title" for key, _ in own):
            writer._root_object[NameObject("/ViewerPreferences")] = DictionaryObject(
                {NameObject("/DisplayDocTitle"): BooleanObject(True)}
            )
        out = BytesIO()
        writer.write(out)
        pieces.append(Piece(out.getvalue(), range(start, end), links.addresses, " ".join(links.said)))
    return pieces


def _keep_used_resources(page) -> dict[str, set[int]]:
    """Give the run's page only the resources its content names (the run's page lists all the run's fonts and
    images: cloned as they are, a part would carry every other copy's); returns the codes it shows in each font."""
    content = page.get_contents().get_data() if page.get_contents() is not None else b""
    resources = page.get("/Resources") or DictionaryObject()
    shown = _shown(content)
    named = set(_NAME.findall(content))
    kept = DictionaryObject()
    for category, entries in resources.items():
        entries = entries.get_object()
        if not isinstance(entries, dict):
            kept[NameObject(category)] = entries  # /ProcSet
            continue
        chosen = DictionaryObject(
            {NameObject(name): value for name, value in entries.items() if name[1:].encode("latin-1") in named}
        )
        if category == "/XObject":
            for value in chosen.values():
                if value.get_object().get("/Subtype") == "/Form":
                    raise SplitError("a page draws a form, whose own resources are not cut down here")
        if chosen:
            kept[NameObject(category)] = chosen
    page[NameObject("/Resources")] = kept
    return shown


def _shown(content: bytes) -> dict[str, set[int]]:
    """Font resource name → the one-byte codes the content shows in it, read from its text objects' hexadecimal
    strings (as LibreOffice writes all text); SplitError for text written otherwise, or an inline image."""
    if _INLINE_IMAGE.search(content):
        raise SplitError("a page holds an inline image")
    strings: dict[bytes, list[bytes]] = {}
    font = None
    for text in _TEXT_OBJECT.findall(content):
        if b"(" in text:
            raise SplitError("a page writes text in a literal string")
        for name, hexadecimal in _SHOWN.findall(text):
            if name:
                font = name
            elif font is None:
                raise SplitError("a page shows text before naming its font")
            else:
                strings.setdefault(font, []).append(hexadecimal)
    shown = {}
    for name, found in strings.items():
        digits = b"".join(found).translate(None, b" \t\r\n")
        if len(digits) % 2:
            raise SplitError("a text string of an odd number of digits")
        shown[name.decode("latin-1")] = set(bytes.fromhex(digits.decode("ascii")))
    return shown


class _Links:
    """The link annotations of a part's pages. A link to a page (a cross-reference, a link to a bookmark) names the
    run's page: it is taken out before the pages are cloned (cloned, it would carry that page along) and put back
    naming the part's own clone of it; one to a page of another copy makes the part fail (``addresses`` None)."""

    def __init__(self, reader: PdfReader, numbers: dict[int, int], pages: range) -> None:
        self.reader, self.numbers, self.pages = reader, numbers, pages
        self.addresses: tuple[str, ...] | None = ()
        self.said: list[str] = []
        self._moved: list[tuple[int, int, int, list]] = []  # (page, annotation, target page, the rest of its /Dest)

    def take_out(self, index: int) -> None:
        for position, annotation in enumerate(self.reader.pages[index].get("/Annots", []) or []):
            annotation = annotation.get_object()
            self.said.append(str(annotation.get("/Contents", "")))
            action = annotation.get("/A")
            action = action.get_object() if action is not None else {}
            if annotation.get("/Subtype") != "/Link" or ("/Dest" in annotation) == ("/A" in annotation):
                self.addresses = None
            elif "/Dest" in annotation:
                target, rest = self._destination(annotation["/Dest"])
                if target is None:
                    self.addresses = None
                    continue
                self._moved.append((index - self.pages.start, position, target - self.pages.start, rest))
                del annotation["/Dest"]
            elif action.get("/S") == "/URI" and self.addresses is not None:
                self.addresses = (*self.addresses, str(action.get("/URI")))
            else:
                self.addresses = None

    def _destination(self, destination) -> tuple[int | None, list]:
        destination = destination.get_object()
        if isinstance(destination, (str, bytes)):
            named = self.reader.named_destinations.get(str(destination))
            if named is None:
                return None, []
            target, rest = self.reader.get_destination_page_number(named), [named.typ, *_view(named)]
        else:
            target, rest = self.numbers.get(destination[0].idnum), list(destination[1:])
        return (target, rest) if target in self.pages else (None, [])

    def put_back(self, writer: PdfWriter) -> None:
        for page, position, target, rest in self._moved:
            annotation = cast(ArrayObject, writer.pages[page]["/Annots"])[position].get_object()
            annotation[NameObject("/Dest")] = ArrayObject([writer.pages[target].indirect_reference, *rest])


def _view(destination) -> list:
    """The numbers of a named destination's view (left, top, zoom for ``/XYZ``), as its array holds them."""
    return [destination.get(key) for key in ("/Left", "/Top", "/Zoom") if key in destination]

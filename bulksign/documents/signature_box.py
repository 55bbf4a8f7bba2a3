"""Where the signature goes: a box (page, x, y, w, h) found in a rendered document, or given by staff.
More in docs/architecture/documents.md."""

from __future__ import annotations

import ctypes
import functools
import re
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from io import BytesIO
from types import SimpleNamespace

from markupsafe import Markup
from pypdf import PdfReader

from bulksign.core.errors import BulksignError
from bulksign.core.messages import N_

#: The template variable that marks the place: ``{{ signature }}`` (not a column of the recipients file).
SIGNATURE_VARIABLE = "signature"
#: ``{{ signature_<role> }}`` (a PDF's field or box ``signature_<role>``) marks another party's place, e.g.
#: ``signature_employer``; ``{{ signature }}`` is the row's own recipient's (role ``recipient``).
ROLE_MARK = re.compile(r"signature_([a-z0-9_]{1,40})")
RECIPIENT_ROLE = "recipient"
#: Marks one document may hold: each is framed in its own shade of ``MARK_COLOUR`` (``mark_colour``).
MAX_MARKS = 16
#: The colour of the box's frame, by which it is found: a grey of our own (a soft frame the recipient sees). A
#: template that draws a shape of at least ``MIN_WIDTH_PT`` × ``MIN_HEIGHT_PT`` in exactly this colour before its
#: ``{{ signature }}`` moves the signature there; both renderers write it back exactly (wkhtmltopdf and
#: LibreOffice were checked: 154, 163, 178 read as it was written).
MARK_COLOUR = (0x9A, 0xA3, 0xB2)
MARK_COLOUR_HEX = "".join(f"{value:02X}" for value in MARK_COLOUR)
#: The printed size of the empty box.
BOX_WIDTH_MM = 60.0
BOX_HEIGHT_MM = 22.0
#: The smallest box a signature block is readable in (about 35 × 10 mm), for boxes staff place.
MIN_WIDTH_PT = 100.0
MIN_HEIGHT_PT = 30.0

_MM = 72 / 25.4
#: wkhtmltopdf prints CSS lengths at 0.7686 of their size (measured: a 70 mm box came out 152.5 pt),
#: so the HTML box is drawn larger to come out at the standard size.
WKHTMLTOPDF_SCALE = 0.7686
#: PDFium is not thread-safe: one call into it at a time per process.
_PDFIUM = threading.Lock()


class UnreadablePdf(BulksignError):
    """A rendered document PDFium cannot open (a broken file), so its signature mark cannot be looked for."""


class SignatureBoxError(BulksignError):
    """A given box does not fit its document; ``message`` is for people."""


@dataclass(frozen=True)
class SignatureBox:
    """The place of the signature block: ``page`` from 0, ``x``/``y`` its lower-left corner, in points."""

    page: int
    x: float
    y: float
    w: float
    h: float

    def to_json(self) -> dict:
        """As stored in ``Document.signature_box``."""
        return {k: round(v, 2) if isinstance(v, float) else v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict | None) -> SignatureBox | None:
        """The box stored by ``to_json``, or None when the document has none."""
        if not data:
            return None
        return cls(
            page=int(data["page"]), x=float(data["x"]), y=float(data["y"]), w=float(data["w"]), h=float(data["h"])
        )


def mark_role(variable: str) -> str | None:
    """The role whose place a variable (or a PDF field's name) marks: ``signature`` → ``recipient``,
    ``signature_employer`` → ``employer``; None for any other variable."""
    if variable == SIGNATURE_VARIABLE:
        return RECIPIENT_ROLE
    found = ROLE_MARK.fullmatch(variable)
    return found.group(1) if found and found.group(1) != RECIPIENT_ROLE else None


def marks_among(variables: Iterable[str], *, roles: Iterable[str]) -> frozenset[str]:
    """The marks among ``variables`` of a version signed by ``roles`` (its stored ``TemplateVersion.roles``):
    ``signature`` always, and ``signature_<role>`` of each of its roles. A version saved before roles were read
    (``["recipient"]``) keeps a variable such as ``signature_date`` a column of its file, as it always was."""
    others = set(roles) - {RECIPIENT_ROLE}
    return frozenset(v for v in variables if (mark_role(v) or "") in others) | {SIGNATURE_VARIABLE}


def mark_indexes(variables: Iterable[str]) -> dict[str, int]:
    """Each mark among a template's variables → the index of its frame's shade: ``signature`` 0 (the one every
    single-signer document has always had), the other roles' marks 1, 2 … by name (a version's variables never
    change, so its renders and its reading agree)."""
    others = sorted({v for v in variables if v != SIGNATURE_VARIABLE and mark_role(v)})
    return {SIGNATURE_VARIABLE: 0, **{v: i for i, v in enumerate(others[: MAX_MARKS - 1], start=1)}}


def mark_colour(index: int = 0) -> tuple[int, int, int]:
    """The frame's colour of mark ``index``: ``MARK_COLOUR`` for the recipient's, then two steps of blue less
    each (both renderers write a colour back exactly; two steps leave room for a rounding)."""
    red, green, blue = MARK_COLOUR
    return red, green, blue - 2 * index


def mark_colour_hex(index: int = 0) -> str:
    """``mark_colour(index)`` as six hex digits (CSS, Word)."""
    return "".join(f"{value:02X}" for value in mark_colour(index))


def mark_values(variables: Iterable[str]) -> dict[str, Markup]:
    """What each mark among an HTML template's variables prints (``{{ signature }}`` always among them)."""
    return {variable: html_mark(index) for variable, index in mark_indexes(variables).items()}


def html_mark(index: int = 0) -> Markup:
    """What ``{{ signature }}`` (``index`` 0) or another role's mark prints in an HTML template: an empty box
    framed in ``mark_colour(index)`` (wkhtmltopdf fills the frame as one ring-shaped path)."""
    width = BOX_WIDTH_MM / WKHTMLTOPDF_SCALE
    height = BOX_HEIGHT_MM / WKHTMLTOPDF_SCALE
    return Markup(
        f'<span class="bulksign-signature" style="display:inline-block;width:{width:.1f}mm;'
        f"height:{height:.1f}mm;border:0.3mm solid #{mark_colour_hex(index)};border-radius:1.5mm;vertical-align:top;"
        f'page-break-inside:avoid;box-sizing:border-box"></span>'
    )


def find_signature_box(pdf: bytes) -> SignatureBox | None:
    """The box the document marks for the signature (the first drawing in ``MARK_COLOUR`` of at least the minimum size,
    with the pieces that touch it), or None; ``UnreadablePdf`` for a PDF PDFium cannot open."""
    return find_signature_boxes(pdf, count=1)[0]


def find_signature_boxes(pdf: bytes, *, count: int) -> tuple[SignatureBox | None, ...]:
    """``find_signature_box`` for marks 0 … ``count``-1 at once (``mark_colour``), in one reading of the pages:
    the box of each, or None where the document has none."""
    colours = [mark_colour(index) for index in range(count)]
    return find_framed_boxes(pdf, colours=colours, min_w=MIN_WIDTH_PT, min_h=MIN_HEIGHT_PT)


def find_framed_boxes(
    pdf: bytes, *, colours: list[tuple[int, int, int]], min_w: float, min_h: float
) -> tuple[SignatureBox | None, ...]:
    """The first frame drawn in each of ``colours`` at least ``min_w`` × ``min_h`` points large (as
    ``find_signature_box`` finds a signature's; the fields the signer fills have smaller frames of their own
    colours, ``field_boxes``), or None where the document has none."""
    import pypdfium2

    count = len(colours)
    found: list[SignatureBox | None] = [None] * count
    with _PDFIUM:
        try:
            document = pypdfium2.PdfDocument(pdf)
        except pypdfium2.PdfiumError as exc:
            raise UnreadablePdf(f"PDFium could not open the document: {exc}") from exc
        try:
            for index in range(len(document)):
                page = document[index]
                if page.get_rotation():
                    continue
                pieces = _mark_pieces(page, colours)
                for mark, colour in enumerate(colours):
                    frame = None if found[mark] else _first_frame(pieces[colour], min_w=min_w, min_h=min_h)
                    if frame is not None:
                        left, bottom, right, top = frame
                        found[mark] = SignatureBox(page=index, x=left, y=bottom, w=right - left, h=top - bottom)
                if all(found):
                    break
            return tuple(found)
        finally:
            document.close()


_Bounds = tuple[float, float, float, float]


def _first_frame(pieces: list[_Bounds], *, min_w: float, min_h: float) -> _Bounds | None:
    """The first piece grown by every piece that touches it (within 1 pt), and so on, that is at least ``min_w`` ×
    ``min_h`` large (a signature block's size for a signature's mark); None when no piece is."""
    while pieces:
        left, bottom, right, top = pieces.pop(0)
        while touching := [
            p for p in pieces if p[0] <= right + 1 and left - 1 <= p[2] and p[1] <= top + 1 and bottom - 1 <= p[3]
        ]:
            for piece in touching:
                pieces.remove(piece)
                left, bottom, right, top = (
                    min(left, piece[0]),
                    min(bottom, piece[1]),
                    max(right, piece[2]),
                    max(top, piece[3]),
                )
        if right - left >= min_w and top - bottom >= min_h:
            return left, bottom, right, top
    return None


def _mark_pieces(page, colours: list[tuple[int, int, int]]) -> dict[tuple[int, int, int], list[_Bounds]]:
    """Each of ``colours`` → the (left, bottom, right, top) bounds of each path painted in it on a PDFium page, from
    the path's own points, in drawing order."""
    import pypdfium2.raw as pdfium_c

    found: dict[tuple[int, int, int], list[_Bounds]] = {colour: [] for colour in colours}
    red, green, blue, alpha = (ctypes.c_uint() for _ in range(4))
    fill_mode, stroke = ctypes.c_int(), ctypes.c_int()
    x, y = ctypes.c_float(), ctypes.c_float()
    matrix = pdfium_c.FS_MATRIX()
    plain = _plain_calls()
    page_address = ctypes.cast(page.raw, ctypes.c_void_p).value
    # The raw calls: pypdfium2's object wrappers tripled the cost on a page of table borders (thousands of paths).
    for number in range(pdfium_c.FPDFPage_CountObjects(page.raw)):
        obj = plain.FPDFPage_GetObject(page_address, number)
        if plain.FPDFPageObj_GetType(obj) != pdfium_c.FPDF_PAGEOBJ_PATH:
            continue
        plain.FPDFPath_GetDrawMode(obj, fill_mode, stroke)
        painted = []
        if fill_mode.value != pdfium_c.FPDF_FILLMODE_NONE:
            plain.FPDFPageObj_GetFillColor(obj, red, green, blue, alpha)
            painted.append((red.value, green.value, blue.value))
        if stroke.value:
            plain.FPDFPageObj_GetStrokeColor(obj, red, green, blue, alpha)
            painted.append((red.value, green.value, blue.value))
        colour = next((c for c in painted if c in found), None)
        if colour is None or not plain.FPDFPageObj_GetMatrix(obj, matrix):
            continue
        xs, ys = [], []
        for segment in range(plain.FPDFPath_CountSegments(obj)):
            if plain.FPDFPathSegment_GetPoint(plain.FPDFPath_GetPathSegment(obj, segment), x, y):
                xs.append(matrix.a * x.value + matrix.c * y.value + matrix.e)
                ys.append(matrix.b * x.value + matrix.d * y.value + matrix.f)
        if xs:
            found[colour].append((min(xs), min(ys), max(xs), max(ys)))
    return found


@functools.cache
def _plain_calls() -> SimpleNamespace:
    """The PDFium functions ``_mark_pieces`` calls per page object, taking and giving the object as a plain address:
    pypdfium2's typed functions convert their pointers on every call, and a contract's page asks two questions of
    each of ~1,800 text objects (the scan of one page 1.7 → 1.1 ms)."""
    import pypdfium2.raw as pdfium_c

    def plain(name: str, returns=None):
        function = getattr(pdfium_c, name)
        prototype = ctypes.CFUNCTYPE(returns or function.restype, ctypes.c_void_p, *function.argtypes[1:])
        address = ctypes.cast(function, ctypes.c_void_p).value
        assert address is not None  # a loaded library's function has an address
        return prototype(address)

    return SimpleNamespace(
        FPDFPage_GetObject=plain("FPDFPage_GetObject", returns=ctypes.c_void_p),
        FPDFPath_GetPathSegment=plain("FPDFPath_GetPathSegment", returns=ctypes.c_void_p),
        **{
            name: plain(name)
            for name in (
                "FPDFPageObj_GetType",
                "FPDFPath_GetDrawMode",
                "FPDFPageObj_GetFillColor",
                "FPDFPageObj_GetStrokeColor",
                "FPDFPageObj_GetMatrix",
                "FPDFPath_CountSegments",
                "FPDFPathSegment_GetPoint",
            )
        },
    )


def check_box(pdf: bytes, box: SignatureBox) -> SignatureBox:
    """``box`` if it lies on a page of ``pdf`` and is large enough for the block; SignatureBoxError otherwise."""

    pages = PdfReader(BytesIO(pdf)).pages
    if not 0 <= box.page < len(pages):
        raise SignatureBoxError(
            N_(
                "The signature box is on page %(page)d; the document has %(pages)d.",
                page=box.page + 1,
                pages=len(pages),
            )
        )
    media = pages[box.page].mediabox
    if box.w < MIN_WIDTH_PT or box.h < MIN_HEIGHT_PT:
        raise SignatureBoxError(
            N_(
                "The signature box is too small: make it at least %(w)d × %(h)d mm.",
                w=round(MIN_WIDTH_PT / _MM),
                h=round(MIN_HEIGHT_PT / _MM),
            )
        )
    if (
        box.x < float(media.left) - 0.5
        or box.y < float(media.bottom) - 0.5
        or box.x + box.w > float(media.right) + 0.5
        or box.y + box.h > float(media.top) + 0.5
    ):
        raise SignatureBoxError(N_("The signature box reaches beyond the edge of its page."))
    return box

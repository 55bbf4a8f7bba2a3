"""Where the signature goes: a box (page, x, y, w, h) found in a rendered document, or given by staff.

The contract every template kind follows:

- A renderer that lets the document mark the place prints an empty box of about
  ``BOX_WIDTH_MM`` × ``BOX_HEIGHT_MM`` with two tiny marker words inside it, invisible (white,
  1 px): ``MARK_TOP_LEFT`` in its top-left corner and ``MARK_BOTTOM_RIGHT`` in its bottom-right
  corner. ``find_signature_box(pdf)`` finds them in the PDF's text (PDFium, in-process) and
  answers the box between them. A renderer that cannot pin a word to a corner (Word) may
  print only ``MARK_TOP_LEFT``: the box then has the standard size, down and right from it.
  HTML templates get this box from ``{{ signature }}`` (``html_mark()``).
- A renderer that knows the box itself (a PDF form field named ``signature``, a box staff placed
  on a page) gives it as ``SignatureBox`` directly, checked with ``check_box(pdf, box)``.
- The render step stores the box with the original document (``Document.signature_box``,
  ``box.to_json()``); sealing stamps the drawn signature, name, time and IP inside it, or, with
  no box, appends a signature page, so the block never covers the document's text.

Coordinates are a PDF's own: points (1/72 inch) in the page's default user space, y upwards,
the same as a ``/Rect`` or pypdf's ``mediabox``. ``page`` counts from 0.
"""

from __future__ import annotations

import re
import threading
from dataclasses import asdict, dataclass
from io import BytesIO

from markupsafe import Markup

from bulksign.core.messages import N_

#: The template variable that marks the place: ``{{ signature }}`` (not a column of the recipients file).
SIGNATURE_VARIABLE = "signature"
#: The marker words: letters only, so no renderer hyphenates, ligates or breaks them.
MARK_TOP_LEFT = "BULKSIGNSIGTL"
MARK_BOTTOM_RIGHT = "BULKSIGNSIGBR"
#: The printed size of the empty box, and of the box below a lone ``MARK_TOP_LEFT``.
BOX_WIDTH_MM = 60.0
BOX_HEIGHT_MM = 22.0
#: The smallest box a signature block is readable in (about 35 × 10 mm), for boxes staff place.
MIN_WIDTH_PT = 100.0
MIN_HEIGHT_PT = 30.0

_MM = 72 / 25.4
#: wkhtmltopdf prints CSS lengths at 0.7686 of their size (measured: a 70 mm box came out 152.5 pt),
#: so the HTML box is drawn larger to come out at the standard size.
_WKHTMLTOPDF_SCALE = 0.7686
_MARK_STYLE = (
    "position:absolute;{where};font:1px/1px 'DejaVu Sans',sans-serif;color:#fff;white-space:nowrap;margin:0;padding:0"
)
#: PDFium is not thread-safe: one call into it at a time per process.
_PDFIUM = threading.Lock()


class UnreadablePdf(RuntimeError):
    """A rendered document PDFium cannot open (a broken file), so its signature mark cannot be looked for."""


class SignatureBoxError(ValueError):
    """A given box does not fit its document; ``message`` is for people."""

    def __init__(self, message: N_):
        super().__init__(message.english)
        self.message = message


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


def html_mark() -> Markup:
    """What ``{{ signature }}`` prints in an HTML template: an empty framed box holding the two markers."""
    width = BOX_WIDTH_MM / _WKHTMLTOPDF_SCALE
    height = BOX_HEIGHT_MM / _WKHTMLTOPDF_SCALE
    return Markup(
        f'<span class="bulksign-signature" style="display:inline-block;position:relative;width:{width:.1f}mm;'
        f"height:{height:.1f}mm;border:0.3mm solid #9aa3b2;border-radius:1.5mm;vertical-align:top;"
        f'page-break-inside:avoid;box-sizing:border-box">'
        f'<span style="{_MARK_STYLE.format(where="left:0;top:0")}">{MARK_TOP_LEFT}</span>'
        f'<span style="{_MARK_STYLE.format(where="right:0;bottom:0")}">{MARK_BOTTOM_RIGHT}</span></span>'
    )


def find_signature_box(pdf: bytes) -> SignatureBox | None:
    """The box the document marks for the signature (the first mark), or None when it has none.

    Raises ``UnreadablePdf`` for a PDF that PDFium cannot open. Marks on rotated pages are not
    looked for: no renderer here rotates pages. PDFium searches the text in-process in ~3 ms of
    CPU a document; ``pdftotext -bbox`` took ~30 ms (its process, then parsing its XML), a
    third of what wkhtmltopdf itself costs, on every document of a batch.
    """
    import pypdfium2

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
                text = page.get_textpage()
                starts = _marks(text, MARK_TOP_LEFT)
                if not starts:
                    continue
                left, _, _, top = starts[0]
                # The nearest bottom-right mark below and right of the start closes the box; Word prints none.
                ends = [
                    (right, bottom)
                    for _, bottom, right, _ in _marks(text, MARK_BOTTOM_RIGHT)
                    if right > left and bottom < top
                ]
                if ends:
                    right, bottom = min(ends, key=lambda end: (top - end[1]) + (end[0] - left))
                else:
                    right, bottom = left + BOX_WIDTH_MM * _MM, top - BOX_HEIGHT_MM * _MM
                return SignatureBox(page=index, x=left, y=bottom, w=right - left, h=top - bottom)
            return None
        finally:
            document.close()


def _marks(text, word: str) -> list[tuple[float, float, float, float]]:
    """(left, bottom, right, top) in user space of each place ``word`` is printed on a PDFium text page.

    Whitespace between the letters is allowed: at the marks' 1 px size PDFium takes the rounding of glyph
    positions for line breaks and puts generated ``\\r\\n`` inside the word (seen in a right-aligned box), where
    poppler saw one word. ``FPDFText_GetCharIndexFromTextIndex`` turns a text index (UTF-16 units) into a char's.
    """
    import pypdfium2.raw as pdfium_c

    page_text = text.get_text_range()

    def box(index: int) -> tuple[float, float, float, float]:
        units = len(page_text[:index].encode("utf-16-le")) // 2
        return text.get_charbox(pdfium_c.FPDFText_GetCharIndexFromTextIndex(text.raw, units), loose=True)

    found = []
    for match in re.finditer(r"\s*".join(map(re.escape, word)), page_text):
        left, bottom, _, top = box(match.start())
        _, last_bottom, right, last_top = box(match.end() - 1)
        found.append((left, min(bottom, last_bottom), right, max(top, last_top)))
    return found


def check_box(pdf: bytes, box: SignatureBox) -> SignatureBox:
    """``box`` if it lies on a page of ``pdf`` and is large enough for the block; SignatureBoxError otherwise."""
    from pypdf import PdfReader

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

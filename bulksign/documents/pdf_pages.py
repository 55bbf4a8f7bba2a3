"""A PDF's pages as PNG images, drawn by poppler's ``pdftoppm`` once and kept in storage beside the PDF.

Browsers draw these the same everywhere (phones do not show PDFs in frames), and no PDF viewer runs in
the page: the placement editor lays its boxes over them.
"""

from __future__ import annotations

from bulksign.core.errors import BulksignError
from bulksign.core.messages import N_, OneOf
from bulksign.documents import poppler
from bulksign.documents.storage import Storage

#: Image widths offered (pixels): one for a screen, twice that for sharp text on dense screens.
WIDTHS = (800, 1600)
#: A page that takes longer than this to draw is not worth waiting for.
TIMEOUT_SECONDS = 20


class PageImageError(BulksignError):
    """The page could not be drawn; ``message`` is for people."""


def page_key(pdf_key: str, *, page: int, width: int) -> str:
    """Where the image of ``page`` (from 0) of the PDF stored at ``pdf_key`` is kept: the PDF's key names its
    content (sha256), so the image never goes stale."""
    return f"{pdf_key}.pages/{page + 1}-{width}.png"


def page_png(storage: Storage, *, pdf_key: str, page: int, width: int) -> bytes:
    """The PNG of one page, ``width`` pixels wide, from storage or drawn now (and stored)."""
    if width not in WIDTHS:
        raise PageImageError(N_("Pages are drawn %(widths)s pixels wide.", widths=OneOf(tuple(map(str, WIDTHS)))))
    key = page_key(pdf_key, page=page, width=width)
    if storage.exists(key):
        return storage.get(key)
    png = draw_page(storage.get(pdf_key), page=page, width=width)
    storage.put(key, png, content_type="image/png")
    return png


def draw_page(pdf: bytes, *, page: int, width: int) -> bytes:
    """Draw one page (from 0) of ``pdf`` as a PNG ``width`` pixels wide (its crop box, as viewers show it)."""
    try:
        png = poppler.page_png(pdf, number=page + 1, width_px=width, timeout=TIMEOUT_SECONDS)
    except poppler.PopplerError:
        raise PageImageError(N_("Page %(page)d could not be drawn.", page=page + 1)) from None
    if not png.startswith(b"\x89PNG"):  # a page number past the end: pdftoppm draws nothing, and says so
        raise PageImageError(N_("Page %(page)d could not be drawn.", page=page + 1))
    return png

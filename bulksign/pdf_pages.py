"""A PDF's pages as PNG images, drawn by poppler's ``pdftoppm`` once and kept in storage beside the PDF.

Browsers draw these the same everywhere (phones do not show PDFs in frames), and no PDF viewer runs in
the page: the placement editor lays its boxes over them.
"""
from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from .messages import N_
from .storage import Storage

PDFTOPPM = "/usr/bin/pdftoppm"
#: Image widths offered (pixels): one for a screen, twice that for sharp text on dense screens.
WIDTHS = (800, 1600)
#: A page that takes longer than this to draw is not worth waiting for.
TIMEOUT_SECONDS = 20


class PageImageError(RuntimeError):
    """The page could not be drawn; ``message`` is for people."""

    def __init__(self, message: N_):
        super().__init__(str(message))
        self.message = message


def page_key(pdf_key: str, *, page: int, width: int) -> str:
    """Where the image of ``page`` (from 0) of the PDF stored at ``pdf_key`` is kept: the PDF's key names its
    content (sha256), so the image never goes stale."""
    return f"{pdf_key}.pages/{page + 1}-{width}.png"


def page_png(storage: Storage, *, pdf_key: str, page: int, width: int) -> bytes:
    """The PNG of one page, ``width`` pixels wide, from storage or drawn now (and stored)."""
    if width not in WIDTHS:
        raise PageImageError(N_("Pages are drawn %(widths)s pixels wide.", widths=" or ".join(map(str, WIDTHS))))
    key = page_key(pdf_key, page=page, width=width)
    if storage.exists(key):
        return storage.get(key)
    png = draw_page(storage.get(pdf_key), page=page, width=width)
    storage.put(key, png, content_type="image/png")
    return png


def draw_page(pdf: bytes, *, page: int, width: int) -> bytes:
    """Draw one page (from 0) of ``pdf`` as a PNG ``width`` pixels wide (its crop box, as viewers show it)."""
    with tempfile.TemporaryDirectory(prefix="bulksign-pages-") as folder:
        source = Path(folder) / "in.pdf"
        source.write_bytes(pdf)
        try:
            proc = subprocess.run([PDFTOPPM, "-q", "-png", "-f", str(page + 1), "-l", str(page + 1), "-singlefile",
                                   "-scale-to-x", str(width), "-scale-to-y", "-1", str(source),
                                   str(Path(folder) / "page")],  # this poppler writes no PNG to stdout
                                  capture_output=True, timeout=TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            raise PageImageError(N_("Page %(page)d took too long to draw.", page=page + 1)) from None
        except OSError:
            raise PageImageError(N_("Pages cannot be drawn on this server (poppler-utils is missing).")) from None
        image = Path(folder) / "page.png"
        png = image.read_bytes() if proc.returncode == 0 and image.exists() else b""
    if not png.startswith(b"\x89PNG"):
        raise PageImageError(N_("Page %(page)d could not be drawn.", page=page + 1))
    return png

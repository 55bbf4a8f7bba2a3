"""Two PDFs compared as a reader sees them: pages, every word at its place, page images."""

from __future__ import annotations

import io
import subprocess

from PIL import Image, ImageChops
from pypdf import PdfReader

from bulksign.documents import poppler
from bulksign.documents.poppler import page_png

#: How far a word may lie from the same word in the other PDF, in points.
TOLERANCE_PT = 0.5


def same_pages(one: bytes, other: bytes) -> bool:
    """Whether ``one`` has the pages of ``other``: as many, of the same size, every word at the same place."""
    ours, theirs = poppler.page_words(one), poppler.page_words(other)
    if len(ours) != len(theirs):
        return False
    for a, b in zip(ours, theirs):
        if (round(a.width, 1), round(a.height, 1)) != (round(b.width, 1), round(b.height, 1)):
            return False
        if len(a.words) != len(b.words):
            return False
        for x, y in zip(a.words, b.words):
            if x.text != y.text or max(abs(x.x0 - y.x0), abs(x.top - y.top), abs(x.x1 - y.x1)) > TOLERANCE_PT:
                return False
    return True


def same_look(one: bytes, other: bytes, *, width_px: int = 600) -> bool:
    """Whether every page of ``one`` looks as the same page of ``other`` (pixel for pixel at ``width_px``)."""
    count = len(PdfReader(io.BytesIO(one)).pages)
    if count != len(PdfReader(io.BytesIO(other)).pages):
        return False
    for number in range(1, count + 1):
        drawn = [
            Image.open(io.BytesIO(page_png(pdf, number=number, width_px=width_px))).convert("RGB")
            for pdf in (one, other)
        ]
        if ImageChops.difference(*drawn).getbbox() is not None:
            return False
    return True


def pdf_text(pdf: bytes) -> str:
    return subprocess.run(
        ["pdftotext", "-", "-"], input=pdf, capture_output=True, check=True, timeout=30
    ).stdout.decode()

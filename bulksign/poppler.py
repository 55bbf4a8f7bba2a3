"""What poppler-utils (Debian ``poppler-utils``) reads out of a PDF: words with their boxes.

``pdftotext -bbox`` gives every word with its box in ~10 ms per document; pypdf's text visitor
gives only the text matrix, from which the box has to be reconstructed per font.
"""
from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass

PDFTOTEXT = "/usr/bin/pdftotext"


class PopplerError(RuntimeError):
    """poppler could not read the PDF (broken file, missing tool, too slow)."""


@dataclass(frozen=True)
class Word:
    """One word, in points from the page's top-left corner (poppler's convention: y grows downwards)."""

    text: str
    x0: float
    top: float
    x1: float
    bottom: float


@dataclass(frozen=True)
class PageWords:
    """The words of one page, and the page's size in points as poppler sees it (its crop box)."""

    width: float
    height: float
    words: tuple[Word, ...]


def page_words(pdf: bytes, *, timeout: float = 30) -> list[PageWords]:
    """Every page's words with their boxes, in page order; raises PopplerError on a PDF poppler cannot read."""
    try:
        proc = subprocess.run([PDFTOTEXT, "-q", "-bbox", "-enc", "UTF-8", "-", "-"], input=pdf,
                              capture_output=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PopplerError(f"pdftotext failed: {exc}") from exc
    if proc.returncode != 0:
        raise PopplerError(f"pdftotext exited {proc.returncode}: {proc.stderr.decode('utf-8', 'replace')[-500:]}")
    try:
        root = ET.fromstring(proc.stdout)
    except ET.ParseError as exc:
        raise PopplerError(f"pdftotext wrote unreadable output: {exc}") from exc
    pages = []
    for page in root.iter("{http://www.w3.org/1999/xhtml}page"):
        words = tuple(Word(text=w.text or "", x0=float(w.get("xMin")), top=float(w.get("yMin")),
                           x1=float(w.get("xMax")), bottom=float(w.get("yMax")))
                      for w in page.iter("{http://www.w3.org/1999/xhtml}word"))
        pages.append(PageWords(width=float(page.get("width")), height=float(page.get("height")), words=words))
    return pages

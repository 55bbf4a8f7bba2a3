"""What poppler-utils (Debian ``poppler-utils``) reads out of a PDF: words with their boxes, paragraphs, page images.
More in docs/architecture/documents.md."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from bulksign.core.errors import BulksignError

PDFTOTEXT = "/usr/bin/pdftotext"
PDFTOPPM = "/usr/bin/pdftoppm"
_NS = "{http://www.w3.org/1999/xhtml}"


class PopplerError(BulksignError):
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
    """The words of one page, its paragraphs (poppler's blocks, lines joined) and its size in points (crop box)."""

    width: float
    height: float
    words: tuple[Word, ...]
    paragraphs: tuple[str, ...] = ()


def _run(args: list[str], pdf: bytes, timeout: float) -> bytes:
    try:
        proc = subprocess.run(args, input=pdf, capture_output=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PopplerError(f"{args[0]} failed: {exc}") from exc
    if proc.returncode != 0:
        raise PopplerError(f"{args[0]} exited {proc.returncode}: {proc.stderr.decode('utf-8', 'replace')[-500:]}")
    return proc.stdout


def page_words(pdf: bytes, *, timeout: float = 30) -> list[PageWords]:
    """Every page's words with their boxes and its paragraphs, in page order; PopplerError if poppler cannot read it."""
    out = _run([PDFTOTEXT, "-q", "-bbox-layout", "-enc", "UTF-8", "-", "-"], pdf, timeout)
    try:
        root = ET.fromstring(out)
    except ET.ParseError as exc:
        raise PopplerError(f"pdftotext wrote unreadable output: {exc}") from exc
    pages = []
    for page in root.iter(f"{_NS}page"):
        words = tuple(
            Word(
                text=w.text or "",
                x0=float(w.attrib["xMin"]),
                top=float(w.attrib["yMin"]),
                x1=float(w.attrib["xMax"]),
                bottom=float(w.attrib["yMax"]),
            )
            for w in page.iter(f"{_NS}word")
        )
        paragraphs = tuple(
            text
            for text in (" ".join(w.text or "" for w in block.iter(f"{_NS}word")) for block in page.iter(f"{_NS}block"))
            if text.strip()
        )
        pages.append(
            PageWords(
                width=float(page.attrib["width"]),
                height=float(page.attrib["height"]),
                words=words,
                paragraphs=paragraphs,
            )
        )
    return pages


def page_png(pdf: bytes, *, number: int, width_px: int, timeout: float = 30) -> bytes:
    """Page ``number`` (from 1) as a PNG ``width_px`` wide, its height in proportion."""
    return _run(
        [
            PDFTOPPM,
            "-q",
            "-png",
            "-f",
            str(number),
            "-l",
            str(number),
            "-scale-to-x",
            str(width_px),
            "-scale-to-y",
            "-1",
            "-",
        ],
        pdf,
        timeout,
    )


def page_texts(pdf: bytes, *, timeout: float = 30) -> list[str]:
    """Every page's text in page order, as ``pdftotext`` reads it (its plain output ends each page with a form
    feed)."""
    return _run([PDFTOTEXT, "-q", "-enc", "UTF-8", "-", "-"], pdf, timeout).decode("utf-8", "replace").split("\f")[:-1]

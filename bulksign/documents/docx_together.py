"""Several recipients' Word copies, merged into one document, converted by LibreOffice once, split at each copy's
first page (``docx_parts``) and each part checked against its own copy's text before it is stored.
More in docs/architecture/documents.md."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from io import BytesIO

from pypdf import PdfReader

from bulksign.core.messages import N_
from bulksign.documents import docx_parts, libreoffice, pdf_fonts, poppler
from bulksign.documents.pdf import MAX_PAGES
from bulksign.documents.together import NotTogether, Part

#: The export's settings for a run: each bookmark a named destination (``docx_parts`` cuts at them).
EXPORT = ("ExportBookmarksToPDFDestination=true",)


_TOO_LONG = N_("A document runs past the page limit; each is converted alone to find out which.")
_UNCUT = N_(
    "The template holds something (a drawing or a font) that cannot be cut exactly out of a PDF several documents "
    "share, so its documents are converted one by one."
)
_MISMATCH = N_(
    "A document converted together with others did not hold exactly its own text, so this template's documents "
    "are converted one by one."
)
#: Characters pdftotext never gives back as text: soft hyphens, zero-width spaces and joiners, the BOM.
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))
#: A word that only numbers something (a page, a list item: "12", "3.2.", "iv", "а)") or shows no letter or digit
#: at all (a bullet, a tab's leader dots): drawn by the layout, not written in the copy's text.
_NUMBERING = re.compile(r"[\W_]*(\d{1,3}([.\-]\d{1,3})*|[ivxlcdm]{1,7}|\w)[\W_]*")


@dataclass(frozen=True)
class CopyText:
    """What one copy shows (``doc_templates.docx_copy_text`` reads it), which its part of the run is checked
    against; words are folded as ``pdftotext`` gives them back (``words``)."""

    #: Every character of its text, folded (``fold``), without spaces: each word of its PDF must be found in it.
    text: str
    #: Its words, folded: a word of another copy that is not among them must not be in its PDF.
    words: frozenset[str]
    #: The words its body prints whatever the layout (not hidden, not a field's result): all must be in its PDF.
    shown: frozenset[str]
    #: The outside addresses it links to.
    links: frozenset[str]
    #: One more than its hard page breaks in the body's flow.
    least_pages: int
    #: Title, author and subject as its document properties hold them.
    properties: tuple[tuple[str, str], ...]


def fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).translate(_INVISIBLE).casefold()


def words(text: str) -> list[str]:
    """The folded words of ``text``, split at any space."""
    return fold(text).split()


def layout_word(word: str) -> bool:
    """Whether ``word`` (folded) may come from the layout rather than the copy's text."""
    return _NUMBERING.fullmatch(word) is not None or not any(c.isalnum() for c in word)


def render_merged(
    merged: bytes, texts: Sequence[CopyText], *, timeout: float, max_pages: int = MAX_PAGES
) -> list[Part] | NotTogether:
    """One PDF for each copy of ``merged`` (what each shows: ``texts``, in order) from one conversion, each checked
    against its copy; NotTogether when they cannot be. Raises what the converter raises for the run."""
    run_limit = max_pages * len(texts)
    pdf = libreoffice.converter().convert(
        merged, timeout=timeout, max_pages=run_limit, options=EXPORT, documents=len(texts)
    )
    if len(PdfReader(BytesIO(pdf)).pages) > run_limit:  # the export stopped there: one of them at least is too long
        return NotTogether(_TOO_LONG, lasting=False)
    try:
        pieces = docx_parts.split(pdf, [text.properties for text in texts])
    except (docx_parts.SplitError, pdf_fonts.FontError) as exc:
        return NotTogether(_UNCUT, detail=str(exc))
    pages = poppler.page_texts(pdf)
    everyone = frozenset().union(*(text.words for text in texts))
    for number, (piece, own) in enumerate(zip(pieces, texts)):
        if len(piece.pages) > max_pages:
            return NotTogether(_TOO_LONG, lasting=False)
        failed = check(piece, own, [pages[index] for index in piece.pages], everyone=everyone)
        if failed:
            return NotTogether(_MISMATCH, detail=f"part {number + 1} of {len(pieces)}: {failed}")
    return [Part(piece.pdf, piece.pdf) for piece in pieces]


def check(piece: docx_parts.Piece, own: CopyText, page_texts: list[str], *, everyone: frozenset[str]) -> str:
    """What is wrong with ``piece`` as the PDF of the copy ``own`` (the failed check's name, no recipient's data), or
    "" when it is exactly its own: pages, words and links checked against that copy alone (the rules:
    docs/architecture/documents.md)."""
    if len(piece.pages) < own.least_pages:
        return "pages"
    if piece.links is None or not set(piece.links) <= own.links:
        return "links"
    shown = [word.rstrip("-") or word for word in words(" ".join([*page_texts, piece.said]))]
    for word in set(shown):
        if layout_word(word):
            continue
        if word in everyone and word not in own.words:
            return "another copy's word"
        if word not in own.text:
            return "a word not in the copy"
    joined, unbroken = "".join(words(" ".join(page_texts))), "".join(shown)
    if any(word not in joined and word not in unbroken for word in own.shown):
        return "a word of the copy missing"
    return ""

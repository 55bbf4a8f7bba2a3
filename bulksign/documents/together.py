"""Several recipients' HTML documents in one wkhtmltopdf run, split back into one PDF each (issue 32).

wkhtmltopdf spends ~50 of its ~60 ms per document starting a browser engine; one run of 10–50 bodies was
5.9–9.6× the documents per second of one run each (field notes). The run's HTML is the template's head, then
each recipient's body in a block of its own that begins on a new page; the PDF is split at those pages.

A block's first page is found without a word or a stroke of ours on it: the block begins with an empty link
to ``FIRST_PAGE_URI``, placed absolutely (it moves nothing) and 1 px large (wkhtmltopdf writes no link of no
size), which draws nothing; wkhtmltopdf writes a ``/Link`` annotation on the page it lands on, and the split
takes each one out again. The text layer and the page images are a solo render's.

Only templates whose head and ``<body>`` tag hold no placeholder are rendered together (``combined_html`` says
why not, for the caller to render each alone and log it); the last part of a run is compared with the same
recipient rendered alone (pages, and every word at its place), and a part that differs refuses the run and the
template. Each template's first run in a process is compared, then one run in ``CHECK_EVERY``: the comparison (a
solo render, ~70 ms of wkhtmltopdf's CPU, and two pdftotext runs) cost ~3 ms of CPU per document of a run of 40
(issue 32), and what it has found so far was the template's doing (its doctype, its body's margins); rows fill in
text and choose among the template's own blocks, which the later comparisons still sample.

Measured on four kinds of start (default body margin with an ``<h1>`` or a ``margin:0`` paragraph first, a body
without margin, a ``<style>``'d body margin): WebKit drops the margin above a forced page break, the body's too,
so a later document starts after a line of no height and its wrapper takes the body's top margin (``_PAGE_START``); with
a doctype (standards mode) every kind's parts are the solo renders. Without one (quirks mode) WebKit also drops the
default margin of a body's first element (``<h1>``, ``<p>``) but not of one after our line, so such a template is
8 pt off in its later parts and refused (so would be a body with padding or a border: not measured).

Qt embeds one subset of each font per run, holding every recipient's letters: each part's fonts are cut down to
the glyphs its own pages show (``pdf_fonts``). Reading them, the split also finds the pages whose text objects
are all Qt's plain ones, and gives each part a marks view without those (``Part.marks_view``), where the
render job looks for its signature and field marks. The render job renders a chunk this way when
``RENDER_TOGETHER`` is on (the default; ``RENDER_CHUNK_SIZE`` documents a run, 40 by bench_pipeline).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from io import BytesIO

from pypdf import PdfReader, PdfWriter
from pypdf.generic import ArrayObject, IndirectObject, NameObject

from bulksign.core.logs import log
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.jinja_sandbox import render_html
from bulksign.documents import pdf_fonts, poppler
from bulksign.documents.pdf import MAX_PAGES, RenderError, render_pdf, too_long

logger = logging.getLogger(__name__)

#: Where each block's empty link points: a name of ours (``.invalid`` resolves nowhere), taken out by the split.
FIRST_PAGE_URI = "https://bulksign.invalid/first-page"
_FIRST_PAGE_LINK = (
    f'<a href="{FIRST_PAGE_URI}" style="position:absolute;left:0;top:0;width:1px;height:1px;display:block"></a>'
)
#: A later document's start: a new page, and on it the link and a line of 1/64 px (WebKit's smallest length),
#: which the margins after it cannot collapse through to the break that would drop them; its margin of -1/64 px
#: takes the line's height back (without it, lines of the demo contract came out 0.58 pt lower where the 1/64 px
#: tipped their rounding). The body's top margin, which a solo render has above the document's first element
#: (collapsed with that element's own margin), is then given to a wrapper of the document (``margin-top:inherit``:
#: the body's, whatever sets it), so the first element stands where it stands alone.
_PAGE_START = (
    f'<div style="position:relative;page-break-before:always;height:0.015625px;margin-bottom:-0.015625px">'
    f"{_FIRST_PAGE_LINK}</div>"
)
_BODY_TAG = re.compile(r"<body\b[^>]*>", re.I)
_BODY_END = re.compile(r"</body\s*>", re.I)
_JINJA = re.compile(r"{{|{%|{#")
#: How far a word of a part may lie from the same word rendered alone, in points (both are the same layout).
_TOLERANCE_PT = 0.5


@dataclass(frozen=True)
class NotTogether:
    """A template, or a run, that cannot be rendered together; ``reason`` is for the log."""

    reason: str
    #: Whether it is the template's doing (every run of its version would be refused) or this run's rows'.
    lasting: bool = True


@dataclass(frozen=True)
class Part:
    """One recipient's PDF split off a run."""

    pdf: bytes
    #: The same PDF with the text objects of its pages left out, for finding its marks (``signature_box``): the
    #: same drawings at the same places, which PDFium reads without reading every glyph (a page of the bench's
    #: contract: ~1,800 text objects, ~2 ms of CPU). The text objects go only where all of a page's are Qt's plain
    #: ones (``pdf_fonts``); the other pages stay as they are.
    marks_view: bytes


class SplitError(RuntimeError):
    """The run's PDF does not split into the documents it was made of."""


class PartTooLong(SplitError):
    """A part has more pages than one document may have."""


def combined_html(template: str, documents: Sequence[str]) -> str | NotTogether:
    """One HTML of ``documents`` (each the template filled for a recipient), or why the template cannot be
    rendered that way."""
    bodies = list(_BODY_TAG.finditer(template))
    if len(bodies) != 1:
        return NotTogether("the template has no <body> tag, or more than one")
    head_end = bodies[0].end()
    head = template[:head_end]
    if _JINJA.search(head):
        return NotTogether("the template's head or <body> tag holds a placeholder")
    blocks = []
    for number, document in enumerate(documents):
        if not document.startswith(head):
            return NotTogether("a filled document does not begin with the template's head")
        body = document[head_end:]
        end = list(_BODY_END.finditer(body))
        if end:
            if body[end[-1].end() :].strip().lower() not in ("", "</html>"):
                return NotTogether("the template has content after </body>")
            body = body[: end[-1].start()]
        if number:
            blocks.append(f'{_PAGE_START}<div style="margin-top:inherit;margin-bottom:0">{body}</div>')
        else:
            blocks.append(f'<div style="position:relative">{_FIRST_PAGE_LINK}{body}</div>')
    return head + "".join(blocks) + "</body></html>"


def split(pdf: bytes, count: int, *, max_pages: int = MAX_PAGES) -> list[Part]:
    """The run's PDF as ``count`` PDFs, each the pages from one first-page link to the next, the links taken out and
    the fonts cut down to the part's own glyphs; SplitError if the run does not have ``count`` first pages, the
    first on its first page, or a font that cannot be cut down; PartTooLong for a part past ``max_pages`` (counted
    here: reading each part back to count them cost as much as checking a part against its solo render)."""
    reader = PdfReader(BytesIO(pdf))
    links = [_first_page_links(page) for page in reader.pages]
    firsts = [index for index, ours in enumerate(links) if ours]
    if len(firsts) != count or firsts[:1] != [0]:
        raise SplitError(f"{len(firsts)} first pages found for {count} documents (at {firsts[:10]})")
    if any(end - start > max_pages for start, end in zip(firsts, [*firsts[1:], len(reader.pages)])):
        raise PartTooLong(f"a document runs past {max_pages} pages")
    # Out of the run's pages before any part is cloned from them: taken out of a part's clone, the link (and its
    # array) stayed in the part as objects no page refers to, written all the same.
    for page, ours in zip(reader.pages, links):
        kept = [a for a in page.get("/Annots", []) if a.get_object().indirect_reference not in ours]
        if not all(_links_out(annotation.get_object()) for annotation in kept):
            # A link to a place in the document (an anchor, a table of contents) names its page: cloned into a
            # part it would carry that page along, and with one anchor name in every body it may be another
            # recipient's page.
            raise SplitError("a page holds a link within the document, or an annotation other than a link")
        if kept:
            page[NameObject("/Annots")] = ArrayObject(kept)
        elif "/Annots" in page:
            del page["/Annots"]
    parts = []
    fonts = pdf_fonts.RunFonts()
    for start, end in zip(firsts, [*firsts[1:], len(reader.pages)]):
        writer = PdfWriter()
        for index in range(start, end):
            writer.add_page(reader.pages[index], excluded_keys=pdf_fonts.NOT_CLONED)
        try:
            without_text = pdf_fonts.keep_own_glyphs(writer, run=fonts)
        except pdf_fonts.FontError as exc:
            raise SplitError(str(exc)) from None
        if reader.metadata:
            writer.add_metadata(dict(reader.metadata))
        out = BytesIO()
        writer.write(out)
        contents = {
            page.raw_get("/Contents"): content
            for page, content in zip(writer.pages, without_text)
            if content is not None and isinstance(page.raw_get("/Contents"), IndirectObject)
        }
        parts.append(Part(out.getvalue(), _with_contents(out.getvalue(), contents)))
    return parts


_TRAILER = re.compile(rb"trailer\s*<<(.*?)>>\s*startxref\s*(\d+)\s*%%EOF\s*\Z", re.S)


def _with_contents(pdf: bytes, contents: dict[IndirectObject, bytes]) -> bytes:
    """``pdf`` (as pypdf writes it: one cross-reference table) with the given content streams replaced, in an
    update appended to it (the way an editor saves a change): writing the part again cost more than PDFium's
    reading of its glyphs."""
    trailer = _TRAILER.search(pdf, max(0, len(pdf) - 1024))
    if not contents or trailer is None:
        return pdf
    size, root = re.search(rb"/Size (\d+)", trailer[1]), re.search(rb"/Root (\d+ \d+ R)", trailer[1])
    if size is None or root is None:
        return pdf
    update, offsets = bytearray(pdf if pdf.endswith(b"\n") else pdf + b"\n"), []
    for reference, content in contents.items():
        offsets.append((reference, len(update)))
        update += b"%d %d obj\n<< /Length %d >>\nstream\n" % (reference.idnum, reference.generation, len(content))
        update += content + b"\nendstream\nendobj\n"
    table = len(update)
    update += b"xref\n0 1\n0000000000 65535 f \n"
    for reference, offset in offsets:
        update += b"%d 1\n%010d %05d n \n" % (reference.idnum, offset, reference.generation)
    update += b"trailer\n<< /Size %s /Root %s /Prev %s >>\nstartxref\n%d\n%%%%EOF\n" % (
        size[1],
        root[1],
        trailer[2],
        table,
    )
    return bytes(update)


def _links_out(annotation) -> bool:
    """Whether an annotation is a link to an address outside the document (``/URI``), which names no page."""
    action = annotation.get("/A")
    return (
        annotation.get("/Subtype") == "/Link"
        and "/Dest" not in annotation
        and action is not None
        and action.get_object().get("/S") == "/URI"
    )


def _first_page_links(page) -> list:
    """The references of the page's link annotations that point to ``FIRST_PAGE_URI``."""
    found = []
    for annotation in page.get("/Annots", []) or []:
        link = annotation.get_object()
        action = link.get("/A")
        if link.get("/Subtype") == "/Link" and action is not None and action.get_object().get("/URI") == FIRST_PAGE_URI:
            found.append(link.indirect_reference)
    return found


def same_pages(part: bytes, alone: bytes) -> bool:
    """Whether ``part`` has the pages of ``alone``: as many, of the same size, every word at the same place."""
    ours, theirs = poppler.page_words(part), poppler.page_words(alone)
    if len(ours) != len(theirs):
        return False
    for a, b in zip(ours, theirs):
        if (round(a.width, 1), round(a.height, 1)) != (round(b.width, 1), round(b.height, 1)):
            return False
        if len(a.words) != len(b.words):
            return False
        for x, y in zip(a.words, b.words):
            if x.text != y.text or max(abs(x.x0 - y.x0), abs(x.top - y.top), abs(x.x1 - y.x1)) > _TOLERANCE_PT:
                return False
    return True


def render_together(
    template: str, documents: Sequence[str], *, timeout: float, max_pages: int = MAX_PAGES, compare: bool = True
) -> list[Part] | NotTogether:
    """One PDF per document from one wkhtmltopdf run, the last checked against its solo render (where ``compare``);
    NotTogether when the template or this run cannot be (the caller renders each alone). Raises what ``render_pdf``
    raises for the whole run, but a recipient's too long document makes the run ``NotTogether``, so that each is
    tried alone."""
    html = combined_html(template, documents)
    if isinstance(html, NotTogether):
        return html
    run_limit = max_pages * len(documents)
    try:
        parts = split(render_pdf(html, timeout=timeout, max_pages=run_limit), len(documents), max_pages=max_pages)
    except PartTooLong:  # alone, each finds out which
        return NotTogether("a document runs past the page limit", lasting=False)
    except SplitError as exc:
        return NotTogether(f"the run did not split: {exc}")
    except RenderError as exc:
        if exc.message == too_long(run_limit):  # one of them at least is too long: alone, each finds out which
            return NotTogether("a document runs past the page limit", lasting=False)
        raise
    # The last part, after the most page breaks: the first starts the run as a solo render starts, and matches
    # where a later one does not (a <body> margin is not carried over a forced break: 6 px off with the default).
    if compare and not same_pages(parts[-1].pdf, render_pdf(documents[-1], timeout=timeout, max_pages=max_pages)):
        return NotTogether("a document rendered together differs from the same one rendered alone")
    return parts


#: Templates (by their text's digest: the verdict is the text's) this process found cannot be rendered together.
_ALONE: dict[bytes, str] = {}
#: Templates whose run matched its solo render in this process → the runs since the last one compared.
_MATCHED: dict[bytes, int] = {}
#: Of a template that matched, one run in this many is compared again (the others skip the solo render).
CHECK_EVERY = 10


def render_chunk_together(*, version_id: int, template: str, rows: dict[int, dict], timeout: float) -> dict[int, Part]:
    """The PDFs of a chunk's requests (request id → its row's values) from one run, or {} when they are to be
    rendered one by one: a template that cannot be (found once, logged once), a row that cannot be filled in (it
    fails on its own with its message), or a run that failed or ran too long (each alone pins it to its row)."""
    digest = hashlib.sha256(template.encode("utf-8")).digest()
    if digest in _ALONE:
        return {}
    filled = {}
    for request_id, row in rows.items():
        try:
            filled[request_id] = render_html(template, row)
        except TemplateError:
            pass
    if len(filled) < 2:
        return {}
    since = _MATCHED.get(digest)
    compare = since is None or since + 1 >= CHECK_EVERY
    try:
        parts = render_together(template, list(filled.values()), timeout=timeout, compare=compare)
    except RenderError as exc:
        parts = NotTogether(f"the run failed: {exc.message}", lasting=False)
    if isinstance(parts, NotTogether):
        if parts.lasting:
            _ALONE[digest] = parts.reason
        log(logger, logging.INFO, "rendered one by one", template_version_id=version_id, reason=parts.reason)
        return {}
    _MATCHED[digest] = 0 if compare else since + 1
    return dict(zip(filled, parts))

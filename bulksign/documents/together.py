"""Several recipients' filled HTML documents in one wkhtmltopdf run, split back into one PDF each, each part checked.
More in docs/architecture/html-together.md."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from io import BytesIO

from pypdf import PdfReader, PdfWriter
from pypdf.generic import ArrayObject, IndirectObject, NameObject

from bulksign.core.errors import BulksignError
from bulksign.core.logs import log
from bulksign.core.messages import N_
from bulksign.documents import font_programs, html_frame, html_text, part_check, pdf_fonts, pdf_objects
from bulksign.documents.html_frame import FIRST_PAGE_URI
from bulksign.documents.pdf import MAX_PAGES, RenderError, render_pdf, too_long

logger = logging.getLogger(__name__)
_JINJA = re.compile(r"{{|{%|{#")
_STYLE = re.compile(r"<style\b[^>]*>(.*?)</style\s*>", re.I | re.S)
_FONT_FACE = re.compile(r"@font-face", re.I)
_SEE_THROUGH = re.compile(r"opacity\s*:\s*0*\.", re.I)


@dataclass(frozen=True)
class NotTogether:
    """Why documents are rendered one by one; ``message`` is for staff (the template page), ``detail`` for the
    log."""

    message: N_
    #: Whether it is the template's doing (every run of its version would be refused) or this run's rows'.
    lasting: bool = True
    detail: str = ""


@dataclass(frozen=True)
class Part:
    """One recipient's PDF split off a run."""

    pdf: bytes
    #: The same PDF with the text objects of its pages left out, for finding its marks (``signature_box``): the
    #: same drawings at the same places, which PDFium reads without reading every glyph. The text objects go only
    #: where all of a page's are Qt's plain ones (``pdf_fonts``); the other pages stay as they are.
    marks_view: bytes


class SplitError(BulksignError):
    """The run's PDF does not split into the documents it was made of."""


class PartTooLong(SplitError):
    """A part has more pages than one document may have."""


NOT_SPLIT = N_("its documents printed together did not come apart page by page (a link within the document?)")
RESERVED_NAME = N_("it names the renderer's own frame (%(name)s)", name=html_frame.RESERVED)
FONT_FACE = N_(
    "it embeds a font (@font-face), whose letters are drawn as shapes that cannot be checked; use a font installed "
    "on the server (DejaVu, Liberation, FreeSans)"
)
SEE_THROUGH = N_(
    "part of it is semi-transparent (opacity), which the renderer prints as a picture that cannot be checked; use a "
    "lighter colour instead"
)
PLACEHOLDER_IN_HEAD = N_("its head (before the body) holds a placeholder, so every recipient's page is set up apart")


def template_problem(source: str) -> NotTogether | None:
    """Why no run of ``source``'s documents is tried, seen in the template itself, or None."""
    if html_frame.RESERVED in source:
        return NotTogether(RESERVED_NAME)
    if _FONT_FACE.search(source):
        return NotTogether(FONT_FACE)
    if _SEE_THROUGH.search(source):
        return NotTogether(SEE_THROUGH)
    if _JINJA.search(html_frame.split(source).head):
        return NotTogether(PLACEHOLDER_IN_HEAD)
    return None


@dataclass(frozen=True)
class Filled:
    """A recipient's filled document, read once: where its body starts, what it holds, which run it may join."""

    document: html_frame.Document
    scanned: html_text.Scanned
    counters: tuple[str, ...]

    @classmethod
    def of(cls, filled: str) -> Filled:
        document = html_frame.split(filled)
        return cls(document, html_text.scan(document.body), tuple(html_frame.counter_names(filled)))

    @property
    def run_key(self) -> tuple:
        """Documents may share a run when everything the body does not hold is the same: the head, the style
        sheets in the body (which apply to the whole run), the counters the frame starts."""
        return self.document.head, tuple(self.scanned.styles), self.counters

    def framed(self) -> str:
        return html_frame.framed(self.document.head, [self.document.body], counters=self.counters)


def render_alone(filled: str, *, timeout: float, max_pages: int = MAX_PAGES) -> bytes:
    """One recipient's PDF, framed as in a run (``html_frame``), the first-page link taken out."""
    pdf = render_pdf(Filled.of(filled).framed(), timeout=timeout, max_pages=max_pages)
    writer = PdfWriter(clone_from=PdfReader(BytesIO(pdf)))
    for page in writer.pages:
        _take_out(page, set(_first_page_links(page)))
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def render_run(filled: Sequence[Filled], *, timeout: float, max_pages: int = MAX_PAGES) -> list[Part] | NotTogether:
    """One PDF per document of ``filled`` (each with the same ``run_key``) from one wkhtmltopdf run, every part
    checked; NotTogether when the run cannot be split or a part fails its check. Raises what ``render_pdf``
    raises for the whole run, but a recipient's too long document makes the run ``NotTogether`` (not lasting), so
    that each is tried alone."""
    head = filled[0].document.head
    html = html_frame.framed(head, [f.document.body for f in filled], counters=filled[0].counters)
    run_limit = max_pages * len(filled)
    try:
        parts = split(render_pdf(html, timeout=timeout, max_pages=run_limit), len(filled), max_pages=max_pages)
    except PartTooLong:
        return NotTogether(too_long(max_pages), lasting=False)
    except SplitError as exc:
        return NotTogether(NOT_SPLIT, detail=str(exc))
    except RenderError as exc:
        if exc.message == too_long(run_limit):  # one of them at least is too long: alone, each finds out which
            return NotTogether(too_long(max_pages), lasting=False)
        raise
    sheet = part_check.Sheet.of("\n".join([*_STYLE.findall(head), *filled[0].scanned.styles]))
    for number, (document, (_, shown)) in enumerate(zip(filled, parts)):
        problem = part_check.problem(part_check.Expected.of(document.scanned, sheet), shown, first=parts[0][1])
        if problem:
            return NotTogether(problem.message, detail=f"part {number + 1} of {len(filled)}: {problem.name}")
    return [part for part, _ in parts]


@dataclass(frozen=True)
class Chunk:
    """A chunk's documents rendered together (request id → its part); the others are rendered one by one."""

    parts: dict[int, Part]
    #: Why the template's documents go one by one from now on, when a run found it (None: nothing found).
    refused: NotTogether | None = None


def render_filled(filled: Mapping[int, str], *, timeout: float) -> Chunk:
    """A chunk's filled documents (request id → its HTML) in as few runs as they allow. Left to be rendered one by
    one: a body that does not close what it opens, a document alone of its kind, every document of a run that
    failed or ran too long (each alone pins it to its row), and all of them when a run finds the template at fault
    (``refused``)."""
    runs: dict[tuple, dict[int, Filled]] = {}
    for request_id, html in filled.items():
        document = Filled.of(html)
        if document.scanned.unbalanced is None:
            runs.setdefault(document.run_key, {})[request_id] = document
    parts: dict[int, Part] = {}
    for documents in runs.values():
        if len(documents) < 2:
            continue
        try:
            run = render_run(list(documents.values()), timeout=timeout)
        except RenderError as exc:
            # A renderer's message may be plain text (``Message``); the refusal is kept as a message to translate.
            message = exc.message if isinstance(exc.message, N_) else N_(str(exc.message))
            run = NotTogether(message, lasting=False)
        if isinstance(run, NotTogether):
            if run.lasting:
                return Chunk({}, run)
            log(logger, logging.INFO, "rendered one by one", reason=run.message.english, documents=len(documents))
            continue
        parts.update(zip(documents, run))
    return Chunk(parts)


def split(pdf: bytes, count: int, *, max_pages: int = MAX_PAGES) -> list[tuple[Part, part_check.Shown]]:
    """The run's PDF as ``count`` parts, each the pages from one first-page link to the next, the links taken out,
    the fonts cut down to the part's own glyphs, with what each shows (for ``part_check``); SplitError if the run
    does not have ``count`` first pages, the first on its first page, a link within the document, or a font that
    cannot be cut down; PartTooLong for a part past ``max_pages``."""
    reader = PdfReader(BytesIO(pdf))
    links = [_first_page_links(page) for page in reader.pages]
    firsts = [index for index, ours in enumerate(links) if ours]
    if len(firsts) != count or firsts[:1] != [0] or any(len(ours) > 1 for ours in links):
        raise SplitError(f"{len(firsts)} first pages found for {count} documents (at {firsts[:10]})")
    bounds = list(zip(firsts, [*firsts[1:], len(reader.pages)]))
    if any(end - start > max_pages for start, end in bounds):
        raise PartTooLong(f"a document runs past {max_pages} pages")
    starts = {index: _start(reader.pages[index], links[index][0]) for index in firsts}
    try:
        objects = pdf_objects.RunObjects(pdf, reader)
    except pdf_objects.ObjectsError as exc:
        raise SplitError(str(exc)) from None
    uris = [_take_out(page, set(ours)) for page, ours in zip(reader.pages, links)]
    parts = []
    fonts, seen = font_programs.RunFonts(), pdf_fonts.TextObjects()
    for start, end in bounds:
        pages = reader.pages[start:end]
        try:
            kept = pdf_fonts.keep_own_glyphs(pages, run=fonts, seen=seen)
            written = objects.part(pages, kept.objects)
        except pdf_fonts.FontError as exc:
            raise SplitError(str(exc)) from None
        except pdf_objects.ObjectsError as exc:
            raise SplitError(str(exc)) from None
        contents = {
            page.raw_get("/Contents"): content
            for page, content in zip(pages, kept.without_text)
            if content is not None and isinstance(page.raw_get("/Contents"), IndirectObject)
        }
        shown = part_check.Shown(
            pdf=written,
            start=starts[start],
            pages=tuple(_size(page) for page in pages),
            characters=part_check.glyph_letters(kept.text),
            uris=frozenset(uri for index in range(start, end) for uri in uris[index]),
            images=len({id(image) for page in pages for image in _images(page)}),
        )
        parts.append((Part(written, _with_contents(written, contents)), shown))
    return parts


def _take_out(page, ours: set) -> list[str]:
    """Take the first-page links ``ours`` out of ``page``'s annotations; the addresses its other links go to.
    SplitError for an annotation other than a link out of the document (a link to a page of it would carry that
    page along into a part, and with one anchor name in every body it may be another recipient's page)."""
    kept = [a for a in page.get("/Annots", []) if a.get_object().indirect_reference not in ours]
    if not all(_links_out(annotation.get_object()) for annotation in kept):
        raise SplitError("a page holds a link within the document, or an annotation other than a link")
    if kept:
        page[NameObject("/Annots")] = ArrayObject(kept)
    elif "/Annots" in page:
        del page["/Annots"]
    return [str(a.get_object()["/A"].get_object().get("/URI", "")) for a in kept]


def _start(page, link_reference) -> tuple[float, ...]:
    """Where a first-page link lies on its page, with the page's size: the frame's top left corner."""
    rect = [round(float(v), 2) for v in link_reference.get_object()["/Rect"]]
    return (*rect, *_size(page))


def _size(page) -> tuple[float, float]:
    box = page.mediabox
    return round(float(box.width), 2), round(float(box.height), 2)


def _images(page) -> list:
    """The image objects a page's resources name (one object for an image drawn many times)."""
    xobjects = page.get("/Resources", {}).get("/XObject", {})
    return [x.get_object() for x in xobjects.values() if x.get_object().get("/Subtype") == "/Image"]


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

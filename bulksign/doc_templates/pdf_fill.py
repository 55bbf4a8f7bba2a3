"""PDF templates filled per recipient and flattened (their fields and placed boxes as ``pdf_forms`` reads them), and
the calls of the template kind (``template_kinds.KINDS["pdf"]``).
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from io import BytesIO
from typing import Any, cast

from pypdf import PageObject, PdfReader, PdfWriter
from pypdf.generic import ArrayObject, DictionaryObject, IndirectObject, NameObject, RectangleObject
from pypdf.generic._appearance_stream import BaseStreamConfig, TextAlignment, TextStreamAppearance
from pypdf.generic._font import Font

from bulksign.core.messages import N_
from bulksign.doc_templates import pdf_cleaning
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.pdf_form_fields import renamed, renames
from bulksign.doc_templates.pdf_forms import (
    MIN_FONT_SIZE,
    FieldBox,
    check_boxes,
    check_signature_place,
    is_variable,
    placed_boxes,
    read_form,
    signature_place,
    widgets,
)
from bulksign.documents.field_boxes import is_mark
from bulksign.documents.signature_box import SignatureBox
from bulksign.models import TemplateVersion

#: Longest value one field prints; a longer one is a mistake in the recipients file.
MAX_VALUE_CHARS = 2000

FONT_PATH = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
#: What the embedded font keeps of DejaVu Sans: Latin (with Extended-A/B), Greek, Cyrillic, punctuation,
#: currency, № — ~80 KB instead of 750 KB in every document.
FONT_RANGES = (
    (0x20, 0x7E),
    (0xA0, 0x24F),
    (0x370, 0x3FF),
    (0x400, 0x52F),
    (0x2010, 0x205E),
    (0x20A0, 0x20BF),
    (0x2116, 0x2122),
)
_FONT_NAME = "/BsFont"


@functools.lru_cache(maxsize=1)
def _font() -> Font:
    """DejaVu Sans cut to ``FONT_RANGES``, as pypdf's font model; its maps are built once, not per field."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    options = subset.Options()
    options.hinting = False
    options.layout_features = []
    options.drop_tables += ["FFTM", "GSUB", "GPOS", "GDEF"]  # pypdf lays text out without shaping
    font = TTFont(FONT_PATH)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[c for first, last in FONT_RANGES for c in range(first, last + 1)])
    subsetter.subset(font)
    buffer = BytesIO()
    font.save(buffer)

    class _MappedFont(Font):
        # pypdf re-reads the font file on every appearance it lays out (~1 ms per field); the maps never change.
        @functools.cached_property
        def _maps(self) -> tuple[dict[str, str], dict[str, bytes]]:
            return Font._get_typographic_maps(self)

        def _get_typographic_maps(self) -> tuple[dict[str, str], dict[str, bytes]]:
            return self._maps

    parsed = Font.from_truetype_font_file(buffer)
    return _MappedFont(**{f.name: getattr(parsed, f.name) for f in dataclasses.fields(parsed)})


@dataclass(frozen=True)
class _Prepared:
    """A template version ready to fill: the flattened empty document and where each value goes."""

    base: bytes
    boxes: tuple[FieldBox, ...]
    #: Where the signature goes (the field or box named ``signature``), the same for every recipient.
    signature: SignatureBox | None


# A few versions at a time: a render worker fills one batch's version thousands of times; each entry holds the
# template (up to MAX_PDF_BYTES) and its prepared copy.
@functools.lru_cache(maxsize=4)
def _prepare(data: bytes, placed: tuple[FieldBox, ...], own: tuple[tuple[str, str], ...]) -> _Prepared:
    """Flatten the empty form once per process: its fields out, the font in (~0.3 s for the font, then ms). ``own``:
    the form's fields staff assigned, each renamed to what it became (``pdf_form_fields.renames``)."""

    fields = renamed(read_form(data).fields, own)
    # A party's place and a signer's field are left empty: sealing stamps the one, a later step the other.
    boxes = tuple(b for b in (*fields, *placed) if not is_mark(b.name))
    signature = signature_place((*fields, *placed))
    reader = PdfReader(BytesIO(data))
    # Saved templates have none left (``clean``); versions saved before that was done still carry it.
    pdf_cleaning.strip_active_content(reader)
    writer = PdfWriter(clone_from=reader)
    for page in writer.pages:
        if "/Annots" in page:
            for widget in list(widgets(page)):
                if not is_variable(widget):
                    _paint_as_it_looks(writer, page, widget)
            annotations = cast(ArrayObject, page["/Annots"])
            others = [a for a in annotations if a.get_object().get("/Subtype") != "/Widget"]
            if others:
                page[NameObject("/Annots")] = type(annotations)(others)
            else:
                del page["/Annots"]
    if "/AcroForm" in writer.root_object:
        del writer.root_object["/AcroForm"]
    font = _font()
    font_ref = None
    for index in sorted({b.page for b in boxes}):
        resources = writer.pages[index].setdefault(NameObject("/Resources"), DictionaryObject()).get_object()
        fonts = resources.setdefault(NameObject("/Font"), DictionaryObject()).get_object()
        if font_ref is None:
            font_ref = font._add_to_writer(writer, fonts, NameObject(_FONT_NAME))
            _compress_font_file(font_ref)
        else:
            fonts[NameObject(_FONT_NAME)] = font_ref
    writer.compress_identical_objects(remove_duplicates=False, remove_unreferenced=True)
    out = BytesIO()
    writer.write(out)
    return _Prepared(base=out.getvalue(), boxes=boxes, signature=signature)


def _compress_font_file(font_ref: IndirectObject) -> None:
    """pypdf embeds the font program uncompressed (80 KB); deflated it is about half, in every document."""

    descendants = cast(ArrayObject, cast(DictionaryObject, font_ref.get_object())["/DescendantFonts"])
    descriptor = descendants[0].get_object()["/FontDescriptor"].get_object()
    key = NameObject("/FontFile2")
    stream = descriptor[key].get_object()
    compressed = stream.flate_encode()
    compressed[NameObject("/Length1")] = stream["/Length1"]
    descriptor[key] = stream.indirect_reference.pdf._add_object(compressed)


def _paint_as_it_looks(writer: PdfWriter, page: PageObject, widget: DictionaryObject) -> None:
    """A check box, radio button or push button keeps its current look, painted into the page."""
    appearance = widget.get("/AP")
    if appearance is None or int(widget.get("/F", 0)) & 2:  # no look, or hidden
        return
    normal = appearance.get_object().get("/N")
    if normal is None:
        return
    normal = normal.get_object()
    if "/BBox" not in normal:  # a dictionary of states: the one the widget shows
        state = widget.get("/AS")
        normal = normal.get(state).get_object() if state is not None and state in normal else None
    if normal is None:
        return
    x1, y1, x2, y2 = (float(v) for v in cast(ArrayObject, widget["/Rect"]))
    writer._add_apstream_object(page, normal, f"BsW{id(widget)}", min(x1, x2), min(y1, y2))


def _text(box: FieldBox, row: Mapping[str, Any]) -> str:
    value = row.get(box.name)
    text = "" if value is None else str(value)
    if len(text) > MAX_VALUE_CHARS:
        raise TemplateError(
            N_(
                'The value for "%(name)s" has %(length)d characters; a PDF field takes at most %(limit)d.',
                name=box.name,
                length=len(text),
                limit=MAX_VALUE_CHARS,
            )
        )
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text if box.multiline else " ".join(text.split("\n"))


def _check_glyphs(name: str, text: str) -> None:
    reverse, _ = _font()._get_typographic_maps()
    missing = list(dict.fromkeys(c for c in text if c not in reverse and c != "\n"))
    if missing:
        raise TemplateError(
            N_(
                'The value for "%(name)s" has characters the PDF\'s font cannot show: %(chars)s.',
                name=name,
                chars=" ".join(missing[:10]),
            )
        )


def _width(text: str, size: float) -> float:
    font = _font()
    reverse, _ = font._get_typographic_maps()
    widths = font.character_widths
    return sum(widths.get(reverse.get(c, ""), widths["default"]) for c in text) / 1000 * size


def _wrapped(text: str, room: float, size: float) -> list[str]:
    """Greedy word wrap to ``room`` points (pypdf wraps only auto-sized text, measuring it with the wrong widths)."""
    lines = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            candidate = f"{line} {word}" if line else word
            if line and _width(candidate, size) > room:
                lines.append(line)
                line = word
            else:
                line = candidate
        lines.append(line)
    return lines


def _layout(box: FieldBox, text: str) -> tuple[str, float]:
    """The text as lines and its font size: the box's size, smaller where the text would not fit (so nothing of a
    recipient's value is cut off in the signed record); 0 lets pypdf fit a single line to the box."""
    w, h = (box.h, box.w) if box.rotation in (90, 270) else (box.w, box.h)
    room = w - 4  # pypdf's padding: 2 pt on each side
    if box.comb:
        return text, box.font_size or round(min(h * 0.7, 12.0), 1)
    if not box.multiline:
        if not box.font_size or _width(text, box.font_size) <= room:
            return text, box.font_size
        return text, max(MIN_FONT_SIZE, round(box.font_size * room / _width(text, box.font_size), 1))
    bbox = _font().font_descriptor.bbox
    leading = (bbox[3] - bbox[1]) / 1000
    size = box.font_size or 12.0
    while True:
        lines = _wrapped(text, room, size)
        if size <= MIN_FONT_SIZE or size * (1 + (len(lines) - 1) * leading) <= h - 2:
            return "\n".join(lines), size
        size = max(MIN_FONT_SIZE, round(size - 0.5, 1))


def _appearance(box: FieldBox, text: str) -> tuple[bytes, list[float], list[float] | None]:
    """pypdf's layout of one value: the content stream, its bounding box and matrix (for rotated fields)."""

    w, h = (box.h, box.w) if box.rotation in (90, 270) else (box.w, box.h)
    lines, size = _layout(box, text)
    stream = TextStreamAppearance(
        BaseStreamConfig(rectangle=RectangleObject((0, 0, w, h)), border_width=0, rotation=box.rotation),
        lines,
        font=_font(),
        font_name=_FONT_NAME,
        font_size=size,
        # Only the name is used: the font itself is the one embedded in the base document.
        font_resource=DictionaryObject({NameObject("/Type"): NameObject("/Font")}),
        is_multiline=box.multiline,
        alignment=TextAlignment(box.align if box.align in (0, 1, 2) else 0),
        is_comb=box.comb is not None,
        max_length=box.comb,
    )
    matrix = [float(v) for v in cast(ArrayObject, stream["/Matrix"])] if "/Matrix" in stream else None
    return stream.get_data(), [float(v) for v in cast(ArrayObject, stream["/BBox"])], matrix


def _painted(box: FieldBox, content: bytes, bbox: list[float], matrix: list[float] | None) -> bytes:
    """An appearance painted where a viewer shows its widget: moved to the box's corner, turned by its matrix and
    clipped to its bounding box (PDF 32000-1, 12.5.5), as its form XObject would be. Inline rather than as an
    XObject: a third fewer objects to write per document (the pipeline's target is 20× wkhtmltopdf)."""
    a, b, c, d, e, f = matrix or (1, 0, 0, 1, 0, 0)
    x0, y0, x1, y1 = bbox
    return (
        (
            b"q 1 0 0 1 %.3f %.3f cm %.4f %.4f %.4f %.4f %.3f %.3f cm %.3f %.3f %.3f %.3f re W n\n"
            % (box.x, box.y, a, b, c, d, e, f, x0, y0, x1 - x0, y1 - y0)
        )
        + content
        + b"\nQ\n"
    )


def fill(
    data: bytes, row: Mapping[str, Any], *, placed: tuple[FieldBox, ...] = (), own: tuple[tuple[str, str], ...] = ()
) -> bytes:
    """One recipient's PDF: ``data``'s fields (``own``: those assigned, renamed) and the ``placed`` boxes filled from
    ``row``, nothing editable."""
    from pyhanko.pdf_utils import generic
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter

    prepared = _prepare(data, tuple(placed), own)
    texts = [(box, _text(box, row)) for box in prepared.boxes]
    for box, text in texts:
        _check_glyphs(box.name, text)
    by_page: dict[int, list[bytes]] = {}
    for box, text in texts:
        if text:
            by_page.setdefault(box.page, []).append(_painted(box, *_appearance(box, text)))
    writer = IncrementalPdfFileWriter(BytesIO(prepared.base))
    for page, parts in by_page.items():
        # One new content stream per page; the font is already in the page's resources (``_prepare``).
        writer.add_stream_to_page(page, writer.add_object(generic.StreamObject(stream_data=b"".join(parts))))
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


# --- the template kind (``template_kinds.KINDS["pdf"]``) ------------------------------------------------------


def place(
    data: bytes, boxes: Iterable[Mapping[str, Any]], *, own: tuple[tuple[str, str], ...] = ()
) -> tuple[list[str], list[dict[str, Any]] | None]:
    """Check boxes staff placed on ``data``'s pages (``own``: the form's fields assigned, renamed) and fill it once
    with sample values: the version's variables (form fields and boxes) and its boxes as stored; TemplateError naming
    a wrong box."""
    form = read_form(data)
    form = dataclasses.replace(form, fields=renamed(form.fields, own))
    placed = check_boxes(form, boxes)
    check_signature_place(data, (*form.fields, *placed))
    names = sorted({f.name for f in (*form.fields, *placed) if not is_mark(f.name)})
    fill(data, {name: f"[{name}]" for name in names}, placed=placed, own=own)
    return names, [b.to_json() for b in placed] or None


def variables(data: bytes) -> list[str]:
    """The form's field names, sorted; TemplateError for a PDF that cannot be a template (checked by filling
    it once with sample values, as HTML and Word templates are)."""
    form = read_form(data)
    check_signature_place(data, form.fields)
    fill(data, {name: f"[{name}]" for name in form.variables})
    return form.variables


def prepare(version: TemplateVersion, source: bytes, row: Mapping[str, Any], *, timeout: float) -> Callable[[], bytes]:
    """One recipient's PDF from a PDF template version, filled now (milliseconds: ``timeout`` unused); the
    returned call only hands it over, as ``template_kinds`` expects of every kind."""
    filled = fill(source, row, placed=placed_boxes(version), own=renames(version.pdf_form_fields))
    return lambda: filled


def signature_box(
    source: bytes, *, placed: tuple[FieldBox, ...] = (), own: tuple[tuple[str, str], ...] = ()
) -> SignatureBox | None:
    """Where the signature goes in every document of a PDF template (its field or box named ``signature``)."""
    return _prepare(source, placed, own).signature

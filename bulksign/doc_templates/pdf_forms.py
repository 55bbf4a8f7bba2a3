"""PDF templates: a fillable form's fields, or boxes staff place on a plain PDF, filled per recipient and flattened.

At save (``clean``) the file's active content is taken out (``pdf_cleaning``: JavaScript, actions but https links
and moves within the document, embedded files, rich media, XFA) and staff are told what; the cleaned file is the
one kept, so every preview, render and sealed copy starts from it.

Per template version (once per process): the form's widgets and its AcroForm are taken out of the file,
check boxes and other widgets that are not variables are painted as they look, and one font (DejaVu Sans,
Latin, Cyrillic and Greek) is embedded on the pages that get values. Per recipient: each value becomes a
text appearance laid out by pypdf (alignment, wrapping, comb fields) and painted onto its page in an
incremental update written by pyHanko, which reads only the objects it touches. Nothing is left to edit,
no browser or office suite runs, and a 2-page contract takes ~3 ms instead of wkhtmltopdf's ~80 ms.

Coordinates are the PDF's own: points in the page's user space, y upwards (as ``/Rect``, as
``signature_box.SignatureBox``); ``page`` counts from 0.
"""
from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from io import BytesIO

from bulksign.doc_templates import pdf_cleaning
from bulksign.doc_templates.errors import TemplateError
from bulksign.core.messages import N_
from bulksign.documents.signature_box import SIGNATURE_VARIABLE, SignatureBox, SignatureBoxError, check_box

#: Largest PDF template, most pages and most fields or boxes it may have.
MAX_PDF_BYTES = 20 * 1024 * 1024
MAX_PAGES = 100
MAX_FIELDS = 300
#: Longest value one field prints; a longer one is a mistake in the recipients file.
MAX_VALUE_CHARS = 2000
#: Font sizes staff may give a placed box (points); 0 fits the text to the box.
MIN_FONT_SIZE, MAX_FONT_SIZE = 4.0, 72.0
#: Smallest width and height of a placed box (points).
MIN_BOX_SIDE = 4.0
#: Variable names a placed box may take: what a column header can be.
BOX_NAME = re.compile(r"^[^\x00-\x1f{}<>]{1,100}$")

FONT_PATH = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
#: What the embedded font keeps of DejaVu Sans: Latin (with Extended-A/B), Greek, Cyrillic, punctuation,
#: currency, № — ~80 KB instead of 750 KB in every document.
FONT_RANGES = ((0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x52F), (0x2010, 0x205E), (0x20A0, 0x20BF),
               (0x2116, 0x2122))
_FONT_NAME = "/BsFont"

# Field flags (PDF 32000-1, 12.7.4.3): multiline and comb text fields.
_MULTILINE = 1 << 12
_COMB = 1 << 24


@dataclass(frozen=True)
class FieldBox:
    """One place a value is printed: a form field's widget, or a box staff placed on a page."""

    #: The variable, i.e. the column of the recipients file (``signature``: where the signature goes).
    name: str
    page: int
    x: float
    y: float
    w: float
    h: float
    #: Points; 0 fits the text to the box.
    font_size: float = 0.0
    multiline: bool = False
    #: 0 left, 1 centre, 2 right (a field's ``/Q``).
    align: int = 0
    #: A comb field's number of cells; None for ordinary text.
    comb: int | None = None
    #: A field's rotation (``/MK /R``): 0, 90, 180 or 270.
    rotation: int = 0

    def to_json(self) -> dict:
        """As stored in ``TemplateVersion.pdf_boxes`` (staff-placed boxes)."""
        return {"name": self.name, "page": self.page, "x": round(self.x, 2), "y": round(self.y, 2),
                "w": round(self.w, 2), "h": round(self.h, 2), "font_size": self.font_size,
                "multiline": self.multiline}

    @classmethod
    def from_json(cls, data: Mapping) -> FieldBox:
        """A box stored by ``to_json``."""
        return cls(name=data["name"], page=int(data["page"]), x=float(data["x"]), y=float(data["y"]),
                   w=float(data["w"]), h=float(data["h"]), font_size=float(data.get("font_size") or 0),
                   multiline=bool(data.get("multiline")))


@dataclass(frozen=True)
class Page:
    """A page as a viewer shows it: its crop box (user space) and rotation."""

    left: float
    bottom: float
    width: float
    height: float
    rotation: int


@dataclass(frozen=True)
class PdfForm:
    """What a PDF template holds: its pages and the places values go (form fields)."""

    pages: tuple[Page, ...]
    fields: tuple[FieldBox, ...]

    @property
    def variables(self) -> list[str]:
        return sorted({f.name for f in self.fields} - {SIGNATURE_VARIABLE})


def _refused(message: N_) -> TemplateError:
    return TemplateError(message)


def read_form(data: bytes) -> PdfForm:
    """The pages and fields of an uploaded PDF; TemplateError saying why it cannot be a template."""
    with _reading():
        reader = _opened(data)
        pages = tuple(_page(p) for p in reader.pages)
        fields = tuple(box for index, page in enumerate(reader.pages) for box in _page_fields(page, index))
    if len(fields) > MAX_FIELDS:
        raise _refused(N_("The PDF has %(fields)d form fields; the limit is %(limit)d.", fields=len(fields),
                          limit=MAX_FIELDS))
    return PdfForm(pages=pages, fields=fields)


def clean(data: bytes) -> pdf_cleaning.Cleaned:
    """An uploaded PDF as a template keeps it: without active content (``pdf_cleaning``), saying what was taken out;
    the upload itself, byte for byte, when it has none. TemplateError for a file that cannot be read or cleaned."""
    from pypdf import PdfWriter

    with _reading():
        reader = _opened(data)
        removed = pdf_cleaning.strip_active_content(reader)
    if not removed:
        return pdf_cleaning.Cleaned(data=data)
    out = BytesIO()
    with _reading(writing=True):
        # Cloned from the catalog: only what the cleaned graph still reaches is written.
        PdfWriter(clone_from=reader).write(out)
    return pdf_cleaning.Cleaned(data=out.getvalue(), removed=removed)


#: What pypdf raises on a broken file, besides its own errors.
_UNREADABLE = (ValueError, KeyError, TypeError, AttributeError, IndexError, AssertionError, OSError)


@contextmanager
def _reading(*, writing: bool = False):
    """pypdf's failures on a broken or hostile file (in reading it, or ``writing`` it again) as TemplateErrors."""
    from pypdf.errors import PyPdfError

    try:
        yield
    except TemplateError:
        raise
    except RecursionError:
        raise pdf_cleaning.nested_too_deeply() from None
    except (PyPdfError, *_UNREADABLE) as exc:
        if isinstance(exc.__cause__, RecursionError):  # pypdf's own error for a dictionary nested too deeply
            raise pdf_cleaning.nested_too_deeply() from None
        if writing:
            raise _refused(N_("The PDF could not be written again without its active content (%(problem)s). Open "
                              "it in a PDF viewer and print it as a new PDF.", problem=type(exc).__name__)) from None
        raise _refused(N_("The PDF could not be read (%(problem)s). Open it in a PDF viewer and save or print it "
                          "as a new PDF.", problem=type(exc).__name__)) from None


def _opened(data: bytes):
    """``data`` as a pypdf reader, refused when it is too large, not a PDF, encrypted, without pages or too long."""
    from pypdf import PdfReader

    if len(data) > MAX_PDF_BYTES:
        raise _refused(N_("The PDF has %(size).1f MB; the limit is %(limit)d MB.",
                          size=len(data) / 1024 / 1024, limit=MAX_PDF_BYTES // 1024 // 1024))
    if b"%PDF-" not in data[:1024]:
        raise _refused(N_("The file is not a PDF."))
    reader = PdfReader(BytesIO(data), strict=False)
    if reader.is_encrypted:
        raise _refused(N_("The PDF is encrypted or password-protected. Save or print it as a PDF without "
                          "protection and upload that."))
    count = len(reader.pages)
    if count == 0:
        raise _refused(N_("The PDF has no pages."))
    if count > MAX_PAGES:
        raise _refused(N_("The PDF has %(pages)d pages; the limit is %(limit)d.", pages=count, limit=MAX_PAGES))
    return reader


def _page(page) -> Page:
    box = page.cropbox
    return Page(left=float(box.left), bottom=float(box.bottom), width=float(box.width), height=float(box.height),
                rotation=page.rotation % 360)


def _widgets(page) -> Iterable:
    for annotation in page.get("/Annots") or ():
        annotation = annotation.get_object()
        if annotation.get("/Subtype") == "/Widget":
            yield annotation


def _qualified_name(widget) -> str:
    """``parent.child`` names, as forms number repeated fields; a widget without ``/T`` takes its parent's."""
    parts, node, seen = [], widget, 0
    while node is not None and seen < 32:
        if "/T" in node:
            parts.append(str(node["/T"]))
        node = node.get("/Parent")
        node = node.get_object() if node is not None else None
        seen += 1
    return ".".join(reversed(parts))


def _inherited(widget, key: str, default=None):
    node, seen = widget, 0
    while node is not None and seen < 32:
        if key in node:
            return node[key]
        node = node.get("/Parent")
        node = node.get_object() if node is not None else None
        seen += 1
    return default


def _font_size(widget) -> float:
    da = str(_inherited(widget, "/DA", "") or "")
    match = re.search(r"([\d.]+)\s+Tf", da)
    return float(match.group(1)) if match else 0.0


def _page_fields(page, index: int) -> Iterable[FieldBox]:
    """The variables' boxes on one page: text and choice fields, and any field named ``signature``."""
    for widget in _widgets(page):
        name = _qualified_name(widget)
        kind = _inherited(widget, "/FT")
        if not name or (kind not in ("/Tx", "/Ch", "/Sig") and name != SIGNATURE_VARIABLE):
            continue
        if kind == "/Sig" and name != SIGNATURE_VARIABLE:
            continue  # someone else's signature field: painted as it looks, like any other widget
        x1, y1, x2, y2 = (float(v) for v in widget["/Rect"])
        flags = int(_inherited(widget, "/Ff", 0) or 0)
        max_length = _inherited(widget, "/MaxLen")
        mk = widget.get("/MK")
        yield FieldBox(name=name, page=index, x=min(x1, x2), y=min(y1, y2), w=abs(x2 - x1), h=abs(y2 - y1),
                       font_size=_font_size(widget), multiline=bool(flags & _MULTILINE),
                       align=int(_inherited(widget, "/Q", 0) or 0),
                       comb=int(max_length) if flags & _COMB and max_length else None,
                       rotation=int(mk.get_object().get("/R", 0)) % 360 if mk is not None else 0)


def check_boxes(form: PdfForm, boxes: Iterable[Mapping]) -> tuple[FieldBox, ...]:
    """Boxes staff placed (``name``, ``page``, ``x``, ``y``, ``w``, ``h``, ``font_size``), checked against the
    pages; TemplateError naming the first wrong one."""
    checked = []
    for number, raw in enumerate(boxes, start=1):
        try:
            box = FieldBox(name=str(raw["name"]).strip(), page=int(raw["page"]), x=float(raw["x"]),
                           y=float(raw["y"]), w=float(raw["w"]), h=float(raw["h"]),
                           font_size=float(raw.get("font_size") or 0))
        except (KeyError, TypeError, ValueError):
            raise _refused(N_("Box %(number)d is incomplete: it needs a column, a page and a place.",
                              number=number)) from None
        if not BOX_NAME.match(box.name):
            raise _refused(N_("Box %(number)d needs the name of a column (at most 100 characters, no { } < >).",
                              number=number))
        if not 0 <= box.page < len(form.pages):
            raise _refused(N_("Box %(number)d (%(name)s) is on page %(page)d; the PDF has %(pages)d.",
                              number=number, name=box.name, page=box.page + 1, pages=len(form.pages)))
        page = form.pages[box.page]
        if page.rotation:
            raise _refused(N_("Page %(page)d is rotated; boxes can only be placed on upright pages. Save the PDF "
                              "with its pages upright and upload it again.", page=box.page + 1))
        if box.w < MIN_BOX_SIDE or box.h < MIN_BOX_SIDE:
            raise _refused(N_("Box %(number)d (%(name)s) is too small: make it at least %(side)g pt wide and high.",
                              number=number, name=box.name, side=MIN_BOX_SIDE))
        if box.x < page.left - 1 or box.y < page.bottom - 1 \
                or box.x + box.w > page.left + page.width + 1 or box.y + box.h > page.bottom + page.height + 1:
            raise _refused(N_("Box %(number)d (%(name)s) reaches beyond the edge of page %(page)d.",
                              number=number, name=box.name, page=box.page + 1))
        if box.font_size and not MIN_FONT_SIZE <= box.font_size <= MAX_FONT_SIZE:
            raise _refused(N_("Box %(number)d (%(name)s): the font size must be between %(min)g and %(max)g pt.",
                              number=number, name=box.name, min=MIN_FONT_SIZE, max=MAX_FONT_SIZE))
        # A box tall enough for two lines wraps its text, as a multiline form field does.
        size = box.font_size or 10.0
        checked.append(dataclasses.replace(box, multiline=box.name != SIGNATURE_VARIABLE and box.h >= 2.4 * size))
    if len(checked) + len(form.fields) > MAX_FIELDS:
        raise _refused(N_("A PDF template may have at most %(limit)d fields and boxes.", limit=MAX_FIELDS))
    if sum(b.name == SIGNATURE_VARIABLE for b in (*form.fields, *checked)) > 1:
        raise _refused(N_("Mark one place for the signature, not several."))
    return tuple(checked)


def signature_place(boxes: Iterable[FieldBox]) -> SignatureBox | None:
    """Where the signature goes: the field or box named ``signature``; None (a signature page is appended)."""
    box = next((box for box in boxes if box.name == SIGNATURE_VARIABLE), None)
    return SignatureBox(page=box.page, x=box.x, y=box.y, w=box.w, h=box.h) if box else None


def _check_signature_place(data: bytes, boxes: Iterable[FieldBox]) -> None:
    """Refuse at save a signature field or box the signature block cannot fit in (``signature_box.check_box``)."""
    place = signature_place(boxes)
    if place is not None:
        try:
            check_box(data, place)
        except SignatureBoxError as exc:
            raise TemplateError(exc.message) from None


# --- filling ----------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _font():
    """DejaVu Sans cut to ``FONT_RANGES``, as pypdf's font model; its maps are built once, not per field."""
    from fontTools import subset
    from fontTools.ttLib import TTFont
    from pypdf.generic._font import Font

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
        def _maps(self):
            return Font._get_typographic_maps(self)

        def _get_typographic_maps(self):
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
def _prepare(data: bytes, placed: tuple[FieldBox, ...]) -> _Prepared:
    """Flatten the empty form once per process: its fields out, the font in (~0.3 s for the font, then ms)."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import DictionaryObject, NameObject

    form = read_form(data)
    boxes = tuple(b for b in (*form.fields, *placed) if b.name != SIGNATURE_VARIABLE)
    signature = signature_place((*form.fields, *placed))
    reader = PdfReader(BytesIO(data))
    # Saved templates have none left (``clean``); versions saved before that was done still carry it.
    pdf_cleaning.strip_active_content(reader)
    writer = PdfWriter(clone_from=reader)
    for index, page in enumerate(writer.pages):
        if "/Annots" in page:
            for widget in list(_widgets(page)):
                if not _is_variable(widget):
                    _paint_as_it_looks(writer, page, widget)
            others = [a for a in page["/Annots"] if a.get_object().get("/Subtype") != "/Widget"]
            if others:
                page[NameObject("/Annots")] = type(page["/Annots"])(others)
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


def _compress_font_file(font_ref) -> None:
    """pypdf embeds the font program uncompressed (80 KB); deflated it is about half, in every document."""
    from pypdf.generic import NameObject

    descriptor = font_ref.get_object()["/DescendantFonts"][0].get_object()["/FontDescriptor"].get_object()
    key = NameObject("/FontFile2")
    stream = descriptor[key].get_object()
    compressed = stream.flate_encode()
    compressed[NameObject("/Length1")] = stream["/Length1"]
    descriptor[key] = stream.indirect_reference.pdf._add_object(compressed)


def _is_variable(widget) -> bool:
    name = _qualified_name(widget)
    kind = _inherited(widget, "/FT")
    return bool(name) and (kind in ("/Tx", "/Ch") or name == SIGNATURE_VARIABLE)


def _paint_as_it_looks(writer, page, widget) -> None:
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
    x1, y1, x2, y2 = (float(v) for v in widget["/Rect"])
    writer._add_apstream_object(page, normal, f"BsW{id(widget)}", min(x1, x2), min(y1, y2))


def _text(box: FieldBox, row: Mapping) -> str:
    value = row.get(box.name)
    text = "" if value is None else str(value)
    if len(text) > MAX_VALUE_CHARS:
        raise TemplateError(N_("The value for \"%(name)s\" has %(length)d characters; a PDF field takes at most "
                               "%(limit)d.", name=box.name, length=len(text), limit=MAX_VALUE_CHARS))
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text if box.multiline else " ".join(text.split("\n"))


def _check_glyphs(name: str, text: str) -> None:
    reverse, _ = _font()._get_typographic_maps()
    missing = list(dict.fromkeys(c for c in text if c not in reverse and c != "\n"))
    if missing:
        raise TemplateError(N_("The value for \"%(name)s\" has characters the PDF's font cannot show: %(chars)s.",
                               name=name, chars=" ".join(missing[:10])))


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
    from pypdf.generic import DictionaryObject, NameObject, RectangleObject
    from pypdf.generic._appearance_stream import BaseStreamConfig, TextAlignment, TextStreamAppearance

    w, h = (box.h, box.w) if box.rotation in (90, 270) else (box.w, box.h)
    lines, size = _layout(box, text)
    stream = TextStreamAppearance(
        BaseStreamConfig(rectangle=RectangleObject((0, 0, w, h)), border_width=0, rotation=box.rotation),
        lines, font=_font(), font_name=_FONT_NAME, font_size=size,
        # Only the name is used: the font itself is the one embedded in the base document.
        font_resource=DictionaryObject({NameObject("/Type"): NameObject("/Font")}),
        is_multiline=box.multiline, alignment=TextAlignment(box.align if box.align in (0, 1, 2) else 0),
        is_comb=box.comb is not None, max_length=box.comb)
    matrix = [float(v) for v in stream["/Matrix"]] if "/Matrix" in stream else None
    return stream.get_data(), [float(v) for v in stream["/BBox"]], matrix


def _painted(box: FieldBox, content: bytes, bbox: list[float], matrix: list[float] | None) -> bytes:
    """An appearance painted where a viewer shows its widget: moved to the box's corner, turned by its matrix and
    clipped to its bounding box (PDF 32000-1, 12.5.5), as its form XObject would be. Inline rather than as an
    XObject: a third fewer objects to write per document (the pipeline's target is 20× wkhtmltopdf)."""
    a, b, c, d, e, f = matrix or (1, 0, 0, 1, 0, 0)
    x0, y0, x1, y1 = bbox
    return (b"q 1 0 0 1 %.3f %.3f cm %.4f %.4f %.4f %.4f %.3f %.3f cm %.3f %.3f %.3f %.3f re W n\n"
            % (box.x, box.y, a, b, c, d, e, f, x0, y0, x1 - x0, y1 - y0)) + content + b"\nQ\n"


def fill(data: bytes, row: Mapping, *, placed: tuple[FieldBox, ...] = ()) -> bytes:
    """One recipient's PDF: ``data``'s fields and the ``placed`` boxes filled from ``row``, nothing editable."""
    from pyhanko.pdf_utils import generic
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter

    prepared = _prepare(data, tuple(placed))
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


def placed_boxes(version) -> tuple[FieldBox, ...]:
    """The boxes staff placed on a PDF template version's pages."""
    return tuple(FieldBox.from_json(b) for b in version.pdf_boxes or ())


def place(data: bytes, boxes: Iterable[Mapping]) -> tuple[list[str], list[dict] | None]:
    """Check boxes staff placed on ``data``'s pages and fill it once with sample values: the version's variables
    (form fields and boxes) and its boxes as stored; TemplateError naming a wrong box."""
    form = read_form(data)
    placed = check_boxes(form, boxes)
    _check_signature_place(data, (*form.fields, *placed))
    names = sorted({f.name for f in (*form.fields, *placed)} - {SIGNATURE_VARIABLE})
    fill(data, {name: f"[{name}]" for name in names}, placed=placed)
    return names, [b.to_json() for b in placed] or None


def variables(data: bytes) -> list[str]:
    """The form's field names, sorted; TemplateError for a PDF that cannot be a template (checked by filling
    it once with sample values, as HTML and Word templates are)."""
    form = read_form(data)
    _check_signature_place(data, form.fields)
    fill(data, {name: f"[{name}]" for name in form.variables})
    return form.variables


def prepare(version, source: bytes, row: Mapping, *, timeout: float) -> Callable[[], bytes]:
    """One recipient's PDF from a PDF template version, filled now (milliseconds: ``timeout`` unused); the
    returned call only hands it over, as ``template_kinds`` expects of every kind."""
    filled = fill(source, row, placed=placed_boxes(version))
    return lambda: filled


def signature_box(source: bytes, *, placed: tuple[FieldBox, ...] = ()) -> SignatureBox | None:
    """Where the signature goes in every document of a PDF template (its field or box named ``signature``)."""
    return _prepare(source, placed).signature

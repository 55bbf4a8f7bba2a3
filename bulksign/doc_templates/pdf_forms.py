"""PDF templates as uploaded: a fillable form's pages and fields, or the boxes staff place on a plain PDF, read and
checked; ``pdf_fill`` fills them per recipient and flattens them.
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from io import BytesIO
from typing import Any, cast

from pypdf import PageObject, PdfReader, PdfWriter
from pypdf.errors import PyPdfError
from pypdf.generic import ArrayObject, DictionaryObject

from bulksign.core.messages import N_
from bulksign.doc_templates import pdf_cleaning
from bulksign.doc_templates.errors import TemplateError
from bulksign.documents.field_boxes import is_mark
from bulksign.documents.signature_box import SIGNATURE_VARIABLE, SignatureBox, SignatureBoxError, check_box, mark_role
from bulksign.models import TemplateVersion

#: Largest PDF template, most pages and most fields or boxes it may have.
MAX_PDF_BYTES = 20 * 1024 * 1024
MAX_PAGES = 100
MAX_FIELDS = 300
#: Font sizes staff may give a placed box (points); 0 fits the text to the box.
MIN_FONT_SIZE, MAX_FONT_SIZE = 4.0, 72.0
#: Smallest width and height of a placed box (points).
MIN_BOX_SIDE = 4.0
#: Variable names a placed box may take: what a column header can be.
BOX_NAME = re.compile(r"^[^\x00-\x1f{}<>]{1,100}$")

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

    def to_json(self) -> dict[str, Any]:
        """As stored in ``TemplateVersion.pdf_boxes`` (staff-placed boxes)."""
        return {
            "name": self.name,
            "page": self.page,
            "x": round(self.x, 2),
            "y": round(self.y, 2),
            "w": round(self.w, 2),
            "h": round(self.h, 2),
            "font_size": self.font_size,
            "multiline": self.multiline,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FieldBox:
        """A box stored by ``to_json``."""
        return cls(
            name=data["name"],
            page=int(data["page"]),
            x=float(data["x"]),
            y=float(data["y"]),
            w=float(data["w"]),
            h=float(data["h"]),
            font_size=float(data.get("font_size") or 0),
            multiline=bool(data.get("multiline")),
        )


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
        return sorted({f.name for f in self.fields if not is_mark(f.name)})


def _refused(message: N_) -> TemplateError:
    return TemplateError(message)


def read_form(data: bytes) -> PdfForm:
    """The pages and fields of an uploaded PDF; TemplateError saying why it cannot be a template."""
    with _reading():
        reader = _opened(data)
        pages = tuple(_page(p) for p in reader.pages)
        fields = tuple(box for index, page in enumerate(reader.pages) for box in _page_fields(page, index))
    if len(fields) > MAX_FIELDS:
        raise _refused(
            N_("The PDF has %(fields)d form fields; the limit is %(limit)d.", fields=len(fields), limit=MAX_FIELDS)
        )
    return PdfForm(pages=pages, fields=fields)


def clean(data: bytes) -> pdf_cleaning.Cleaned:
    """An uploaded PDF as a template keeps it: without active content (``pdf_cleaning``), saying what was taken out;
    the upload itself, byte for byte, when it has none. TemplateError for a file that cannot be read or cleaned."""

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
def _reading(*, writing: bool = False) -> Iterator[None]:
    """pypdf's failures on a broken or hostile file (in reading it, or ``writing`` it again) as TemplateErrors."""

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
            raise _refused(
                N_(
                    "The PDF could not be written again without its active content (%(problem)s). Open "
                    "it in a PDF viewer and print it as a new PDF.",
                    problem=type(exc).__name__,
                )
            ) from None
        raise _refused(
            N_(
                "The PDF could not be read (%(problem)s). Open it in a PDF viewer and save or print it as a new PDF.",
                problem=type(exc).__name__,
            )
        ) from None


def _opened(data: bytes) -> PdfReader:
    """``data`` as a pypdf reader, refused when it is too large, not a PDF, encrypted, without pages or too long."""

    if len(data) > MAX_PDF_BYTES:
        raise _refused(
            N_(
                "The PDF has %(size).1f MB; the limit is %(limit)d MB.",
                size=len(data) / 1024 / 1024,
                limit=MAX_PDF_BYTES // 1024 // 1024,
            )
        )
    if b"%PDF-" not in data[:1024]:
        raise _refused(N_("The file is not a PDF."))
    reader = PdfReader(BytesIO(data), strict=False)
    if reader.is_encrypted:
        raise _refused(
            N_(
                "The PDF is encrypted or password-protected. Save or print it as a PDF without "
                "protection and upload that."
            )
        )
    count = len(reader.pages)
    if count == 0:
        raise _refused(N_("The PDF has no pages."))
    if count > MAX_PAGES:
        raise _refused(N_("The PDF has %(pages)d pages; the limit is %(limit)d.", pages=count, limit=MAX_PAGES))
    return reader


def _page(page: PageObject) -> Page:
    box = page.cropbox
    return Page(
        left=float(box.left),
        bottom=float(box.bottom),
        width=float(box.width),
        height=float(box.height),
        rotation=page.rotation % 360,
    )


def widgets(page: PageObject) -> Iterator[DictionaryObject]:
    """The page's form widgets (its annotations of subtype ``/Widget``)."""
    for annotation in page.get("/Annots") or ():
        annotation = annotation.get_object()
        if annotation.get("/Subtype") == "/Widget":
            yield annotation


def _qualified_name(widget: DictionaryObject) -> str:
    """``parent.child`` names, as forms number repeated fields; a widget without ``/T`` takes its parent's."""
    # A PDF object of any kind as pypdf reads it (``/Parent`` may be missing or not a dictionary in a hostile file).
    node: Any
    parts, node, seen = [], widget, 0
    while node is not None and seen < 32:
        if "/T" in node:
            parts.append(str(node["/T"]))
        node = node.get("/Parent")
        node = node.get_object() if node is not None else None
        seen += 1
    return ".".join(reversed(parts))


def _inherited(widget: DictionaryObject, key: str, default: Any = None) -> Any:
    node: Any
    node, seen = widget, 0
    while node is not None and seen < 32:
        if key in node:
            return node[key]
        node = node.get("/Parent")
        node = node.get_object() if node is not None else None
        seen += 1
    return default


def _font_size(widget: DictionaryObject) -> float:
    da = str(_inherited(widget, "/DA", "") or "")
    match = re.search(r"([\d.]+)\s+Tf", da)
    return float(match.group(1)) if match else 0.0


def _page_fields(page: PageObject, index: int) -> Iterable[FieldBox]:
    """The variables' boxes on one page: text and choice fields, any field named ``signature`` or
    ``signature_<role>`` (a party's place), and any named ``field_<name>`` (a field the signer fills, a check box
    too)."""
    for widget in widgets(page):
        name = _qualified_name(widget)
        kind = _inherited(widget, "/FT")
        if not name or (kind not in ("/Tx", "/Ch", "/Sig") and not is_mark(name)):
            continue
        if kind == "/Sig" and not mark_role(name):
            continue  # someone else's signature field: painted as it looks, like any other widget
        x1, y1, x2, y2 = (float(v) for v in cast(ArrayObject, widget["/Rect"]))
        flags = int(_inherited(widget, "/Ff", 0) or 0)
        max_length = _inherited(widget, "/MaxLen")
        mk = widget.get("/MK")
        yield FieldBox(
            name=name,
            page=index,
            x=min(x1, x2),
            y=min(y1, y2),
            w=abs(x2 - x1),
            h=abs(y2 - y1),
            font_size=_font_size(widget),
            multiline=bool(flags & _MULTILINE),
            align=int(_inherited(widget, "/Q", 0) or 0),
            comb=int(max_length) if flags & _COMB and max_length else None,
            rotation=int(mk.get_object().get("/R", 0)) % 360 if mk is not None else 0,
        )


def is_variable(widget: DictionaryObject) -> bool:
    """A widget filled per recipient: a named text or choice field, a party's place (``signature``,
    ``signature_<role>``) or a field the signer fills (``field_<name>``, left empty); ``pdf_fill`` paints the others
    as they look."""
    name = _qualified_name(widget)
    kind = _inherited(widget, "/FT")
    return bool(name) and (kind in ("/Tx", "/Ch") or is_mark(name))


def check_boxes(form: PdfForm, boxes: Iterable[Mapping[str, Any]]) -> tuple[FieldBox, ...]:
    """Boxes staff placed (``name``, ``page``, ``x``, ``y``, ``w``, ``h``, ``font_size``), checked against the
    pages; TemplateError naming the first wrong one."""
    checked = []
    for number, raw in enumerate(boxes, start=1):
        try:
            box = FieldBox(
                name=str(raw["name"]).strip(),
                page=int(raw["page"]),
                x=float(raw["x"]),
                y=float(raw["y"]),
                w=float(raw["w"]),
                h=float(raw["h"]),
                font_size=float(raw.get("font_size") or 0),
            )
        except (KeyError, TypeError, ValueError):
            raise _refused(
                N_("Box %(number)d is incomplete: it needs a column, a page and a place.", number=number)
            ) from None
        if not BOX_NAME.match(box.name):
            raise _refused(
                N_("Box %(number)d needs the name of a column (at most 100 characters, no { } < >).", number=number)
            )
        # NaN compares false with everything, so it would pass every check below (and infinity is no place).
        if not all(math.isfinite(value) for value in (box.x, box.y, box.w, box.h, box.font_size)):
            raise _refused(
                N_(
                    "Box %(number)d (%(name)s): its place, size and font size must be ordinary numbers, "
                    "not NaN or infinity.",
                    number=number,
                    name=box.name,
                )
            )
        if not 0 <= box.page < len(form.pages):
            raise _refused(
                N_(
                    "Box %(number)d (%(name)s) is on page %(page)d; the PDF has %(pages)d.",
                    number=number,
                    name=box.name,
                    page=box.page + 1,
                    pages=len(form.pages),
                )
            )
        page = form.pages[box.page]
        if page.rotation:
            raise _refused(
                N_(
                    "Page %(page)d is rotated; boxes can only be placed on upright pages. Save the PDF "
                    "with its pages upright and upload it again.",
                    page=box.page + 1,
                )
            )
        if box.w < MIN_BOX_SIDE or box.h < MIN_BOX_SIDE:
            raise _refused(
                N_(
                    "Box %(number)d (%(name)s) is too small: make it at least %(side)g pt wide and high.",
                    number=number,
                    name=box.name,
                    side=MIN_BOX_SIDE,
                )
            )
        if (
            box.x < page.left - 1
            or box.y < page.bottom - 1
            or box.x + box.w > page.left + page.width + 1
            or box.y + box.h > page.bottom + page.height + 1
        ):
            raise _refused(
                N_(
                    "Box %(number)d (%(name)s) reaches beyond the edge of page %(page)d.",
                    number=number,
                    name=box.name,
                    page=box.page + 1,
                )
            )
        if box.font_size and not MIN_FONT_SIZE <= box.font_size <= MAX_FONT_SIZE:
            raise _refused(
                N_(
                    "Box %(number)d (%(name)s): the font size must be between %(min)g and %(max)g pt.",
                    number=number,
                    name=box.name,
                    min=MIN_FONT_SIZE,
                    max=MAX_FONT_SIZE,
                )
            )
        # A box tall enough for two lines wraps its text, as a multiline form field does.
        size = box.font_size or 10.0
        checked.append(dataclasses.replace(box, multiline=not is_mark(box.name) and box.h >= 2.4 * size))
    if len(checked) + len(form.fields) > MAX_FIELDS:
        raise _refused(N_("A PDF template may have at most %(limit)d fields and boxes.", limit=MAX_FIELDS))
    marks = [b.name for b in (*form.fields, *checked) if mark_role(b.name)]
    if len(marks) > len(set(marks)):
        raise _refused(N_("Mark one place for the signature, not several."))
    return tuple(checked)


def signature_place(boxes: Iterable[FieldBox]) -> SignatureBox | None:
    """Where the signature goes: the field or box named ``signature``; None (a signature page is appended)."""
    box = next((box for box in boxes if box.name == SIGNATURE_VARIABLE), None)
    return SignatureBox(page=box.page, x=box.x, y=box.y, w=box.w, h=box.h) if box else None


def check_signature_place(data: bytes, boxes: Iterable[FieldBox]) -> None:
    """Refuse at save a signature field or box the signature block cannot fit in (``signature_box.check_box``)."""
    place = signature_place(boxes)
    if place is not None:
        try:
            check_box(data, place)
        except SignatureBoxError as exc:
            raise TemplateError(exc.message) from None


def placed_boxes(version: TemplateVersion) -> tuple[FieldBox, ...]:
    """The boxes staff placed on a PDF template version's pages."""
    return tuple(FieldBox.from_json(b) for b in version.pdf_boxes or ())

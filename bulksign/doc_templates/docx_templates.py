"""Word templates: a .docx with ``{{ column }}`` placeholders, filled by docxtpl, printed by LibreOffice.
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import functools
import io
import re
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from docx.opc.constants import CONTENT_TYPE as CT
from docx.opc.coreprops import CoreProperties
from docx.opc.oxml import serialize_part_xml
from docx.oxml.parser import parse_xml
from docxtpl import DocxTemplate
from jinja2 import TemplateSyntaxError, nodes
from lxml import etree
from markupsafe import Markup
from pypdf import PdfReader
from pypdf.errors import PdfReadError

from bulksign.core.messages import N_
from bulksign.doc_templates import docx_package, docx_safety
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.html_safety import unsafe_jinja
from bulksign.doc_templates.jinja_sandbox import refuse_other_templates, refuse_unknown_names, render_html, sandbox
from bulksign.doc_templates.variables import sample_row
from bulksign.documents import libreoffice
from bulksign.documents.field_boxes import (
    DEFAULT_TYPE,
    FIELD_SIZES_MM,
    field_colour_hex,
    field_indexes,
    field_name,
    stored_marks,
)
from bulksign.documents.pdf import MAX_PAGES, too_long
from bulksign.documents.signature_box import (
    BOX_HEIGHT_MM,
    BOX_WIDTH_MM,
    SIGNATURE_VARIABLE,
    mark_colour_hex,
    mark_indexes,
    mark_role,
    marks_among,
)
from bulksign.models import TemplateVersion

_HAS_JINJA = re.compile(r"{{|{%|{#")


class _SandboxForDocx:
    """What docxtpl asks of a Jinja environment, answered by the HTML templates' bounded, escaping render.

    docxtpl turns ``&lt;`` back into ``<`` inside ``{{ }}``, so ``{{ "<w:r>…"|safe }}`` would write Word XML
    (a field that reads a file): ``|safe`` and ``{% autoescape %}`` are refused, as in HTML templates."""

    autoescape = True

    def parse(self, source: str) -> nodes.Template:
        return _checked(source)

    def from_string(self, source: str) -> _Part:
        _checked(source)
        return _Part(source)


@functools.lru_cache(maxsize=64)
def _checked(source: str) -> nodes.Template:
    # Versions never change: a worker checks each part once, not once per recipient.
    ast = sandbox.parse(source)
    problem = unsafe_jinja(ast)
    if problem:
        raise problem
    refuse_unknown_names(ast, source=source)
    refuse_other_templates(ast, source=source)
    return ast


class _Part:
    def __init__(self, source: str):
        self.source = source

    def render(self, context: dict[str, Any]) -> str:
        if not _HAS_JINJA.search(self.source):
            return self.source  # most parts (styles, empty properties) hold no placeholder: no sandbox round
        return render_html(self.source, context)


_JINJA = _SandboxForDocx()

#: ``{{ signature }}`` marks where the signature goes (the contract is ``signature_box``): an empty box of
#: ``BOX_WIDTH_MM`` × ``BOX_HEIGHT_MM`` framed in ``MARK_COLOUR``, which LibreOffice draws as one stroked path and
#: ``find_signature_box`` finds in the PDF. It holds one empty paragraph (a text box needs one) and no text.
_EMU_PER_MM = 36000


@functools.lru_cache(maxsize=16)
def _signature_box(index: int = 0) -> Markup:
    """An inline text-box shape framed in ``mark_colour(index)``: it ends the placeholder's run, sits in the line
    like a letter, and reopens it."""
    return _framed_box(BOX_WIDTH_MM, BOX_HEIGHT_MM, mark_colour_hex(index))


@functools.lru_cache(maxsize=128)
def _field_box(index: int, field_type: str) -> Markup:
    """A field's empty box (``field_boxes``): its type's size, framed in its own colour."""
    return _framed_box(*FIELD_SIZES_MM.get(field_type, FIELD_SIZES_MM[DEFAULT_TYPE]), field_colour_hex(index))


def _framed_box(width_mm: float, height_mm: float, colour_hex: str) -> Markup:
    width, height = (round(mm * _EMU_PER_MM) for mm in (width_mm, height_mm))
    return Markup(
        "</w:t></w:r><w:r><w:drawing>"
        '<wp:inline distT="0" distB="0" distL="0" distR="0" '
        'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing">'
        f'<wp:extent cx="{width}" cy="{height}"/><wp:docPr id="1" name="bulksign-signature"/>'
        '<a:graphic xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main">'
        '<a:graphicData uri="http://schemas.microsoft.com/office/word/2010/wordprocessingShape">'
        '<wps:wsp xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape">'
        '<wps:cNvSpPr txBox="1"/><wps:spPr>'
        f'<a:xfrm><a:off x="0" y="0"/><a:ext cx="{width}" cy="{height}"/></a:xfrm>'
        '<a:prstGeom prst="rect"><a:avLst/></a:prstGeom><a:noFill/>'
        f'<a:ln w="9525"><a:solidFill><a:srgbClr val="{colour_hex}"/></a:solidFill></a:ln></wps:spPr>'
        '<wps:txbx><w:txbxContent><w:p><w:pPr><w:spacing w:before="0" w:after="0" w:line="20" '
        'w:lineRule="exact"/></w:pPr></w:p></w:txbxContent></wps:txbx>'
        '<wps:bodyPr lIns="0" tIns="0" rIns="0" bIns="0" anchor="t"><a:noAutofit/></wps:bodyPr></wps:wsp>'
        '</a:graphicData></a:graphic></wp:inline></w:drawing></w:r><w:r><w:t xml:space="preserve">'
    )


def variables(data: bytes) -> list[str]:
    """The placeholders of an uploaded .docx, sorted; TemplateError for a file that cannot be a template."""
    docx_safety.check_package(docx_package.read_parts(data))  # the upload, for a clear answer before docxtpl reads it
    try:
        found = sorted(docx_package.open_template(data).get_undeclared_template_variables(jinja_env=_JINJA))
    except TemplateSyntaxError as exc:
        raise TemplateError(
            N_(
                "A placeholder is written wrong: %(error)s. Check the {{ }} and {%% %%} in the document.",
                error=exc.message or "syntax error",
            )
        ) from None
    except TemplateError as exc:
        raise type(exc)(exc.message, hint=exc.hint) from None  # a line of the XML would mean nothing to the reader
    except Exception as exc:  # noqa: BLE001 - see docx_package.open_template
        raise TemplateError(
            N_("The Word file cannot be read as a template (%(error)s).", error=type(exc).__name__)
        ) from None
    marks = {v: DEFAULT_TYPE for v in found if field_name(v)}
    fill(data, sample_row(found, marks), fields=marks)  # refuses a template too costly or broken for any row, as HTML
    return found


def fill(
    data: bytes, row: dict[str, Any], *, marks: Iterable[str] | None = None, fields: Mapping[str, str] | None = None
) -> bytes:
    """The .docx with the row's values in place of the placeholders (no conversion): ``fill_parts``, packed."""
    return _prepared(data).pack(fill_parts(data, row, marks=marks, fields=fields))


def fill_parts(
    data: bytes, row: dict[str, Any], *, marks: Iterable[str] | None = None, fields: Mapping[str, str] | None = None
) -> dict[str, bytes]:
    """The parts the row's values fill in, by name (the others are ``package``'s); signature and field marks always
    become their empty boxes, whatever the row holds under their names."""
    return _filled(_prepared(data), row, marks=marks, fields=fields)


def patched_filler(data: bytes, *, patch: Callable[[str], str]) -> Callable[[dict[str, Any], Mapping[str, str]], bytes]:
    """The file read with each part's XML passed through ``patch`` once docxtpl joined its tags (the Word check writes
    a tag it cannot read as one it can), and a call that fills it with a row and its fields' marks (mark → type), as
    ``fill``; never cached, unlike the files every recipient's copy is filled from."""
    docx_safety.check_package(docx_package.read_parts(data))
    template = docx_package.open_template(data)
    joined = template.patch_xml
    template.patch_xml = lambda xml: patch(joined(xml))
    try:
        prepared = _prepare(template)
    except TemplateError:
        raise
    except Exception as exc:  # noqa: BLE001 - see docx_package.open_template
        raise TemplateError(
            N_("The Word file cannot be read as a template (%(error)s).", error=type(exc).__name__)
        ) from None
    return lambda row, fields: prepared.pack(_filled(prepared, row, marks=None, fields=fields))


def _filled(
    prepared: _Prepared, row: dict[str, Any], *, marks: Iterable[str] | None, fields: Mapping[str, str] | None
) -> dict[str, bytes]:
    marks = mark_indexes([SIGNATURE_VARIABLE, *(name for name in (row if marks is None else marks) if mark_role(name))])
    try:
        boxes = {name: _field_box(index, (fields or {})[name]) for name, index in field_indexes(fields or {}).items()}
        return prepared.parts({**row, **{name: _signature_box(index) for name, index in marks.items()}, **boxes})
    except TemplateSyntaxError as exc:
        raise TemplateError(
            N_(
                "A placeholder is written wrong: %(error)s. Check the {{ }} and {%% %%} in the document.",
                error=exc.message or "syntax error",
            )
        ) from None
    except TemplateError as exc:
        raise type(exc)(exc.message, hint=exc.hint) from None  # a line of the XML would mean nothing to the reader
    except etree.XMLSyntaxError:
        # docxtpl repairs the body's XML but loads headers and footers strictly: a {% if %} that starts in a
        # paragraph and ends in a table cell leaves the tags unbalanced.
        raise TemplateError(
            N_(
                "A header or footer is broken once filled in: a {% if %} or {% for %} there starts "
                "in one paragraph or table cell and ends in another. Keep each in one paragraph."
            )
        ) from None


def fill_version(version: TemplateVersion | None, data: bytes, row: dict[str, Any]) -> dict[str, bytes]:
    """``fill_parts`` with the marks and fields of ``version`` (None: a preview's, every mark among the row's)."""
    marks = None if version is None else marks_among(row, roles=version.roles or ())
    fields = None if version is None else stored_marks(version.fields)
    return fill_parts(data, row, marks=marks, fields=fields)


@functools.lru_cache(maxsize=4)
def package(data: bytes) -> dict[str, bytes]:
    """The parts of ``data`` as every recipient's copy holds them (those ``fill_parts`` does not write), by name."""
    with zipfile.ZipFile(io.BytesIO(_prepared(data).unchanging)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


#: docxtpl's list of the core properties it fills in (title, subject …); the others are not text.
_CORE_PROPERTIES = ("author", "comments", "identifier", "language", "subject", "title")
#: Stands for the body in word/document.xml while the rest of that part is serialised once.
_BODY_MARK = "bulksign-body"


@dataclass(frozen=True)
class _Prepared:
    """A .docx read and patched by docxtpl once, then filled per recipient by rendering only the parts that can hold
    placeholders: the document docxtpl makes, in a tenth of its time."""

    #: The package as python-docx saves it, deflated, without the parts ``fill`` adds.
    unchanging: bytes
    #: word/document.xml: its name, its XML before and after the body, and the body as ``patch_xml`` left it.
    document_name: str
    document_head: bytes
    document_tail: bytes
    body: str
    #: Headers and footers: part name → (patched XML, the encoding it declared).
    headers_footers: dict[str, tuple[str, str]]
    #: Footnotes: part name → patched XML.
    footnotes: dict[str, str]
    #: The core properties part: name, XML.
    core: tuple[str, bytes]
    #: The outside hyperlinks of the parts filled per recipient, which ``docx_safety`` checks them against.
    hyperlinks: docx_safety.Hyperlinks

    def parts(self, context: dict[str, Any]) -> dict[str, bytes]:
        """The parts the recipient's values fill in, checked (``docx_safety``), by name."""
        steps = _docxtpl_steps()
        body = steps.fix_tables(steps.render_xml_part(self.body, None, context, _JINJA))
        steps.fix_docpr_ids(body)
        filled = {
            self.document_name: self.document_head
            + etree.tostring(body, encoding="UTF-8", xml_declaration=False)
            + self.document_tail
        }
        for name, (xml, encoding) in self.headers_footers.items():
            part = steps.render_xml_part(xml, None, context, _JINJA).encode(encoding)
            filled[name] = serialize_part_xml(parse_xml(part))  # as python-docx stores a part it loaded
        for name, xml in self.footnotes.items():
            filled[name] = steps.render_xml_part(xml, None, context, _JINJA).encode("utf-8")
        core_name, core_xml = self.core
        filled[core_name] = _filled_core_properties(core_xml, context)
        # What LibreOffice gets is checked, not only what was uploaded: the unchanging parts once, these each time.
        docx_safety.check_parts(filled, hyperlinks=self.hyperlinks)
        return filled

    def pack(self, filled: Mapping[str, bytes]) -> bytes:
        out = io.BytesIO(self.unchanging)
        with zipfile.ZipFile(out, "a", zipfile.ZIP_DEFLATED) as archive:
            for name, part in filled.items():
                archive.writestr(name, part)
        return out.getvalue()


def _docxtpl_steps() -> DocxTemplate:
    """docxtpl's rendering steps without a document: each fill numbers drawings from 1001, as ``render`` does."""
    steps = DocxTemplate(None)
    steps.docx_ids_index = 1000
    return steps


def _filled_core_properties(xml: bytes, context: dict[str, Any]) -> bytes:
    element = parse_xml(xml)
    properties = CoreProperties(element)
    for name in _CORE_PROPERTIES:
        setattr(properties, name, _JINJA.from_string(getattr(properties, name)).render(context))
    return serialize_part_xml(element)


@functools.lru_cache(maxsize=4)
def _prepared(data: bytes) -> _Prepared:
    # Keyed by the file itself: versions never change, and a render worker fills one version's file many times.
    # At most 4 files stay prepared, each about as large as its packed parts.
    docx_package.read_parts(
        data
    )  # its limits, before python-docx reads the parts (a stored file was checked on upload, too)
    template = docx_package.open_template(data)
    try:
        return _prepare(template)
    except TemplateError:
        raise
    except Exception as exc:  # noqa: BLE001 - see docx_package.open_template
        raise TemplateError(
            N_("The Word file cannot be read as a template (%(error)s).", error=type(exc).__name__)
        ) from None


def _prepare(template: DocxTemplate) -> _Prepared:
    template.render_init()
    document = template.docx
    package = document.part.package
    headers_footers = {}
    for uri in (template.HEADER_URI, template.FOOTER_URI):
        for _, part in template.get_headers_footers(uri):
            xml = template.get_part_xml(part)
            headers_footers[part.partname.membername] = (
                template.patch_xml(xml),
                template.get_headers_footers_encoding(xml),
            )
    footnotes = {
        part.partname.membername: template.patch_xml(part.blob.decode("utf-8"))
        for part in package.iter_parts()
        if part.content_type == CT.WML_FOOTNOTES
    }
    document.core_properties  # noqa: B018 - python-docx adds the part if the file has none, as render does
    core_name = next(
        part.partname.membername for part in package.iter_parts() if part.content_type == CT.OPC_CORE_PROPERTIES
    )
    saved = io.BytesIO()
    document.save(saved)
    added = {document.part.partname.membername, *headers_footers, *footnotes, core_name}
    unchanging = io.BytesIO()
    kept = {}
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(unchanging, "w", zipfile.ZIP_DEFLATED) as target:
        for name in source.namelist():
            if name not in added:
                kept[name] = source.read(name)
                target.writestr(name, kept[name])
        core = (core_name, source.read(core_name))
    hyperlinks = docx_safety.check_package(kept)
    # The document part without its body: each recipient's filled body goes between the two halves.
    body = template.patch_xml(template.get_xml())
    root = document.element
    root.replace(root.body, etree.Comment(_BODY_MARK))
    head, tail = serialize_part_xml(root).split(f"<!--{_BODY_MARK}-->".encode())
    return _Prepared(
        unchanging=unchanging.getvalue(),
        document_name=document.part.partname.membername,
        document_head=head,
        document_tail=tail,
        body=body,
        headers_footers=headers_footers,
        footnotes=footnotes,
        core=core,
        hyperlinks=hyperlinks,
    )


def page_count(pdf: bytes) -> int:
    try:
        return len(PdfReader(io.BytesIO(pdf)).pages)
    except (PdfReadError, ValueError) as exc:
        raise TemplateError(
            N_("LibreOffice made an unreadable PDF of the document (%(error)s).", error=str(exc))
        ) from None


def prepare(version: TemplateVersion, source: bytes, row: dict[str, Any], *, timeout: float) -> Callable[[], bytes]:
    """One recipient's PDF in two steps: the .docx is filled now, in the calling thread; the returned call
    converts it with this process's warm LibreOffice. The render job runs that call in its renderer thread, so
    the next recipient's fill overlaps this one's conversion instead of adding to it."""
    return functools.partial(convert, _prepared(source).pack(fill_version(version, source, row)), timeout=timeout)


def convert(filled: bytes, *, timeout: float) -> bytes:
    """A filled .docx as a PDF, by this process's warm LibreOffice, of at most ``MAX_PAGES`` pages."""
    pdf = libreoffice.converter().convert(filled, timeout=timeout, max_pages=MAX_PAGES)
    if page_count(pdf) > MAX_PAGES:  # at most one more: the export stopped there
        raise TemplateError(too_long(MAX_PAGES))
    return pdf

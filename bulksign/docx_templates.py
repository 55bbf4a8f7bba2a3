"""Word templates: a .docx with ``{{ column }}`` placeholders, filled by docxtpl, printed by LibreOffice.

The placeholders are Jinja, filled in by the same bounded sandbox as HTML templates (``doc_templates``):
every value is escaped (for XML here), nothing outside the row is reachable, and the same time and size
limits apply. docxtpl joins a placeholder that Word split across runs (bold half a name, spell-check
marks); the XML is never parsed by hand here.

A file is checked before docxtpl opens it (size, what it unpacks to, macros, encryption) and refused
if it would make LibreOffice load anything from outside (linked images, INCLUDETEXT fields, embedded
documents): the PDF must hold only the template and the row.
"""
from __future__ import annotations

import io
import re
import zipfile

from docxtpl import DocxTemplate
from jinja2 import TemplateSyntaxError
from pypdf import PdfReader
from pypdf.errors import PdfReadError

from . import libreoffice
from .doc_templates import TemplateError, render_html, sample_row, sandbox
from .models import TemplateVersion

#: Largest .docx accepted, and most it may unpack to (all parts) or any part to, times its packed size.
MAX_DOCX_BYTES = 10 * 1024 * 1024
MAX_UNPACKED_BYTES = 100 * 1024 * 1024
MAX_COMPRESSION_RATIO = 100
MAX_PARTS = 1000
#: Most pages one recipient's document may have.
MAX_PAGES = 100

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an encrypted .docx is an OLE container, not a zip
_MACROS = re.compile(r"(^|/)vba(Project\.bin|Data\.xml)$", re.I)
_MACRO_CONTENT_TYPE = b"macroEnabled"
#: Relationships through which LibreOffice would load a file or address when it opens the document.
_EXTERNAL = re.compile(rb'TargetMode\s*=\s*"External"', re.I)
_HYPERLINK_REL = re.compile(rb'<Relationship\b[^>]*/hyperlink"[^>]*>', re.I)
_FETCHING_FIELD = re.compile(r"\b(INCLUDETEXT|INCLUDEPICTURE|LINK|DDE|DDEAUTO|IMPORT|INCLUDE)\b")
_FIELD_CODE = re.compile(r"<w:instrText[^>]*>([^<]*)</w:instrText>|w:instr=\"([^\"]*)\"")
_EMBEDDED_DOCUMENT = re.compile(rb"<w:altChunk\b|/subDocument\"", re.I)
_XML_PART = re.compile(r"^(word/.*\.xml|word/_rels/.*\.rels)$")


class _SandboxForDocx:
    """What docxtpl asks of a Jinja environment, answered by the HTML templates' bounded, escaping render."""

    autoescape = True

    def parse(self, source: str):
        return sandbox.parse(source)

    def from_string(self, source: str) -> _Part:
        return _Part(source)


class _Part:
    def __init__(self, source: str):
        self.source = source

    def render(self, context: dict) -> str:
        return render_html(self.source, context)


_JINJA = _SandboxForDocx()


def _read_parts(data: bytes) -> dict[str, bytes]:
    """The document's XML parts, after checking what the archive holds and unpacks to."""
    if len(data) > MAX_DOCX_BYTES:
        raise TemplateError(f"The Word file has {len(data) / 1024 / 1024:.1f} MB; the limit is "
                            f"{MAX_DOCX_BYTES // 1024 // 1024} MB. Make the images in it smaller.")
    if data.startswith(_OLE_MAGIC):
        raise TemplateError("The Word file is password-protected (or an old .doc). Remove the password "
                            "(File → Info → Protect Document) and save it as .docx.")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            if len(infos) > MAX_PARTS:
                raise TemplateError(f"The Word file has {len(infos):,} parts; the limit is {MAX_PARTS:,}.")
            unpacked = 0
            for info in infos:
                unpacked += info.file_size
                if info.file_size > 1024 * 1024 and info.file_size > MAX_COMPRESSION_RATIO * max(info.compress_size, 1):
                    raise TemplateError(f"The Word file is not a real document: its part {info.filename[:80]} "
                                        f"unpacks to {info.file_size // max(info.compress_size, 1):,} times its size.")
            if unpacked > MAX_UNPACKED_BYTES:
                raise TemplateError(f"The Word file unpacks to {unpacked / 1024 / 1024:,.0f} MB; the limit is "
                                    f"{MAX_UNPACKED_BYTES // 1024 // 1024} MB.")
            names = {info.filename for info in infos}
            if "word/document.xml" not in names:
                raise TemplateError("The file is not a Word document. Save it from Word as .docx and upload it again.")
            if any(_MACROS.search(name) for name in names) or \
                    _MACRO_CONTENT_TYPE in archive.read("[Content_Types].xml"):
                raise TemplateError("The Word file contains macros, which are not allowed. Save it as a Word "
                                    "Document (.docx) without macros and upload that.")
            return {name: archive.read(name) for name in names if _XML_PART.match(name)}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, KeyError, OSError, EOFError, RuntimeError):
        # RuntimeError: zipfile's "encrypted, password required" for a zip-level password.
        raise TemplateError("The Word file is broken or password-protected and cannot be read. Open it in Word, "
                            "save it again as .docx and upload that.") from None


def _refuse_fetches(parts: dict[str, bytes]) -> None:
    """Refuse what would make LibreOffice read a file or an address into the PDF."""
    for name, xml in parts.items():
        if name.endswith(".rels"):
            external = [rel for rel in re.findall(rb"<Relationship\b[^>]*>", xml) if _EXTERNAL.search(rel)]
            if any(not _HYPERLINK_REL.match(rel) for rel in external):
                raise TemplateError("The Word file links to an outside file or address (a linked image or "
                                    "document). Insert images into the document instead of linking them.")
            continue
        if _EMBEDDED_DOCUMENT.search(xml):
            raise TemplateError("The Word file embeds another document (a sub-document or an imported chunk). "
                                "Paste its content into the template instead.")
        for match in _FIELD_CODE.finditer(xml.decode("utf-8", "replace")):
            code = match.group(1) or match.group(2) or ""
            if _FETCHING_FIELD.search(code.upper()):
                raise TemplateError("The Word file has a field that loads another file (INCLUDETEXT, "
                                    "INCLUDEPICTURE, LINK …). Replace the field with its content.")
            if "{{" in code or "{%" in code:
                raise TemplateError("A {{ variable }} inside a Word field code is not allowed: recipient data "
                                    "may not write field codes. Put the variable in the text.")


def _template(data: bytes) -> DocxTemplate:
    try:
        return DocxTemplate(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - python-docx fails on broken parts in many ways
        raise TemplateError("The Word file is broken and cannot be read. Open it in Word, save it again as "
                            f".docx and upload that. ({type(exc).__name__})") from None


def variables(data: bytes) -> list[str]:
    """The placeholders of an uploaded .docx, sorted; TemplateError for a file that cannot be a template."""
    _refuse_fetches(_read_parts(data))
    try:
        found = sorted(_template(data).get_undeclared_template_variables(jinja_env=_JINJA))
    except TemplateSyntaxError as exc:
        raise TemplateError(f"A placeholder is written wrong: {exc.message or 'syntax error'}. Check the "
                            "{{ }} and {% %} in the document.") from None
    except TemplateError:
        raise
    except Exception as exc:  # noqa: BLE001 - see _template
        raise TemplateError(f"The Word file cannot be read as a template ({type(exc).__name__}).") from None
    fill(data, sample_row(found))  # refuses a template too costly or broken for any row, as for HTML
    return found


def fill(data: bytes, row: dict) -> bytes:
    """The .docx with the row's values in place of the placeholders (no conversion)."""
    template = _template(data)
    try:
        template.render(row, jinja_env=_JINJA)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"A placeholder is written wrong: {exc.message or 'syntax error'}.") from None
    except TemplateError as exc:
        raise type(exc)(exc.message) from None  # a line of the XML would mean nothing to the reader
    out = io.BytesIO()
    template.save(out)
    filled = out.getvalue()
    _refuse_fetches(_read_parts(filled))
    return filled


def page_count(pdf: bytes) -> int:
    try:
        return len(PdfReader(io.BytesIO(pdf)).pages)
    except (PdfReadError, ValueError) as exc:
        raise TemplateError(f"LibreOffice made an unreadable PDF of the document ({exc}).") from None


def render(version: TemplateVersion, source: bytes, row: dict, *, timeout: float) -> bytes:
    """One recipient's PDF: fill the .docx, convert it with this process's warm LibreOffice."""
    pdf = libreoffice.converter().convert(fill(source, row), timeout=timeout)
    pages = page_count(pdf)
    if pages > MAX_PAGES:
        raise TemplateError(f"The document has {pages:,} pages for this recipient; the limit is {MAX_PAGES}.")
    return pdf

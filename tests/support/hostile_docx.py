"""Word files that try to make LibreOffice load what is not theirs, in the spellings an outside probe found past a
check of the upload's bytes: each must be refused, and none may reach a listener or a stored file."""

from __future__ import annotations

import io
import re
import zipfile

from docx import Document
from docx.shared import Cm

from tests.support import docx_files
from tests.support.hostile_files import with_lying_part

_PACKAGE_RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
_IMAGE = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/image"
_WORD = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def with_parts(parts: dict[str, bytes], base: bytes | None = None) -> bytes:
    """A copy of ``base`` (a real .docx) with parts added or replaced."""
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(base or docx_files.simple())) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target,
    ):
        for info in source.infolist():
            if info.filename not in parts:
                target.writestr(info, source.read(info.filename))
        for name, data in parts.items():
            target.writestr(name, data)
    return out.getvalue()


def part(docx: bytes, name: str) -> str:
    with zipfile.ZipFile(io.BytesIO(docx)) as archive:
        return archive.read(name).decode()


def _with_picture() -> bytes:
    document = Document()
    document.add_paragraph("Contract for {{ name }}")
    document.add_picture(io.BytesIO(docx_files.png()), width=Cm(3))
    return docx_files.save(document)


#: How the image's relationship says it leaves the package: each spelling read as External by an XML parser.
RELATIONSHIP_SPELLINGS = {
    "canonical": '<Relationship Id="{id}" Type="{type}" Target="{target}" TargetMode="External"/>',
    "single quotes": "<Relationship Id='{id}' Type='{type}' Target='{target}' TargetMode='External'/>",
    "character reference": '<Relationship Id="{id}" Type="{type}" Target="{target}" TargetMode="&#69;xternal"/>',
    "decoy hyperlink attribute": (
        '<Relationship Id="{id}" Type="{type}" Target="{target}" TargetMode="External" Note="/hyperlink"/>'
    ),
    "another prefix": (
        f'<pr:Relationship xmlns:pr="{_PACKAGE_RELS}" Id="{{id}}" Type="{{type}}" Target="{{target}}" '
        'TargetMode="External"/>'
    ),
}


def linked_image(target: str, *, spelling: str = "canonical") -> bytes:
    """A picture drawn from ``target`` (``r:link`` instead of ``r:embed``) when LibreOffice opens the document."""
    base = _with_picture()
    document = part(base, "word/document.xml")
    rels = part(base, "word/_rels/document.xml.rels")
    image_id = re.search(r'r:embed="(rId\d+)"', document).group(1)
    document = document.replace(f'r:embed="{image_id}"', f'r:link="{image_id}"')
    rels = re.sub(
        rf'<Relationship Id="{image_id}"[^>]*/>',
        RELATIONSHIP_SPELLINGS[spelling].format(id=image_id, type=_IMAGE, target=target),
        rels,
    )
    return with_parts({"word/document.xml": document.encode(), "word/_rels/document.xml.rels": rels.encode()}, base)


#: A field that reads ``{target}`` into the document, in spellings a regular expression over the bytes misses.
FIELD_SPELLINGS = {
    "character reference": (
        '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText xml:space="preserve">'
        '&#73;NCLUDETEXT "{target}"</w:instrText></w:r><w:r><w:fldChar w:fldCharType="end"/>'
        "</w:r>"
    ),
    "simple field in single quotes": "<w:fldSimple w:instr='INCLUDEPICTURE \"{target}\" \\d'><w:r><w:t>x</w:t></w:r>"
    "</w:fldSimple>",
    "another prefix": (
        f'<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><x:instrText xmlns:x="{_WORD}">'
        'INCLUDETEXT "{target}"</x:instrText></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r>'
    ),
    "CDATA": (
        '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText><![CDATA[INCLUDEPICTURE "{target}" '
        '\\d]]></w:instrText></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r>'
    ),
}


def including_field(target: str, *, spelling: str) -> bytes:
    base = docx_files.simple("Contract for {{ name }}")
    document = part(base, "word/document.xml")
    field = FIELD_SPELLINGS[spelling].format(target=target)
    return with_parts({"word/document.xml": document.replace("</w:p>", field + "</w:p>", 1).encode()}, base)


def embedded_package() -> bytes:
    """Another Word document packed inside this one (``word/embeddings``), as Word embeds an object."""
    base = docx_files.simple("Contract for {{ name }}")
    return with_parts({"word/embeddings/Microsoft_Word_Document.docx": docx_files.simple("inner")}, base)


def doctype_in(name: str) -> bytes:
    """A part that declares its own entities (Word never writes a DOCTYPE)."""
    base = docx_files.everything()
    xml = part(base, name)
    declared = re.sub(
        r"^(<\?xml[^>]*\?>)?", lambda m: (m.group(0) or "") + '<!DOCTYPE x [<!ENTITY e "e">]>', xml, count=1
    )
    return with_parts({name: declared.encode()}, base)


def lying_zip_header() -> bytes:
    """A real .docx whose document part declares 2.6 KB but inflates to 2 GiB: about 2 MB on the wire."""
    return with_lying_part(docx_files.simple("Contract for {{ name }}"), "word/document.xml")

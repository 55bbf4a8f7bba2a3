"""Real Word files built with python-docx, for the Word template tests and the bench."""

from __future__ import annotations

import io
import struct
import zlib

from docx import Document
from docx.enum.text import WD_BREAK
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Cm


def png(width: int = 40, height: int = 20, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A small solid-colour PNG (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    row = b"\x00" + bytes(rgb) * width
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


def _page_number_field(paragraph) -> None:
    run = paragraph.add_run()
    for tag, text in (("w:fldChar", "begin"), ("w:instrText", "PAGE"), ("w:fldChar", "end")):
        element = OxmlElement(tag)
        if tag == "w:fldChar":
            element.set(qn("w:fldCharType"), text)
        else:
            element.set(qn("xml:space"), "preserve")
            element.text = text
        run._r.append(element)


def save(document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def contract() -> bytes:
    """A two-page contract: Cyrillic, a split placeholder, a table, an image, header and footer with page number."""
    document = Document()
    section = document.sections[0]
    section.header.paragraphs[0].text = "ООО «Пример» — трудовой договор {{ number }}"
    footer = section.footer.paragraphs[0]
    footer.add_run("Страница ")
    _page_number_field(footer)
    document.add_heading("Трудовой договор", level=1)
    intro = document.add_paragraph("Работник: ")
    intro.add_run("{{ na")  # Word splits a placeholder across runs when half of it is bold
    intro.add_run("me }}").bold = True
    document.add_paragraph("Город: {{ city }}. Email: {{ email }}")
    table = document.add_table(rows=2, cols=2)
    table.style = "Table Grid"
    table.cell(0, 0).text, table.cell(0, 1).text = "Должность", "{{ role }}"
    table.cell(1, 0).text, table.cell(1, 1).text = "Оклад", "{{ salary }} ₽"
    document.add_picture(io.BytesIO(png()), width=Cm(3))
    document.add_paragraph("{% if city == 'Москва' %}Столичная надбавка.{% endif %}")
    document.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
    document.add_paragraph("Вторая страница. Подпись работника ({{ name }}):")
    return save(document)


def simple(text: str = "Hello {{ name }}") -> bytes:
    document = Document()
    document.add_paragraph(text)
    return save(document)


def everything() -> bytes:
    """The contract with every part a fill renders: a placeholder in the title, a table row repeated by a loop,
    a signature mark, and a footnote that names the recipient."""
    import zipfile

    document = Document(io.BytesIO(contract()))
    document.core_properties.title = "Договор {{ number }}"
    table = document.add_table(rows=3, cols=2)
    table.cell(0, 0).text = "{%tr for n in range(3) %}"
    table.cell(1, 0).text, table.cell(1, 1).text = "Пункт {{ n }}", "{{ city }}"
    table.cell(2, 0).text = "{%tr endfor %}"
    document.add_paragraph("Подпись: {{ signature }}")
    marked = document.add_paragraph("См. сноску")
    reference = OxmlElement("w:footnoteReference")
    reference.set(qn("w:id"), "1")
    marked.add_run()._r.append(reference)
    package = io.BytesIO(save(document))
    out = io.BytesIO()
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    footnotes = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:footnotes xmlns:w="{w}">'
        '<w:footnote w:id="1"><w:p><w:r><w:t>Сноска для {{ name }}</w:t></w:r></w:p></w:footnote>'
        "</w:footnotes>"
    ).encode()
    with zipfile.ZipFile(package) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            part = source.read(info.filename)
            if info.filename == "[Content_Types].xml":
                part = part.replace(
                    b"</Types>",
                    b'<Override PartName="/word/footnotes.xml" ContentType="application/'
                    b'vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml"/></Types>',
                )
            elif info.filename == "word/_rels/document.xml.rels":
                part = part.replace(
                    b"</Relationships>",
                    b'<Relationship Id="rIdFootnotes" Type="http://schemas.'
                    b'openxmlformats.org/officeDocument/2006/relationships/footnotes" '
                    b'Target="footnotes.xml"/></Relationships>',
                )
            target.writestr(info, part)
        target.writestr("word/footnotes.xml", footnotes)
    return out.getvalue()

"""Word templates for rendering several recipients' copies in one LibreOffice run: ordinary ones (each part must be
its solo render) and hostile ones (each tries to carry one recipient's values into another's part)."""

from __future__ import annotations

import io
import re
import zipfile

from docx import Document
from docx.enum.section import WD_ORIENT, WD_SECTION
from docx.enum.text import WD_BREAK
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Cm

from tests.support import docx_files
from tests.support.hostile_docx import part, with_parts

#: Rows for the templates here: each value is its recipient's own (no two rows share a word).
ROWS = [
    {"name": "Анна Иванова", "number": "C-101", "city": "Москва", "email": "anna@example.com", "role": "Инженер",
     "salary": "4200", "extra": "0", "note": "отпуск"},
    {"name": "Пётр Сидоров", "number": "C-202", "city": "Тверь", "email": "petr@example.com", "role": "Бухгалтер",
     "salary": "5300", "extra": "8", "note": "командировка"},
    {"name": "Жанна Юрьева", "number": "C-303", "city": "Казань", "email": "zhanna@example.com", "role": "Юрист",
     "salary": "6400", "extra": "1", "note": "больничный"},
]  # fmt: skip


def _field(paragraph, code: str) -> None:
    """A complex field ``code`` (PAGE, NUMPAGES …) at the end of ``paragraph``."""
    run = paragraph.add_run()
    for kind in ("begin", "code", "separate", "result", "end"):
        if kind == "code":
            element = OxmlElement("w:instrText")
            element.set(qn("xml:space"), "preserve")
            element.text = f" {code} "
        elif kind == "result":
            element = OxmlElement("w:t")
            element.text = "1"
        else:
            element = OxmlElement("w:fldChar")
            element.set(qn("w:fldCharType"), kind)
        run._r.append(element)


def _body_xml(docx: bytes, change) -> bytes:
    """``docx`` with its word/document.xml changed by ``change(xml) -> xml``."""
    return with_parts({"word/document.xml": change(part(docx, "word/document.xml")).encode()}, docx)


def long_contract() -> bytes:
    """The contract with ``{{ extra }}`` more pages, each naming its recipient: a 10-page copy among 2-page ones."""
    document = Document(io.BytesIO(docx_files.contract()))
    document.add_paragraph("{%p for i in range(extra|int) %}")
    appendix = document.add_paragraph("Приложение {{ i }} к договору {{ number }}, {{ name }}.")
    appendix.add_run().add_break(WD_BREAK.PAGE)
    document.add_paragraph("{%p endfor %}")
    document.add_paragraph("Конец договора {{ number }}.")
    return docx_files.save(document)


def title_page() -> bytes:
    """A first page with a header of its own (``titlePg``), the others with another, and a page number."""
    document = Document()
    section = document.sections[0]
    section.different_first_page_header_footer = True
    section.first_page_header.paragraphs[0].text = "Титульный лист: {{ name }}"
    section.header.paragraphs[0].text = "Договор {{ number }}, {{ city }}"
    footer = section.footer.paragraphs[0]
    footer.add_run("Лист ")
    _field(footer, "PAGE")
    document.add_heading("Договор {{ number }}", level=1)
    for clause in range(60):
        document.add_paragraph(f"Пункт {clause}. Работник {{{{ name }}}} работает в городе {{{{ city }}}}.")
    return docx_files.save(document)


def landscape_section() -> bytes:
    """A portrait first section, then a landscape one (a new page) with a table, each section's header its own."""
    document = Document()
    first = document.sections[0]
    first.header.paragraphs[0].text = "Договор {{ number }}"
    document.add_paragraph("Работник: {{ name }}, город {{ city }}.")
    second = document.add_section(WD_SECTION.NEW_PAGE)
    second.orientation = WD_ORIENT.LANDSCAPE
    second.page_width, second.page_height = first.page_height, first.page_width
    second.header.is_linked_to_previous = False
    second.header.paragraphs[0].text = "Приложение к договору {{ number }}"
    table = document.add_table(rows=2, cols=3)
    table.style = "Table Grid"
    for column, text in enumerate(("{{ name }}", "{{ role }}", "{{ salary }}")):
        table.cell(0, column).text = ["Работник", "Должность", "Оклад"][column]
        table.cell(1, column).text = text
    document.add_paragraph("Подпись: {{ name }}")
    return docx_files.save(document)


def numbered_list() -> bytes:
    """Numbered lists as Word makes them (the "List Number" style) and bullets, with images and a table."""
    document = Document()
    document.add_paragraph("Обязанности работника {{ name }}:")
    for duty in ("приходить вовремя", "работать в городе {{ city }}", "писать на {{ email }}"):
        document.add_paragraph(duty, style="List Number")
    document.add_paragraph("Права:")
    for right in ("отпуск", "оклад {{ salary }}"):
        document.add_paragraph(right, style="List Bullet")
    document.add_picture(io.BytesIO(docx_files.png(rgb=(30, 120, 200))), width=Cm(4))
    table = document.add_table(rows=1, cols=2)
    table.style = "Table Grid"
    table.cell(0, 0).text, table.cell(0, 1).text = "{{ role }}", "{{ number }}"
    document.add_paragraph("Итого: {{ salary }}.")
    return docx_files.save(document)


def page_of_pages() -> bytes:
    """A footer "page 1 of 2" (PAGE and NUMPAGES) whose header names the recipient."""
    document = Document(io.BytesIO(docx_files.contract()))
    footer = document.sections[0].footer.paragraphs[0]
    footer.add_run(" из ")
    _field(footer, "NUMPAGES")
    return docx_files.save(document)


def footnote() -> bytes:
    """The contract with a footnote naming its recipient (``docx_files.everything``'s)."""
    return docx_files.everything()


def comment() -> bytes:
    """A comment on the recipient's name, its text naming them too."""
    document = Document()
    paragraph = document.add_paragraph("Договор с ")
    named = paragraph.add_run("{{ name }}")
    paragraph.add_run(" на {{ salary }}.")
    document.add_comment(named, text="Проверить {{ name }}", author="HR", initials="HR")
    return docx_files.save(document)


def tracked_changes() -> bytes:
    """An insertion and a deletion, each holding a row's value, recorded as tracked changes."""
    base = docx_files.simple("Договор с {{ name }}.")
    changes = (
        '<w:ins w:id="11" w:author="HR" w:date="2026-01-01T00:00:00Z"><w:r><w:t xml:space="preserve"> Оклад {{ salary }}.'
        '</w:t></w:r></w:ins><w:del w:id="12" w:author="HR" w:date="2026-01-01T00:00:00Z"><w:r><w:delText '
        'xml:space="preserve"> Город {{ city }}.</w:delText></w:r></w:del>'
    )
    return _body_xml(base, lambda xml: xml.replace("</w:p>", changes + "</w:p>", 1))


_BOX = (
    '<w:r><w:drawing><wp:anchor xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" '
    'distT="0" distB="0" distL="0" distR="0" simplePos="0" relativeHeight="2" behindDoc="0" locked="0" '
    'layoutInCell="1" allowOverlap="1"><wp:simplePos x="0" y="0"/>'
    '<wp:positionH relativeFrom="page"><wp:posOffset>1440000</wp:posOffset></wp:positionH>'
    '<wp:positionV relativeFrom="{relative}"><wp:posOffset>{offset}</wp:posOffset></wp:positionV>'
    '<wp:extent cx="3600000" cy="720000"/><wp:effectExtent l="0" t="0" r="0" b="0"/><wp:wrapNone/>'
    '<wp:docPr id="{id}" name="Box {id}"/><a:graphic xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main">'
    '<a:graphicData uri="http://schemas.microsoft.com/office/word/2010/wordprocessingShape">'
    '<wps:wsp xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"><wps:cNvSpPr txBox="1"/>'
    '<wps:spPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="3600000" cy="720000"/></a:xfrm>'
    '<a:prstGeom prst="rect"><a:avLst/></a:prstGeom><a:noFill/><a:ln><a:noFill/></a:ln></wps:spPr>'
    "<wps:txbx><w:txbxContent><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:txbxContent>"
    '</wps:txbx><wps:bodyPr lIns="0" tIns="0" rIns="0" bIns="0"/></wps:wsp></a:graphicData></a:graphic>'
    "</wp:anchor></w:drawing></w:r>"
)


def floating_shape() -> bytes:
    """Text boxes naming the recipient, placed off their paragraphs' flow: one anchored in the first paragraph and
    lifted above it to the page's top edge, one anchored in the last paragraph and placed at the page's foot."""
    document = Document()
    document.add_paragraph("Договор с {{ name }}.")
    for line in range(20):
        document.add_paragraph(f"Пункт {line}.")
    document.add_paragraph("Конец.")
    boxes = [
        _BOX.format(relative="paragraph", offset=-1080000, id=51, text="Сверху: {{ name }}, {{ salary }}"),
        _BOX.format(relative="page", offset=9000000, id=52, text="Внизу: {{ name }}, {{ city }}"),
    ]

    def place(xml: str) -> str:
        first = xml.index("</w:p>")
        xml = xml[:first] + boxes[0] + xml[first:]
        last = xml.rindex("</w:p>")
        return xml[:last] + boxes[1] + xml[last:]

    return _body_xml(docx_files.save(document), place)


def continuous_section() -> bytes:
    """A one-section template whose section says it starts "continuous" (as Word writes it after some edits)."""
    base = docx_files.simple("Договор с {{ name }}, оклад {{ salary }}.")
    return _body_xml(base, lambda xml: xml.replace("<w:sectPr>", '<w:sectPr><w:type w:val="continuous"/>', 1))


def header_in_second_section() -> bytes:
    """A first section without a header and a second with one naming the recipient: in Word, a section without a
    header shows the previous section's."""
    document = Document()
    document.add_paragraph("Договор с {{ name }}.")
    second = document.add_section(WD_SECTION.NEW_PAGE)
    second.header.is_linked_to_previous = False
    second.header.paragraphs[0].text = "Приложение для {{ name }}, оклад {{ salary }}"
    document.add_paragraph("Приложение.")
    return docx_files.save(document)


def cross_reference(switches: str = "") -> bytes:
    """A bookmark on the recipient's name and a REF field that repeats what it marks (``switches``: ``\\h`` makes
    it a link to the bookmark)."""
    base = docx_files.simple("Работник {{ name }}.")
    marked = (
        '<w:bookmarkStart w:id="3" w:name="worker"/><w:r><w:t>{{ name }}</w:t></w:r><w:bookmarkEnd w:id="3"/>'
        '</w:p><w:p><w:r><w:t xml:space="preserve">Повтор: </w:t></w:r><w:r><w:fldChar w:fldCharType="begin"/></w:r>'
        f'<w:r><w:instrText xml:space="preserve"> REF worker {switches}</w:instrText></w:r>'
        '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>x</w:t></w:r>'
        '<w:r><w:fldChar w:fldCharType="end"/></w:r></w:p>'
    )
    return _body_xml(base, lambda xml: xml.replace("</w:p>", marked, 1))


def cross_reference_link() -> bytes:
    return cross_reference("\\h ")


def _with_part(docx: bytes, name: str, data: bytes, content_type: str, relationship: str) -> bytes:
    """``docx`` with a part added, its content type declared and the document part related to it."""
    target = name.removeprefix("word/")
    types = part(docx, "[Content_Types].xml").replace(
        "</Types>", f'<Override PartName="/{name}" ContentType="{content_type}"/></Types>'
    )
    rels = part(docx, "word/_rels/document.xml.rels").replace(
        "</Relationships>", f'<Relationship Id="rIdAdded" Type="{relationship}" Target="{target}"/></Relationships>'
    )
    return with_parts(
        {name: data, "[Content_Types].xml": types.encode(), "word/_rels/document.xml.rels": rels.encode()}, docx
    )


def part_names(docx: bytes) -> list[str]:
    with zipfile.ZipFile(io.BytesIO(docx)) as archive:
        return archive.namelist()


def sections(docx: bytes) -> int:
    return len(re.findall(r"<w:sectPr\b", part(docx, "word/document.xml")))


def plain() -> bytes:
    return docx_files.simple("Договор с {{ name }}.")


def deleted_paragraph_mark() -> bytes:
    """The last paragraph's mark deleted as a tracked change: the paragraph joins the one after it, if any."""
    base = docx_files.simple("Договор с {{ name }}.")
    mark = '<w:pPr><w:rPr><w:del w:id="21" w:author="HR" w:date="2026-01-01T00:00:00Z"/></w:rPr></w:pPr>'
    return _body_xml(base, lambda xml: xml.replace("<w:p>", "<w:p>" + mark, 1))


def kept_with_next() -> bytes:
    """A page nearly full, its last paragraph kept with the next one (there is none in the recipient's document)."""
    document = Document()
    for line in range(44):
        document.add_paragraph(f"Строка {line} для {{{{ name }}}}.")
    document.add_paragraph("Подписи сторон, {{ name }}:").paragraph_format.keep_with_next = True
    return docx_files.save(document)


def two_columns() -> bytes:
    """A short text in two columns: balanced or not at the document's end."""
    document = Document()
    columns = document.sections[0]._sectPr
    cols = columns.find(qn("w:cols"))
    cols.set(qn("w:num"), "2")
    for line in range(6):
        document.add_paragraph(f"Колонка {line}: {{{{ name }}}}, {{{{ city }}}}.")
    return docx_files.save(document)


def inner_links() -> bytes:
    """Links to a bookmark on the second page (one a hyperlink with an anchor, one a HYPERLINK field with ``\\l``),
    and a link to an address."""
    document = Document()
    document.add_paragraph("Работник {{ name }}: к подписи, на сайт.")
    document.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
    document.add_paragraph("Подпись {{ name }}.")
    links = (
        '<w:hyperlink w:anchor="sign"><w:r><w:t xml:space="preserve">к подписи</w:t></w:r></w:hyperlink>'
        '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText xml:space="preserve"> HYPERLINK \\l "sign" '
        '</w:instrText></w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t xml:space="preserve"> (туда)'
        '</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r>'
        '<w:hyperlink r:id="rIdSite"><w:r><w:t xml:space="preserve"> сайт</w:t></w:r></w:hyperlink>'
    )

    def mark(xml: str) -> str:
        xml = xml.replace("к подписи, на сайт.</w:t></w:r>", "</w:t></w:r>" + links, 1)
        return xml.replace(
            "<w:r><w:t>Подпись", '<w:bookmarkStart w:id="9" w:name="sign"/><w:r><w:t>Подпись', 1
        ).replace("</w:t></w:r></w:p><w:sectPr", '</w:t></w:r><w:bookmarkEnd w:id="9"/></w:p><w:sectPr', 1)

    linked = _body_xml(docx_files.save(document), mark)
    rels = part(linked, "word/_rels/document.xml.rels").replace(
        "</Relationships>",
        '<Relationship Id="rIdSite" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
        'hyperlink" Target="https://example.com/rules" TargetMode="External"/></Relationships>',
    )
    return with_parts({"word/_rels/document.xml.rels": rels.encode()}, linked)


def _with_field(code: str) -> bytes:
    document = Document()
    document.add_paragraph("Договор с {{ name }}.")
    _field(document.add_paragraph("Поле: "), code)
    document.add_paragraph("Конец.")
    return docx_files.save(document)


def table_of_contents() -> bytes:
    """A table of contents (a TOC field) over headings naming the recipient."""
    document = Document()
    _field(document.add_paragraph(), 'TOC \\o "1-3" \\h')
    document.add_heading("Договор с {{ name }}", level=1)
    document.add_paragraph("Текст.")
    return docx_files.save(document)


def title_field() -> bytes:
    """A TITLE field: it shows the document's title, which names the recipient."""
    document = Document(io.BytesIO(_with_field("TITLE")))
    document.core_properties.title = "Договор {{ name }}"
    return docx_files.save(document)


def numbered_lines() -> bytes:
    """Lines numbered (``lnNumType`` without a restart: through the whole document, as Word reads it)."""
    document = Document()
    for line in range(70):  # two pages
        document.add_paragraph(f"Строка {line} для {{{{ name }}}}.")
    numbering = OxmlElement("w:lnNumType")
    numbering.set(qn("w:countBy"), "1")
    document.sections[0]._sectPr.find(qn("w:pgMar")).addnext(numbering)
    return docx_files.save(document)


def last_table() -> bytes:
    """A template that ends with a table (Word never saves one, python-docx does)."""
    document = Document()
    document.add_paragraph("Договор с {{ name }}.")
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Оклад", "{{ salary }}"
    return docx_files.save(document)


def linked_text_boxes() -> bytes:
    """Two text boxes linked as Word links them (the second ``linkedTxbx`` of the first's ``txbx id``): the name
    overflows from the small first box into the second."""
    first = (
        _BOX.format(relative="paragraph", offset=0, id=61, text="Первая рамка связанного текста для {{ name }}, " * 6)
        .replace("<wps:txbx>", '<wps:txbx id="1">')
        .replace('cy="720000"', 'cy="200000"')
    )
    second = _BOX.format(relative="paragraph", offset=2880000, id=62, text="").replace(
        "<wps:txbx><w:txbxContent><w:p><w:r><w:t></w:t></w:r></w:p></w:txbxContent></wps:txbx>",
        '<wps:linkedTxbx id="1" seq="1"/>',
    )
    document = Document()
    document.add_paragraph("Договор с {{ name }}.")
    document.add_paragraph("Конец.")

    def place(xml: str) -> str:
        at = xml.index("</w:p>")
        return xml[:at] + first + second + xml[at:]

    return _body_xml(docx_files.save(document), place)

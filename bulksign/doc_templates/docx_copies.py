"""Several recipients' filled copies of one Word template as one document, for one LibreOffice run.
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import copy
import functools
import io
import posixpath
import re
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, cast

from lxml import etree

from bulksign.core.errors import BulksignError
from bulksign.core.messages import N_
from bulksign.documents.docx_parts import FIRST_PAGE

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
W = f"{{{W_NS}}}"
R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_RELS = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_TYPES = "{http://schemas.openxmlformats.org/package/2006/content-types}"
_OFFICE_DOCUMENT = "/officeDocument"
#: Fields whose bookmark name each copy's own takes the place of.
BOOKMARK_FIELDS = ("REF", "PAGEREF")
#: Where a section's properties may say how it starts and how its pages are numbered (the schema's order).
_BEFORE_TYPE = ("headerReference", "footerReference", "footnotePr", "endnotePr")
_BEFORE_PAGE_NUMBERS = (*_BEFORE_TYPE, "type", "pgSz", "pgMar", "paperSrc", "pgBorders", "lnNumType")
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
_BOOKMARK_IDS = 1_000_000
#: A HYPERLINK field's switch that names the bookmark it links to.
_LINK_TO = re.compile(r'(\\l\s+"?)([^"\s]+)("?)')


class Unmergeable(BulksignError):
    """These copies cannot be put in one document; ``message`` says why, for people."""

    message: N_

    def __init__(self, message: N_):
        super().__init__(message)


def parse(xml: bytes) -> etree._Element:
    return etree.fromstring(xml, _PARSER)


@dataclass
class Field:
    """One field of a part: its code, and the elements that hold it (a simple field, or a complex field's
    instruction texts, in order)."""

    code: str
    simple: etree._Element | None
    texts: list[etree._Element]

    @property
    def name(self) -> str:
        words = self.code.split()
        return words[0].upper().strip('"') if words else ""

    def recode(self, code: str) -> None:
        if self.simple is not None:
            self.simple.set(f"{W}instr", code)
            return
        for index, text in enumerate(self.texts):
            text.text = code if index == 0 else ""


def fields(root: etree._Element) -> Iterator[Field]:
    """Every field of a part, as Word reads its code: a simple field's ``instr``, or a complex field's instruction
    texts from its begin mark to its separator or end, joined across runs."""
    open_fields: list[Field] = []
    for element in root.iter(f"{W}fldSimple", f"{W}fldChar", f"{W}instrText"):
        if element.tag == f"{W}fldSimple":
            yield Field(element.get(f"{W}instr", ""), element, [])
        elif element.tag == f"{W}instrText":
            if open_fields:
                open_fields[-1].texts.append(element)
        elif element.get(f"{W}fldCharType") == "begin":
            open_fields.append(Field("", None, []))
        elif element.get(f"{W}fldCharType") == "end" and open_fields:
            field = open_fields.pop()
            field.code = "".join(text.text or "" for text in field.texts)
            yield field


def local(element: etree._Element) -> str:
    return etree.QName(element).localname if isinstance(element.tag, str) else ""


def _paragraph_sections(paragraph: etree._Element) -> list[etree._Element]:
    properties = paragraph.find(f"{W}pPr")
    return [] if properties is None else properties.findall(f"{W}sectPr")


def sections(body: etree._Element) -> list[etree._Element]:
    """The body's sections' properties in order: those that end a section in a paragraph, then the last one."""
    return [*(s for p in body.iter(f"{W}p") for s in _paragraph_sections(p)), *body.iterchildren(f"{W}sectPr")]


def rels_of(name: str) -> str:
    """The relationships part of the part ``name``."""
    folder, file = posixpath.split(name)
    return posixpath.join(folder, "_rels", f"{file}.rels")


def main_document(package: Mapping[str, bytes]) -> str:
    """The name of the package's document part (``word/document.xml`` as Word saves it)."""
    relations = parse(package["_rels/.rels"]).iter(f"{_RELS}Relationship")
    return cast(str, next(r.get("Target") for r in relations if r.get("Type").endswith(_OFFICE_DOCUMENT)).lstrip("/"))


class Relation(NamedTuple):
    #: The last word of its type (``header``, ``image``, ``hyperlink`` …).
    kind: str
    #: The part's name inside the package, or the address outside it.
    target: str
    outside: bool


def related(package: Mapping[str, bytes], name: str) -> dict[str, Relation]:
    """The relationships of the part ``name`` by id."""
    if rels_of(name) not in package:
        return {}
    found: dict[str, Relation] = {}
    for relation in parse(package[rels_of(name)]).iter(f"{_RELS}Relationship"):
        kind, target = relation.get("Type", "").rsplit("/", 1)[-1], relation.get("Target", "")
        if relation.get("TargetMode") == "External":
            found[relation.get("Id")] = Relation(kind, target, True)
        else:
            found[relation.get("Id")] = Relation(
                kind, posixpath.normpath(posixpath.join(posixpath.dirname(name), target)), False
            )
    return found


@functools.lru_cache(maxsize=8)
def _style_lists(styles: bytes) -> dict[str, tuple[str, str]]:
    """Paragraph style → (numbering id, level) of the list it puts its paragraphs in (its own ``numPr`` or the one
    of a style it is based on)."""
    own, based = {}, {}
    for style in parse(styles).iter(f"{W}style"):
        name = style.get(f"{W}styleId")
        parent = style.find(f"{W}basedOn")
        based[name] = None if parent is None else parent.get(f"{W}val")
        numbering = style.find(f"{W}pPr/{W}numPr")
        if numbering is not None:
            number, level = numbering.find(f"{W}numId"), numbering.find(f"{W}ilvl")
            own[name] = (
                None if number is None else number.get(f"{W}val"),
                "0" if level is None else level.get(f"{W}val"),
            )
    found: dict[str, tuple[str, str]] = {}
    for name in based:
        seen, current = set(), name
        while current is not None and current not in own and current not in seen:
            seen.add(current)
            current = based.get(current)
        if current in own:
            number, level = own[current]
            if number is not None and number != "0":
                found[name] = (number, level)
    return found


def merge(package: Mapping[str, bytes], copies: Sequence[Mapping[str, bytes]]) -> bytes:
    """One .docx of ``copies`` (each the parts ``docx_templates.fill_parts`` wrote for a recipient) in the template's
    ``package`` (``docx_templates.package``); Unmergeable when a copy does not end with a paragraph of its own."""
    return _Merge(package, copies).packed()


class _Merge:
    def __init__(self, package: Mapping[str, bytes], copies: Sequence[Mapping[str, bytes]]) -> None:
        self.package, self.copies = package, copies
        self.document = main_document(package)
        self.relations = parse(package[rels_of(self.document)])
        self.targets = related(package, self.document)
        self.types = parse(package["[Content_Types].xml"])
        self.out: dict[str, bytes] = {**package, **copies[0]}
        by_kind = {relation.kind: relation.target for relation in self.targets.values() if not relation.outside}
        self.numbering_name = by_kind.get("numbering")
        styles = package.get(by_kind.get("styles", ""))
        self.style_lists = _style_lists(styles) if styles else {}
        self.lists = _Lists(
            parse(package[self.numbering_name])
            if self.numbering_name is not None and self.numbering_name in package
            else None
        )

    def packed(self) -> bytes:
        merged = parse(self.copies[0][self.document])
        body = merged.find(f"{W}body")
        for element in list(body):
            body.remove(element)
        for index, filled in enumerate(self.copies):
            content, last_section = self._copy(index, parse(filled[self.document]).find(f"{W}body"))
            body.extend(content)
            if index < len(self.copies) - 1:
                _end_paragraph_with(content[-1], last_section)
            else:
                body.append(last_section)
        self.out[self.document] = _xml(merged)
        self.out[rels_of(self.document)] = _xml(self.relations)
        self.out["[Content_Types].xml"] = _xml(self.types)
        if self.lists.added and self.numbering_name is not None:
            self.out[self.numbering_name] = _xml(self.lists.numbering)
        packed = io.BytesIO()
        with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            for name, data in self.out.items():
                archive.writestr(name, data)
        return packed.getvalue()

    def _copy(self, index: int, body: etree._Element) -> tuple[list[etree._Element], etree._Element]:
        """Copy ``index``'s body made its own: its content, and its last section's properties."""
        content = list(body)
        if not content or content[-1].tag != f"{W}sectPr":
            raise Unmergeable(N_("A filled-in document has no page settings at its end."))
        last_section = content.pop()
        if not content or content[-1].tag != f"{W}p" or _paragraph_sections(content[-1]):
            raise Unmergeable(N_("A filled-in document does not end with a paragraph of its own."))
        own = sections(body)
        _start_on_new_page(own[0])
        if index:
            parts: dict[str, str] = {}
            for section in own:
                for reference in section:
                    if local(reference) in ("headerReference", "footerReference"):
                        rid = reference.get(R_ID)
                        if rid not in parts:
                            parts[rid] = self._own_part(rid, index)
                        reference.set(R_ID, parts[rid])
            _rename_bookmarks(body, index)
            self.lists.restart(body, self.style_lists)
        _mark_first_page(next(body.iter(f"{W}p")), index)
        return content, last_section

    def _own_part(self, rid: str, index: int) -> str:
        """Copy ``index``'s filled header or footer under a name of its own, related from the document (with the
        original's own relationships: its images) and declared in the content types; its relationship's id."""
        original = self.targets[rid].target
        folder, file = posixpath.split(original)
        name = posixpath.join(folder, f"copy{index}-{file}")
        self.out[name] = self.copies[index].get(original, self.package.get(original, b""))
        if rels_of(original) in self.package:
            self.out[rels_of(name)] = self.package[rels_of(original)]
        declared = next(
            (o.get("ContentType") for o in self.types.iter(f"{_TYPES}Override") if o.get("PartName") == f"/{original}"),
            None,
        )
        if declared is not None:
            etree.SubElement(self.types, f"{_TYPES}Override", PartName=f"/{name}", ContentType=declared)
        relation = next(r for r in self.relations.iter(f"{_RELS}Relationship") if r.get("Id") == rid)
        new_id = f"rIdCopy{index}x{rid}"
        target = posixpath.relpath(name, posixpath.dirname(self.document) or ".")
        etree.SubElement(self.relations, f"{_RELS}Relationship", Id=new_id, Type=relation.get("Type"), Target=target)
        return new_id


def _xml(root: etree._Element) -> bytes:
    return cast(bytes, etree.tostring(root, xml_declaration=True, encoding="UTF-8", standalone=True))


def _mark_first_page(paragraph: etree._Element, index: int) -> None:
    """Bookmark ``FIRST_PAGE`` + ``index`` at the start of the copy's first paragraph (it marks no text)."""
    start = etree.Element(f"{W}bookmarkStart")
    start.set(f"{W}id", str(_BOOKMARK_IDS * 1000 + index))
    start.set(f"{W}name", f"{FIRST_PAGE}{index}")
    end = etree.Element(f"{W}bookmarkEnd")
    end.set(f"{W}id", str(_BOOKMARK_IDS * 1000 + index))
    at = 1 if len(paragraph) and paragraph[0].tag == f"{W}pPr" else 0
    paragraph.insert(at, start)
    paragraph.insert(at + 1, end)


def _child(section: etree._Element, name: str, after: tuple[str, ...]) -> etree._Element:
    """The section's ``name`` child, added where the schema puts it (after the children named in ``after``)."""
    found = section.find(f"{W}{name}")
    if found is None:
        found = etree.Element(f"{W}{name}")
        position = 0
        for at, element in enumerate(section):
            if local(element) in after:
                position = at + 1
        section.insert(position, found)
    return found


def _start_on_new_page(section: etree._Element) -> None:
    """The copy's first section starts a page (not "continuous" after the copy before), numbered from its start."""
    _child(section, "type", _BEFORE_TYPE).set(f"{W}val", "nextPage")
    numbers = _child(section, "pgNumType", _BEFORE_PAGE_NUMBERS)
    if numbers.get(f"{W}start") is None:
        numbers.set(f"{W}start", "1")


def _end_paragraph_with(paragraph: etree._Element, section: etree._Element) -> None:
    """The copy's last section ends in its last paragraph, as Word ends a section that another follows."""
    properties = paragraph.find(f"{W}pPr")
    if properties is None:
        properties = etree.Element(f"{W}pPr")
        paragraph.insert(0, properties)
    change = properties.find(f"{W}pPrChange")
    if change is not None:
        change.addprevious(section)
    else:
        properties.append(section)


def _rename_bookmarks(body: etree._Element, index: int) -> None:
    """Copy ``index``'s bookmarks, and the fields that name them, under names and ids of its own."""
    names = {}
    for start in body.iter(f"{W}bookmarkStart"):
        name = start.get(f"{W}name", "")
        names[name] = f"{name}_{index}"
        start.set(f"{W}name", names[name])
    for mark in body.iter(f"{W}bookmarkStart", f"{W}bookmarkEnd"):
        number = mark.get(f"{W}id", "")
        if number.isdigit():
            mark.set(f"{W}id", str(int(number) + _BOOKMARK_IDS * index))
    for link in body.iter(f"{W}hyperlink"):
        if link.get(f"{W}anchor") in names:
            link.set(f"{W}anchor", names[link.get(f"{W}anchor")])
    for field in fields(body):
        words = field.code.split(maxsplit=2)
        if field.name in BOOKMARK_FIELDS and len(words) > 1 and words[1] in names:
            field.recode(" ".join([words[0], names[words[1]], *words[2:]]) + " ")
        elif field.name == "HYPERLINK":
            field.recode(_LINK_TO.sub(lambda m: m[1] + names.get(m[2], m[2]) + m[3], field.code))


class _Lists:
    """The lists of copies after the first, each started again: a copy of the list's definition under new ids, as
    a list of its own that nothing before it continues."""

    def __init__(self, numbering: etree._Element | None) -> None:
        self.numbering = numbering
        self.added = False
        if numbering is None:
            return
        self._nums = {n.get(f"{W}numId"): n for n in numbering.iter(f"{W}num")}
        self._abstracts = {a.get(f"{W}abstractNumId"): a for a in numbering.iter(f"{W}abstractNum")}
        self._next_num = max((int(n) for n in self._nums if n.isdigit()), default=0) + 1
        self._next_abstract = max((int(a) for a in self._abstracts if a.isdigit()), default=0) + 1

    def restart(self, body: etree._Element, style_lists: dict[str, tuple[str, str]]) -> None:
        if self.numbering is None:
            return
        own: dict[str, str] = {}
        for paragraph in body.iter(f"{W}p"):
            properties = paragraph.find(f"{W}pPr")
            if properties is None:
                continue
            numbering = properties.find(f"{W}numPr")
            number = None if numbering is None else numbering.find(f"{W}numId")
            if number is None:
                style = properties.find(f"{W}pStyle")
                listed = None if style is None else style_lists.get(style.get(f"{W}val"))
                if listed is None:
                    continue
                if numbering is None:
                    numbering = etree.SubElement(properties, f"{W}numPr")
                    _place_numbering(properties, numbering)
                if numbering.find(f"{W}ilvl") is None:
                    etree.SubElement(numbering, f"{W}ilvl").set(f"{W}val", listed[1])
                number = etree.SubElement(numbering, f"{W}numId")
                number.set(f"{W}val", listed[0])
            value = number.get(f"{W}val")
            if value not in self._nums:
                continue
            if value not in own:
                own[value] = self._copy(value)
            number.set(f"{W}val", own[value])

    def _copy(self, value: str) -> str:
        assert self.numbering is not None  # ``restart`` copies only where the package has numbering
        num = copy.deepcopy(self._nums[value])
        num.set(f"{W}numId", str(self._next_num))
        self._next_num += 1
        reference = num.find(f"{W}abstractNumId")
        abstract = self._abstracts.get(reference.get(f"{W}val")) if reference is not None else None
        if abstract is not None:
            twin = copy.deepcopy(abstract)
            twin.set(f"{W}abstractNumId", str(self._next_abstract))
            identifier = twin.find(f"{W}nsid")
            if identifier is not None:
                identifier.set(f"{W}val", f"{0xB0000000 + self._next_abstract:08X}")
            reference.set(f"{W}val", str(self._next_abstract))
            self._next_abstract += 1
            last_abstract = list(self.numbering.iter(f"{W}abstractNum"))[-1]
            last_abstract.addnext(twin)
        last_num = list(self.numbering.iter(f"{W}num"))[-1]
        last_num.addnext(num)
        self.added = True
        return cast(str, num.get(f"{W}numId"))


#: What comes before ``numPr`` in a paragraph's properties.
_BEFORE_NUMBERING = ("pStyle", "keepNext", "keepLines", "pageBreakBefore", "framePr", "widowControl")


def _place_numbering(properties: etree._Element, numbering: etree._Element) -> None:
    properties.remove(numbering)
    position = 0
    for at, element in enumerate(properties):
        if local(element) in _BEFORE_NUMBERING:
            position = at + 1
    properties.insert(position, numbering)

"""What a Word package may hold before LibreOffice opens it: nothing that loads a file or an address.
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lxml import etree

from bulksign.core.messages import N_
from bulksign.doc_templates.errors import TemplateError

#: Relationship types (transitional and strict) whose target may be outside the package: a hyperlink is never
#: loaded by a conversion, only written into the PDF as a link.
_HYPERLINK_TYPES = frozenset(
    {
        "http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink",
        "http://purl.oclc.org/ooxml/officeDocument/relationships/hyperlink",
    }
)
_LINK_SCHEMES = ("http:", "https:", "mailto:")
#: Elements that may point at a hyperlink relationship (the body's links, a drawing's click and hover).
_HYPERLINK_ELEMENTS = frozenset({"hyperlink", "hlinkClick", "hlinkHover", "hlinkMouseOver"})
#: The last word of relationship types that embed or pull in another document, inside the package or not.
_EMBEDDING_TYPES = frozenset(
    {
        "oleObject",
        "package",
        "subDocument",
        "aFChunk",
        "attachedTemplate",
        "frame",
        "control",
        "activeXControl",
        "activeXControlBinary",
        "mailMergeSource",
        "mailMergeHeaderSource",
        "mailMergeRecipientData",
        "recipientData",
        "externalLink",
        "externalLinkPath",
        "oleObjectLink",
        "embeddedPackage",
    }
)
#: Elements (by local name, in any namespace) that embed objects, other documents or data sources.
_EMBEDDING_ELEMENTS = frozenset(
    {
        "object",
        "OLEObject",
        "objectEmbed",
        "objectLink",
        "control",
        "altChunk",
        "subDoc",
        "mailMerge",
        "frameset",
        "oleObj",
    }
)
#: Folders of parts that only embedded objects use.
_EMBEDDING_FOLDERS = re.compile(r"(^|/)(embeddings|activeX|oleObjects)/", re.I)
#: Fields that read another file or address when they are updated.
_FETCHING_FIELDS = frozenset(
    {
        "INCLUDETEXT",
        "INCLUDEPICTURE",
        "INCLUDE",
        "IMPORT",
        "LINK",
        "DDE",
        "DDEAUTO",
        "DATABASE",
        "EMBED",
        "AUTOTEXTLIST",
        "HTMLCONTROL",
    }
)
#: These also refused anywhere in a field's code (a nested field can build the field's name).
_FETCHING_WORD = re.compile(r"\b(INCLUDETEXT|INCLUDEPICTURE|IMPORT|DDEAUTO|DDE)\b")
#: Attributes that name a resource to load (VML's ``src``, SVG's ``href``, ``o:href``).
_LOADING_ATTRIBUTES = frozenset({"src", "href", "althref"})
#: The parts read as XML: every part but images and other binaries.
_XML_PART = re.compile(r"\.(xml|rels|vml|svg)$", re.I)
#: A style in an SVG image that loads another file (``url(…)`` but to a fragment or data, ``@import``).
_SVG_STYLE_LOAD = re.compile(r"@import|url\(\s*['\"]?(?!#|data:)", re.I)

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


@dataclass(frozen=True)
class Hyperlinks:
    """The ids of each part's relationships that are outside hyperlinks: the only ids that may leave the package,
    and only from the elements that make links."""

    by_part: Mapping[str, frozenset[str]]


def check_package(parts: Mapping[str, bytes]) -> Hyperlinks:
    """Refuse (TemplateError) a whole package that would make LibreOffice load anything from outside it; returns
    its hyperlinks, for ``check_parts`` of the parts filled in later."""
    for name in parts:
        if _EMBEDDING_FOLDERS.search(name):
            raise _embeds()
    hyperlinks = Hyperlinks(
        {_source_of(name): _relationships(name, xml) for name, xml in parts.items() if name.endswith(".rels")}
    )
    check_parts({name: xml for name, xml in parts.items() if not name.endswith(".rels")}, hyperlinks=hyperlinks)
    return hyperlinks


def check_parts(parts: Mapping[str, bytes], *, hyperlinks: Hyperlinks) -> None:
    """Refuse (TemplateError) content parts that embed, include or load anything."""
    for name, xml in parts.items():
        if not _XML_PART.search(name):
            continue
        root = _parse(xml)
        _check_elements(root.iter(), linkable=hyperlinks.by_part.get(name, frozenset()))
        _check_fields(root.iter())
        if name.lower().endswith(".svg") and any(_SVG_STYLE_LOAD.search(text) for text in root.itertext()):
            raise _links_outside()


def _parse(xml: bytes) -> etree._ElementTree:
    try:
        tree = etree.ElementTree(etree.fromstring(xml, _PARSER))
    except (etree.XMLSyntaxError, ValueError):
        raise TemplateError(
            N_(
                "The Word file is broken and cannot be read. Open it in Word, save it again as "
                ".docx and upload that. (%(error)s)",
                error="XMLSyntaxError",
            )
        ) from None
    if tree.docinfo.doctype or tree.docinfo.internalDTD is not None:
        raise TemplateError(
            N_(
                "The Word file declares its own XML entities (a DOCTYPE), which Word never writes. "
                "Open it in Word, save it again as .docx and upload that."
            )
        )
    return tree.getroot()


def _source_of(rels_name: str) -> str:
    """The part a relationships part belongs to: ``word/_rels/document.xml.rels`` → ``word/document.xml``."""
    folder, file = posixpath.split(rels_name)
    return posixpath.join(posixpath.dirname(folder), file.removesuffix(".rels"))


def _relationships(name: str, xml: bytes) -> frozenset[str]:
    hyperlinks = set()
    for element in _parse(xml).iter():
        if not isinstance(element.tag, str) or etree.QName(element).localname != "Relationship":
            continue
        # Attributes by local name, in any namespace: a prefixed TargetMode counts as one.
        attributes = {etree.QName(key).localname: value.strip() for key, value in element.attrib.items()}
        kind, target = attributes.get("Type", ""), attributes.get("Target", "")
        if kind.rsplit("/", 1)[-1] in _EMBEDDING_TYPES:
            raise _embeds()
        leaves = (
            attributes.get("TargetMode", "").lower() == "external"
            or re.match(r"^([a-z][a-z0-9+.-]*:|//|\\\\)", target, re.I) is not None
        )
        if not leaves:
            continue
        if kind in _HYPERLINK_TYPES and target.lower().startswith(_LINK_SCHEMES):
            hyperlinks.add(attributes.get("Id", ""))
            continue
        raise _links_outside()
    return frozenset(hyperlinks)


def _check_elements(elements: Iterable[etree._Element], *, linkable: frozenset[str]) -> None:
    for element in elements:
        if not isinstance(element.tag, str):
            continue  # comments and processing instructions
        local = etree.QName(element).localname
        if local in _EMBEDDING_ELEMENTS:
            raise _embeds()
        for key, value in element.attrib.items():
            attribute = etree.QName(key).localname
            if value in linkable and local not in _HYPERLINK_ELEMENTS:
                raise _links_outside()  # an image or object drawn from a hyperlink's address
            if attribute in _LOADING_ATTRIBUTES and value.strip() and not value.strip().startswith(("#", "data:")):
                raise _links_outside()


def _check_fields(elements: Iterable[etree._Element]) -> None:
    """Each field's code, as LibreOffice reads it: a simple field's ``instr``, or a complex field's instruction
    text between its begin and end marks, joined across runs (Word splits codes anywhere); and all of the part's
    instruction text joined, for a name spread over several fields."""
    open_fields: list[list[str]] = []
    everything: list[str] = []
    for element in elements:
        if not isinstance(element.tag, str):
            continue
        local = etree.QName(element).localname
        if local == "fldSimple":
            _check_code(next((v for k, v in element.attrib.items() if etree.QName(k).localname == "instr"), ""))
        elif local == "fldChar":
            kind = next((v for k, v in element.attrib.items() if etree.QName(k).localname == "fldCharType"), "")
            if kind == "begin":
                open_fields.append([])
            elif kind == "end" and open_fields:
                _check_code("".join(open_fields.pop()))
        elif local in ("instrText", "delInstrText"):
            text = element.text or ""
            everything.append(text)
            if open_fields:
                open_fields[-1].append(text)
            else:
                _check_code(text)  # instruction text outside any field: checked on its own
    for code in (*open_fields, everything):  # fields never closed, and the whole part's
        _check_code("".join(code))


def _check_code(code: str) -> None:
    if "{{" in code or "{%" in code:
        raise TemplateError(
            N_(
                "A {{ variable }} inside a Word field code is not allowed: recipient data may not "
                "write field codes. Put the variable in the text."
            )
        )
    words = code.upper().split()
    if (words and words[0].strip('"') in _FETCHING_FIELDS) or _FETCHING_WORD.search(code.upper()):
        raise TemplateError(
            N_(
                "The Word file has a field that loads another file (INCLUDETEXT, INCLUDEPICTURE, "
                "LINK …). Replace the field with its content."
            )
        )


def _links_outside() -> TemplateError:
    return TemplateError(
        N_(
            "The Word file links to an outside file or address (a linked image or document). "
            "Insert images into the document instead of linking them."
        )
    )


def _embeds() -> TemplateError:
    return TemplateError(
        N_(
            "The Word file embeds another document or object (an embedded file, an OLE object, a "
            "sub-document or an imported chunk). Paste its content into the template instead."
        )
    )

"""Why a Word template's documents are converted one by one rather than several in one LibreOffice run.
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import functools
import io
import re
import zipfile

from lxml import etree

from bulksign.core.messages import N_
from bulksign.doc_templates import docx_templates
from bulksign.doc_templates.docx_copies import BOOKMARK_FIELDS, W, fields, local, main_document, parse, sections

#: Fields whose value is the copy's own once its pages are numbered from 1 and its bookmarks renamed.
_OWN_FIELDS = frozenset({"PAGE", *BOOKMARK_FIELDS, "HYPERLINK"})
_PAGE_COUNTS = frozenset({"NUMPAGES", "SECTIONPAGES"})
_INDEXES = frozenset({"TOC", "INDEX", "TOA", "XE", "TC", "RD"})
_NOTES = frozenset({"footnoteReference", "endnoteReference"})
_COMMENTS = frozenset({"commentReference", "commentRangeStart", "commentRangeEnd"})
#: What Word records of tracked changes (in its own namespace).
_CHANGES = frozenset(
    f"{W}{name}"
    for name in (
        "ins", "del", "moveFrom", "moveTo", "moveFromRangeStart", "moveToRangeStart", "rPrChange", "pPrChange",
        "sectPrChange", "tblPrChange", "tblPrExChange", "trPrChange", "tcPrChange", "tblGridChange",
        "numberingChange", "cellIns", "cellDel", "cellMerge",
    )
)  # fmt: skip
_XML = re.compile(r"\.xml$", re.I)


@functools.lru_cache(maxsize=16)
def why_alone(source: bytes) -> N_ | None:
    """Why documents of the Word template ``source`` cannot be converted several in one run, or None.
    Raises TemplateError for a file that is no template (as ``docx_templates.variables``)."""
    package = docx_templates.package(source)  # checks the file, as every fill does
    with zipfile.ZipFile(io.BytesIO(source)) as archive:
        parts = {name: archive.read(name) for name in archive.namelist() if _XML.search(name)}
    document = main_document(package)
    for name, xml in parts.items():
        root = parse(xml)
        reason = _part_reason(root, in_body=name == document)
        if reason is not None:
            return reason
    return _body_reason(parse(parts[document]).find(f"{W}body")) if document in parts else None


def _part_reason(root: etree._Element, *, in_body: bool) -> N_ | None:
    for field in fields(root):
        reason = _field_reason(field.name, field.code, in_body=in_body)
        if reason is not None:
            return reason
    for element in root.iter():
        name = local(element)
        if name in _NOTES:
            return N_(
                "The template has footnotes or endnotes: LibreOffice would number them through all the documents "
                "converted together."
            )
        if name in _COMMENTS:
            return N_("The template has comments. Delete them in Word (Review → Delete all comments).")
        if element.tag in _CHANGES:
            return N_(
                "The template has tracked changes. Accept or reject them in Word (Review → Accept all changes) and "
                "turn off Track Changes."
            )
        if name in ("linkedTxbx",) or "mso-next-textbox" in (element.get("style") or ""):
            return N_(
                "The template has text boxes linked to each other, so that text runs on from one into another. "
                "Unlink them."
            )
    return None


def _field_reason(name: str, code: str, *, in_body: bool) -> N_ | None:
    if name in _PAGE_COUNTS:
        return N_(
            "The template shows the total number of pages (as in “page 1 of 3”): converted together, each "
            "document would count the pages of all of them. Show the page number alone to have them converted "
            "together."
        )
    if name in _INDEXES:
        return N_(
            "The template has a table of contents or an index, which would list all documents converted together."
        )
    if name not in _OWN_FIELDS or (name in BOOKMARK_FIELDS and not in_body):
        return N_(
            "The template has a Word field (%(field)s) whose value comes from the whole document: converted "
            "together, it would come from all documents at once.",
            field=name[:40] or "?",
        )
    return None


def _body_reason(body: etree._Element) -> N_ | None:
    """What of the body's own structure keeps its copies apart: headers of every kind a later section has, in the
    first section too (Word shows a section the previous section's header where it has none of its own), and a last
    paragraph to end each copy's section with."""
    own = sections(body)
    references = [
        {
            (local(r), r.get(f"{W}type", "default"))
            for r in section
            if local(r) in ("headerReference", "footerReference")
        }
        for section in own
    ]
    if references and any(later - references[0] for later in references[1:]):
        return N_(
            "A section after the first has a header or footer of a kind the first section lacks: in Word the first "
            "section of each document would show the one of the document before it. Give the first section its own "
            "(it may be empty)."
        )
    content = [element for element in body if local(element) != "sectPr"]
    if not content or local(content[-1]) != "p":
        return N_("The template ends with a table. Add an empty line after it.")
    if content[-1].find(f"{W}pPr/{W}sectPr") is not None:
        return N_("The template ends with a section break. Delete the last section break.")
    return None

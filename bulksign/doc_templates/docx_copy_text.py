"""What one recipient's filled Word copy shows, read from its own parts: what its part of a shared run's PDF is
checked against (``documents.docx_together.CopyText``).
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import re
from collections.abc import Mapping

from lxml import etree

from bulksign.doc_templates.docx_copies import R_ID, Relation, W, fields, local, main_document, parse, related
from bulksign.documents.docx_together import CopyText, words

_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_RELS = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_QUOTED = re.compile(r'"([^"]+)"')
_DC = "{http://purl.org/dc/elements/1.1/}"
#: What a run shows that is not in its text: tabs, breaks, a hyphen Word keeps on its line.
_SPACES = frozenset({"tab", "br", "cr", "ptab"})
#: Where text may be printed or not, whatever the copy: a simple field's result, a text box (its frame may cut it).
_NOT_SURELY_PRINTED = frozenset({"fldSimple", "txbxContent"})
#: Body elements whose breaks do not start a page of the document's own flow.
_OUT_OF_FLOW = frozenset({"tbl", "txbxContent", "Fallback", "footnote", "endnote"})


def copy_text(package: Mapping[str, bytes], filled: Mapping[str, bytes]) -> CopyText:
    """What the copy made of ``package`` (``docx_templates.package``) and its ``filled`` parts shows."""
    document = main_document(package)
    relations = related(package, document)
    body = parse(filled[document]).find(f"{W}body")
    shown: list[str] = []
    everything: list[str] = []
    breaks = _read(body, shown, everything)
    links = _addresses(body, relations)
    for relation in relations.values():
        if relation.kind in ("header", "footer") and relation.target in filled:
            root = parse(filled[relation.target])
            _read(root, [], everything)
            links |= _addresses(root, related(package, relation.target))
    text = " ".join(everything)
    return CopyText(
        text="".join(words(text)),
        words=frozenset(words(text)),
        shown=frozenset(words(" ".join(shown))),
        links=frozenset(links),
        least_pages=breaks + 1,
        properties=_properties(package, filled),
    )


def _addresses(root: etree._Element, relations: dict[str, Relation]) -> set[str]:
    """The outside addresses the part's hyperlinks (and HYPERLINK fields) link to."""
    found = {relations[link.get(R_ID)].target for link in root.iter(f"{W}hyperlink") if link.get(R_ID) in relations}
    for field in fields(root):
        if field.name == "HYPERLINK":
            found.update(_QUOTED.findall(field.code.split("\\", 1)[0]))
    return found


def _read(root: etree._Element, shown: list[str], everything: list[str]) -> int:
    """Add the text under ``root`` to ``everything``, what it surely prints to ``shown``; its hard page breaks."""
    breaks = 0
    results = 0  # inside how many fields' results
    for element in root.iter():
        name = local(element)
        if name == "fldChar":
            kind = element.get(f"{W}fldCharType")
            results += 1 if kind == "separate" else -1 if kind == "end" and results else 0
        elif name in ("t", "delText"):
            everything.append(element.text or "")
            if name == "t" and not results and _printed(element):
                shown.append(element.text or "")
        elif name in _SPACES or name == "p":
            everything.append(" ")
            shown.append(" ")
            if name == "br" and element.get(f"{W}type") == "page" and _in_flow(element):
                breaks += 1
        elif name == "noBreakHyphen":
            everything.append("-")
    return breaks


def _printed(text: etree._Element) -> bool:
    """Whether a run's text is printed wherever the layout puts it: not hidden, not a drawing's fallback, not a
    simple field's result."""
    run = text.getparent()
    properties = run.find(f"{W}rPr") if run is not None else None
    if properties is not None and (
        properties.find(f"{W}vanish") is not None or properties.find(f"{W}specVanish") is not None
    ):
        return False
    return not any(local(a) in _NOT_SURELY_PRINTED or a.tag == _MC_FALLBACK for a in text.iterancestors())


def _in_flow(element: etree._Element) -> bool:
    return not any(local(a) in _OUT_OF_FLOW for a in element.iterancestors())


def _properties(package: Mapping[str, bytes], filled: Mapping[str, bytes]) -> tuple[tuple[str, str], ...]:
    core = next(
        (
            relation.get("Target", "").lstrip("/")
            for relation in parse(package["_rels/.rels"]).iter(f"{_RELS}Relationship")
            if relation.get("Type", "").endswith("/core-properties")
        ),
        None,
    )
    if core is None or core not in filled:
        return ()
    root = parse(filled[core])
    found = []
    for key, tag in (("/Title", "title"), ("/Author", "creator"), ("/Subject", "subject")):
        element = root.find(f"{_DC}{tag}")
        if element is not None and (element.text or "").strip():
            found.append((key, element.text))
    return tuple(found)

"""The roles that sign a template's documents, read from its marks, in document order.
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import functools
import io

from docxtpl import DocxTemplate
from jinja2 import nodes

from bulksign.doc_templates import kinds, pdf_forms
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.pdf_form_fields import version_boxes
from bulksign.doc_templates.variables import parse
from bulksign.documents.signature_box import RECIPIENT_ROLE, SignatureBox, mark_role, marks_among
from bulksign.models import TemplateVersion


def template_roles(version: TemplateVersion) -> list[str]:
    """Every role that signs the version's documents, as stored at save (``marked_roles``)."""
    return list(version.roles or (RECIPIENT_ROLE,))


def mark_variables(version: TemplateVersion) -> frozenset[str]:
    """The version's variables that mark a signature's place (never a column), by its stored roles
    (``signature_box.marks_among``)."""
    return marks_among(version.variables or (), roles=template_roles(version))


def marked_roles(version: TemplateVersion) -> list[str]:
    """Every role that signs a version being saved, in the order their marks come in the document (by page,
    top to bottom, for a PDF's fields and boxes), the recipient first when it has no mark."""
    # An HTML or Word version without a mark among its variables is not read again (a PDF's marks are not variables).
    marked = version.kind == "pdf" or any(mark_role(v) for v in version.variables or ())
    found = names_in_order(version) if marked else ()
    roles = list(dict.fromkeys(role for role in map(mark_role, found) if role))
    return roles if RECIPIENT_ROLE in roles else [RECIPIENT_ROLE, *roles]


def names_in_order(version: TemplateVersion) -> tuple[str, ...]:
    """Every name a version's document uses, in the order the document has them (a PDF's fields and boxes by page,
    top to bottom): the parties' marks here, the fields its signer fills in ``fields``."""
    if version.kind == kinds.HTML:
        return _in_order(version.html)
    if version.kind == "docx":
        return _docx_in_order(version.source_key)
    if version.kind == "pdf":
        boxes = version_boxes(version, _pdf_fields(version.source_key))
        return tuple(b.name for b in sorted(boxes, key=lambda b: (b.page, -(b.y + b.h), b.x)))
    return ()


def pdf_role_places(version: TemplateVersion) -> dict[str, SignatureBox]:
    """A PDF template's place of each role: its form field or placed box named ``signature_<role>`` (``signature``:
    the recipient's), the same in every document of the version."""
    boxes = version_boxes(version, _pdf_fields(version.source_key))
    return {role: SignatureBox(page=b.page, x=b.x, y=b.y, w=b.w, h=b.h) for b in boxes if (role := mark_role(b.name))}


def _names_in_order(tree: nodes.Template) -> list[str]:
    return [n.name for n in tree.find_all(nodes.Name) if n.ctx == "load"]


@functools.lru_cache(maxsize=256)
def _in_order(source: str) -> tuple[str, ...]:
    try:
        return tuple(_names_in_order(parse(source)))
    except TemplateError:  # saved before its error was refused: it fails to render anyway
        return ()


@functools.lru_cache(maxsize=64)
def _docx_in_order(source_key: str) -> tuple[str, ...]:
    """The names a saved Word version uses, in the order of the one Jinja source docxtpl makes of it."""
    found: list[str] = []

    class _Reading:
        autoescape = True

        def parse(self, source: str) -> nodes.Template:
            tree = parse(source)
            found.extend(_names_in_order(tree))
            return tree

    DocxTemplate(io.BytesIO(kinds.source(source_key))).get_undeclared_template_variables(jinja_env=_Reading())
    return tuple(found)


@functools.lru_cache(maxsize=64)
def _pdf_fields(source_key: str) -> tuple[pdf_forms.FieldBox, ...]:
    return pdf_forms.read_form(kinds.source(source_key)).fields

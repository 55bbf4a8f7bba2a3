"""The columns a version's recipients file fills, and which of them every row must fill (``needed_columns``).
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import functools
import io

from docxtpl import DocxTemplate
from jinja2 import meta, nodes

from bulksign.doc_templates import kinds
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.fields import template_fields
from bulksign.doc_templates.mail_texts import MAIL_FIELDS, MAIL_VARIABLES, current_text
from bulksign.doc_templates.roles import mark_variables
from bulksign.doc_templates.value_filters import DATE_FILTERS, NUMBER_FILTERS
from bulksign.doc_templates.variables import parse, printed_variables
from bulksign.models import TemplateVersion

#: Where a variable's value is needed: printed by the document, printed by a mail text, or optional.
DOCUMENT, MAIL, OPTIONAL = "document", "mail", "optional"
#: What a filter needs a variable's value to be (``value_kinds``).
DATE, NUMBER = "date", "number"


def needed_columns(version: TemplateVersion) -> dict[str, str]:
    """Every variable of the row the version's document and mail texts use → ``DOCUMENT`` or ``MAIL`` (printed
    whatever the row holds, the document first) or ``OPTIONAL``; by name, without ``signature`` and
    ``signature_<role>`` (signatures' places, never columns) and the mail's own variables (``MAIL_VARIABLES``).
    Each field the signer fills (``{{ field_<name> }}``) is an ``OPTIONAL`` column: one the file has prefills it; so
    is a column a field's condition looks at (unless printed), kept from the file for it."""
    document = _document_printed(version)
    fields = template_fields(version)
    prefills = {field.column for field in fields}
    conditioned = {f.condition.source for f in fields if f.condition is not None and not f.condition.live}
    marks = mark_variables(version)
    mail_used: set[str] = set()
    mail_printed: set[str] = set()
    for field in MAIL_FIELDS:
        try:
            used, printed = _text_variables(current_text(text=getattr(version, field) or ""))
        except TemplateError:  # saved before its error was refused (an unknown filter): it fails to send anyway
            continue
        mail_used |= used - MAIL_VARIABLES
        mail_printed |= printed - MAIL_VARIABLES
    return {
        var: OPTIONAL if var in prefills else DOCUMENT if var in document else MAIL if var in mail_printed else OPTIONAL
        for var in sorted({*(version.variables or ()), *mail_used, *prefills, *conditioned})
        if var not in marks
    }


def value_kinds(version: TemplateVersion) -> dict[str, str]:
    """The row's variables the document shows through a filter that needs a date (``DATE``) or a number
    (``NUMBER``): ``{{ start_date|date }}``, ``{{ salary|money }}``, so that the file check refuses a row whose
    value is neither, naming its cell, rather than its render failing after sending."""
    try:
        if version.kind == kinds.HTML:
            trees = [parse(version.html)]
        elif version.kind == "docx":
            trees = list(_docx_trees(version.source_key))
        else:
            return {}
    except TemplateError:
        return {}
    found: dict[str, str] = {}
    for tree in trees:
        for node in tree.find_all(nodes.Filter):
            if isinstance(node.node, nodes.Name):
                if node.name in DATE_FILTERS:
                    found.setdefault(node.node.name, DATE)
                elif node.name in NUMBER_FILTERS:
                    found.setdefault(node.node.name, NUMBER)
    return found


def _document_printed(version: TemplateVersion) -> frozenset[str]:
    try:
        if version.kind == kinds.HTML:
            return _text_variables(version.html)[1]
        if version.kind == "docx":
            return _docx_printed(version.source_key)
    except TemplateError:  # saved before its error was refused: every variable counts as printed, as it did
        pass
    # A PDF's field or box shows the value as the row has it, on every document: each is printed.
    return frozenset(version.variables or ())


@functools.lru_cache(maxsize=256)
def _text_variables(source: str) -> tuple[frozenset[str], frozenset[str]]:
    """The variables a text uses, and those it prints whatever the row holds (versions never change: once)."""
    ast = parse(source)
    return frozenset(meta.find_undeclared_variables(ast)), printed_variables(ast)


@functools.lru_cache(maxsize=64)
def _docx_printed(source_key: str) -> frozenset[str]:
    """What a saved Word version prints whatever the row holds."""
    return frozenset().union(*(printed_variables(tree) for tree in _docx_trees(source_key)))


@functools.lru_cache(maxsize=64)
def _docx_trees(source_key: str) -> tuple[nodes.Template, ...]:
    """A saved Word version's syntax trees, read in the one Jinja source docxtpl makes of its body, headers and
    footers (the file was checked when it was saved: ``docx_templates.variables``)."""
    trees = []

    class _Reading:
        autoescape = True

        def parse(self, source: str) -> nodes.Template:
            trees.append(parse(source))
            return trees[-1]

    DocxTemplate(io.BytesIO(kinds.source(source_key))).get_undeclared_template_variables(jinja_env=_Reading())
    return tuple(trees)

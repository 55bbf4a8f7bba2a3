"""How the template pages' forms are read (the document submitted, the palette's field hints, a field's condition,
what a PDF's own fields become) and the words those pages show for field types and for how a party is chosen."""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app, request
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l

from bulksign.doc_templates import kinds as template_kinds
from bulksign.doc_templates import pdf_forms
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.template_parties import PartySource

#: An uploaded .html template larger than this is surely not a document template.
MAX_TEMPLATE_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class Submitted:
    kind: str
    html: str
    file: bytes | None


def submitted_document() -> Submitted:
    """The document of the form: an uploaded file (its name says the kind), else the chosen kind's fields."""
    upload = request.files.get("file")
    if not (upload and upload.filename):
        kind = request.form.get("kind", template_kinds.HTML)
        return Submitted(kind, request.form.get("html", "") if kind == template_kinds.HTML else "", None)
    kind = template_kinds.kind_for_filename(upload.filename)
    if kind != template_kinds.HTML:
        raw = upload.read(template_kinds.MAX_SOURCE_BYTES + 1)
        return Submitted(kind, "", raw)
    raw = upload.read(MAX_TEMPLATE_BYTES + 1)
    if len(raw) > MAX_TEMPLATE_BYTES:
        raise TemplateError(_("The template file is larger than 2 MB."))
    try:
        return Submitted(kind, raw.decode("utf-8-sig"), None)
    except UnicodeDecodeError:
        raise TemplateError(_("Save the .html file as UTF-8 and upload it again.")) from None


def field_hints() -> dict[str, dict]:
    """The type and party of each field the palette inserted (name → ``{"type", "role"}``); what cannot be read is
    left out (those fields get the defaults, set on the template page)."""
    try:
        given = current_app.json.loads(request.form.get("palette_fields") or "[]")
    except ValueError:
        return {}
    if not isinstance(given, list):
        return {}
    return {
        str(f["name"]): {"type": str(f.get("type") or ""), "role": str(f.get("role") or "")}
        for f in given[:100]
        if isinstance(f, dict) and isinstance(f.get("name"), str)
    }


FIELD_TYPE_LABELS = {
    "text": _l("Text"),
    "number": _l("Number"),
    "date": _l("Date"),
    "checkbox": _l("Checkbox"),
    "choice": _l("Choice"),
    "attachment": _l("Attachment (PDF, JPEG or PNG)"),
    "signed_date": _l("Date signed"),
    "signer_name": _l("Signer’s name"),
}


def condition_of(name: str) -> dict[str, str] | None:
    """A field's condition as the page's three lists give it: ``field:<name>`` or ``column:<name>``, a test, a
    value; None when it is shown always."""
    kind, _, source = request.form.get(f"{name}-when-source", "").partition(":")
    if not source:
        return None
    return {
        "kind": kind,
        "source": source,
        "operator": request.form.get(f"{name}-when-operator", ""),
        "value": request.form.get(f"{name}-when-value", ""),
    }


#: What the template page calls each way a party is chosen (``template_parties.PartySource``).
PARTY_SOURCE_LABELS = {
    PartySource.COLUMNS: _l("A person per row, from the file's columns"),
    PartySource.FIXED: _l("One person for every batch"),
}


def form_field_uses() -> list[dict[str, str]]:
    """What the placement page's form says each of the PDF's own fields becomes (``ff-<n>-use``: empty, ``column``,
    ``field:<party>`` or ``signature:<party>``), as ``pdf_form_fields.check_uses`` takes it."""
    uses = []
    for index in range(pdf_forms.MAX_FIELDS):
        name = request.form.get(f"ff-{index}-name")
        if name is None:
            break
        use, _colon, party = request.form.get(f"ff-{index}-use", "").partition(":")
        uses.append(
            {
                "name": name,
                "use": use,
                "party": party,
                "type": request.form.get(f"ff-{index}-type", ""),
                "column": request.form.get(f"ff-{index}-column", ""),
            }
        )
    return uses

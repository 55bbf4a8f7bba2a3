"""Template kinds: one renderer per kind behind one interface, so batches, jobs and states never ask which.
More in docs/architecture/doc_templates.md."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask_babel import lazy_gettext as _l

from bulksign.core.messages import N_
from bulksign.doc_templates import docx_templates, pdf_cleaning, pdf_fill, pdf_form_fields, pdf_forms
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.jinja_sandbox import render_html
from bulksign.documents import together
from bulksign.documents.field_boxes import field_name, find_field_boxes, stored_marks
from bulksign.documents.signature_box import SIGNATURE_VARIABLE, SignatureBox, find_signature_box
from bulksign.documents.storage import get_storage
from bulksign.models import TemplateVersion

#: Largest file any kind may upload; each kind may refuse smaller ones (``docx_package.MAX_DOCX_BYTES``).
MAX_SOURCE_BYTES = 20 * 1024 * 1024
HTML = "html"
HTML_EXTENSIONS = (".html", ".htm")


@dataclass(frozen=True)
class Kind:
    #: Stored in ``TemplateVersion.kind``.
    name: str
    #: What the template form calls it.
    label: object
    #: Upload names this kind takes, lower case with the dot; the first names stored files.
    extensions: tuple[str, ...]
    content_type: str
    variables: Callable[[bytes], list[str]]
    prepare: Callable[..., Callable[[], bytes]]
    #: What is taken out of an uploaded file before it is checked and kept; None keeps the file as uploaded.
    clean: Callable[[bytes], pdf_cleaning.Cleaned] | None = None


#: The file kinds, in the order the form offers them (after HTML).
KINDS: dict[str, Kind] = {
    "docx": Kind(
        name="docx",
        label=_l("Word (.docx)"),
        extensions=(".docx",),
        content_type="application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        variables=docx_templates.variables,
        prepare=docx_templates.prepare,
    ),
    "pdf": Kind(
        name="pdf",
        label=_l("PDF"),
        extensions=(".pdf",),
        content_type="application/pdf",
        variables=pdf_fill.variables,
        prepare=pdf_fill.prepare,
        clean=pdf_forms.clean,
    ),
}

#: Extensions refused with their own reason rather than "not a template file".
_REFUSED_EXTENSIONS = {
    ".docm": N_(
        "The file is a macro-enabled Word document (.docm); macros are not allowed. "
        "Save it as a Word Document (.docx) and upload that."
    ),
    ".dotm": N_(
        "The file is a macro-enabled Word template (.dotm); macros are not allowed. "
        "Save it as a Word Document (.docx) and upload that."
    ),
    ".doc": N_("The file is an old Word document (.doc). Save it as a Word Document (.docx) and upload that."),
}


def choices() -> list[tuple[str, object]]:
    """(kind, label) for the template form: HTML first, then every file kind."""
    return [(HTML, _l("HTML")), *((k.name, k.label) for k in KINDS.values())]


def kind_for_filename(filename: str) -> str:
    """The kind an uploaded file name says (``html`` for .html); TemplateError for any other file."""
    lowered = (filename or "").lower().strip()
    if lowered.endswith(HTML_EXTENSIONS):
        return HTML
    for kind in KINDS.values():
        if lowered.endswith(kind.extensions):
            return kind.name
    for extension, reason in _REFUSED_EXTENSIONS.items():
        if lowered.endswith(extension):
            raise TemplateError(reason)
    accepted = ", ".join([*HTML_EXTENSIONS[:1], *(k.extensions[0] for k in KINDS.values())])
    raise TemplateError(N_("Upload the template as one of: %(accepted)s.", accepted=accepted))


def file_kind(kind: str) -> Kind:
    """The file kind named ``kind``; TemplateError for an unknown one."""
    if kind not in KINDS:
        raise TemplateError(N_("Templates of kind %(kind)s are not available on this server.", kind=kind))
    return KINDS[kind]


@dataclass(frozen=True)
class CheckedFile:
    """An uploaded file as a version keeps it (cleaned by its kind), and the variables it uses."""

    data: bytes
    variables: list[str]
    #: What the kind's cleaning took out (``pdf_cleaning.REMOVED``'s labels), for staff to hear of.
    removed: tuple[N_, ...] = ()


def check_file(*, kind: str, data: bytes) -> CheckedFile:
    """An uploaded file of ``kind`` cleaned, with its variables; TemplateError saying why it is refused."""
    if len(data) > MAX_SOURCE_BYTES:
        raise TemplateError(
            N_(
                "The file has %(size).1f MB; the limit is %(limit)d MB.",
                size=len(data) / 1024 / 1024,
                limit=MAX_SOURCE_BYTES // 1024 // 1024,
            )
        )
    if not data:
        raise TemplateError(N_("The uploaded file is empty."))
    file = file_kind(kind)
    cleaned = file.clean(data) if file.clean is not None else pdf_cleaning.Cleaned(data=data)
    return CheckedFile(data=cleaned.data, variables=file.variables(cleaned.data), removed=cleaned.removed)


def source_key(*, template_id: int, kind: str, data: bytes) -> str:
    """Where an uploaded file is kept: by content, so a new version with the same file reuses it."""
    return f"templates/{template_id}/{hashlib.sha256(data).hexdigest()}{file_kind(kind).extensions[0]}"


@functools.lru_cache(maxsize=16)
def source(key: str) -> bytes:
    # Keys name immutable content (sha256): a worker reads each file once, not once per recipient.
    return get_storage().get(key)


def render_document(version: TemplateVersion, row: dict[str, Any], *, timeout: float) -> bytes:
    """One recipient's PDF from ``version``, whatever its kind (the job and the preview both call this)."""
    return prepare_document(version, row, timeout=timeout)()


def prepare_document(version: TemplateVersion, row: dict[str, Any], *, timeout: float) -> Callable[[], bytes]:
    """``render_document`` in two steps: reading the version and the source (and filling in HTML) happen now, in
    the calling thread (the one that owns the session); the returned conversion may run in another thread."""
    if version.kind == HTML:
        return functools.partial(together.render_alone, render_html(version.html, row), timeout=timeout)
    return file_kind(version.kind).prepare(version, source(version.source_key), row, timeout=timeout)


def signature_box(version: TemplateVersion, pdf: bytes) -> SignatureBox | None:
    """Where the signature goes in ``pdf``, rendered from ``version``: the field or box a PDF template names
    ``signature``, else the mark ``{{ signature }}`` printed (looked for only when the template uses it); None:
    sealing appends a signature page. Raises ``signature_box.UnreadablePdf``."""
    if version.kind == "pdf":
        return pdf_fill.signature_box(
            source(version.source_key),
            placed=pdf_forms.placed_boxes(version),
            own=pdf_form_fields.renames(version.pdf_form_fields),
        )
    if SIGNATURE_VARIABLE in (version.variables or ()):
        return find_signature_box(pdf)
    return None


def field_boxes(version: TemplateVersion, pdf: bytes) -> dict[str, SignatureBox]:
    """Where each field the signer fills sits in ``pdf``, rendered from ``version`` (field name → box, the first
    place the document shows it): a PDF template's field or box ``field_<name>``, else the frame each of its fields'
    marks ``{{ field_<name> }}`` printed (looked for only when the version has fields). Raises
    ``signature_box.UnreadablePdf``."""
    if version.kind == "pdf":
        boxes = pdf_form_fields.version_boxes(version, pdf_forms.read_form(source(version.source_key)).fields)
        found: dict[str, SignatureBox] = {}
        for box in boxes:
            name = field_name(box.name)
            if name and name not in found:
                found[name] = SignatureBox(page=box.page, x=box.x, y=box.y, w=box.w, h=box.h)
        return found
    return find_field_boxes(pdf, variables=stored_marks(version.fields))

"""A file a signer attaches to an attachment field, checked before it is kept: its type by its content, its size,
readable, a PDF without its active content, and named by its type (docs/architecture/signing.md).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from io import BytesIO

from bulksign.core.errors import BulksignError
from bulksign.core.messages import N_
from bulksign.doc_templates import pdf_forms
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.fields import ATTACHMENT_TYPES, attachment_filename
from bulksign.documents.images import ImageProblem, ImageRefused, check_image
from bulksign.documents.pdf_text import unprintable
from bulksign.models import SigningRequest

#: What an attachment may be is found by its first bytes (``fields.ATTACHMENT_TYPES``: the extension it is kept under).
_MAGIC = ((b"%PDF-", "application/pdf"), (b"\xff\xd8\xff", "image/jpeg"), (b"\x89PNG\r\n\x1a\n", "image/png"))
_PICTURE_FORMATS = {"image/jpeg": ("JPEG",), "image/png": ("PNG",)}
#: Most memory an attached picture may take decoded (``documents.images``): a photo of 33 megapixels; more is refused
#: from its header, before a pixel is decoded (a 400 KB PNG can unpack to 400 MB).
MAX_PICTURE_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class Upload:
    """A file the signer chose for an attachment field: its name on their device and its first bytes (the view
    reads at most one byte more than the limit)."""

    filename: str
    data: bytes


@dataclass(frozen=True)
class Attachment:
    """An attachment that passed its checks: what is stored, and what its ``FieldValue`` row keeps."""

    filename: str
    data: bytes
    content_type: str
    sha256: str
    #: The sha256 of the file as the signer gave it, when active content was taken out of it (``data`` is the file
    #: without it, ``sha256`` its hash); None when it is kept as given.
    original_sha256: str | None = None


class AttachmentRefused(BulksignError):
    """A file that is not kept; ``message`` says why, for its field."""

    message: N_

    def __init__(self, message: N_):
        super().__init__(message)


def checked_attachment(upload: Upload, *, label: str, field: str, max_bytes: int) -> Attachment:
    """``upload`` as it is kept, for the field ``field`` (``label`` as the page shows it), at most ``max_bytes``;
    AttachmentRefused saying what is wrong."""
    if len(upload.data) > max_bytes:
        raise AttachmentRefused(
            N_(
                "The file for “%(label)s” is too big: at most %(mb)s MB.",
                label=label,
                mb=max_bytes // (1024 * 1024),
            )
        )
    content_type = next((kind for magic, kind in _MAGIC if upload.data.startswith(magic)), None)
    if content_type is None:
        raise AttachmentRefused(
            N_("The file for “%(label)s” is not a PDF, JPEG or PNG (whatever its name says).", label=label)
        )
    data, original = upload.data, None
    if content_type == "application/pdf":
        data = _clean_pdf(upload.data, label)
        original = hashlib.sha256(upload.data).hexdigest() if data is not upload.data else None
    else:
        _check_picture(upload.data, content_type, label)
    name = attachment_filename(upload.filename, content_type=content_type, field=field) or field
    name = "".join("_" if c in unprintable(name) else c for c in name)  # the certificate lists it
    return Attachment(
        filename=name,
        data=data,
        content_type=content_type,
        sha256=hashlib.sha256(data).hexdigest(),
        original_sha256=original,
    )


def _damaged(label: str) -> AttachmentRefused:
    return AttachmentRefused(N_("The file for “%(label)s” is damaged and cannot be read. Choose another.", label=label))


def _clean_pdf(data: bytes, label: str) -> bytes:
    """A PDF with pages, as it is kept: without active content (``pdf_cleaning``, as templates are kept: JavaScript,
    actions that launch or send, embedded files), or ``data`` itself when it has none."""
    from pypdf import PdfReader

    try:
        readable = len(PdfReader(BytesIO(data), strict=False).pages) > 0
    except Exception:  # pypdf raises many kinds on a broken file; all mean the same to the signer
        readable = False
    if not readable:
        raise _damaged(label)
    try:
        return pdf_forms.clean(data).data
    except TemplateError as refused:  # encrypted, too long, nested to exhaust a reader, a dynamic XFA form
        raise AttachmentRefused(
            N_("The file for “%(label)s” cannot be taken: %(reason)s", label=label, reason=refused.message)
        ) from None


def _check_picture(data: bytes, content_type: str, label: str) -> None:
    """That a JPEG or PNG decodes, within ``MAX_PICTURE_BYTES`` and the process's budget (``documents.images``)."""
    try:
        check_image(data, formats=_PICTURE_FORMATS[content_type], max_bytes=MAX_PICTURE_BYTES)
    except ImageRefused as refused:
        if refused.problem is ImageProblem.TOO_LARGE:
            raise AttachmentRefused(
                N_(
                    "The picture for “%(label)s” is too large: at most %(megapixels)s megapixels. Send a smaller "
                    "picture or a PDF.",
                    label=label,
                    megapixels=MAX_PICTURE_BYTES // 4 // 1_000_000,
                )
            ) from None
        if refused.problem is ImageProblem.BUSY:
            raise AttachmentRefused(
                N_(
                    "Too many pictures are being checked just now. Choose the file for “%(label)s” again and sign "
                    "in a minute.",
                    label=label,
                )
            ) from None
        raise _damaged(label) from None


def attachment_key(request: SigningRequest, *, name: str, content_type: str) -> str:
    """Where a field's attachment is stored: beside the request's documents."""
    return f"batches/{request.batch_id}/requests/{request.id}/fields/{name}{ATTACHMENT_TYPES[content_type]}"

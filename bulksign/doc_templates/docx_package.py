"""A Word file as a package of parts, checked before python-docx reads it: its size, what each part inflates to,
encryption and macros, each refused in plain words (``TemplateError``); and opened for docxtpl."""

from __future__ import annotations

import io
import re

from docxtpl import DocxTemplate

from bulksign.core import zip_archives
from bulksign.core.messages import N_
from bulksign.doc_templates.errors import TemplateError

#: Largest .docx accepted, and most it may unpack to: all parts, any one part (a 10 MB photo is 30 MB unpacked).
MAX_DOCX_BYTES = 10 * 1024 * 1024
MAX_UNPACKED_BYTES = 100 * 1024 * 1024
MAX_PART_BYTES = 50 * 1024 * 1024
MAX_PARTS = 1000
_LIMITS = zip_archives.Limits(parts=MAX_PARTS, part_bytes=MAX_PART_BYTES, total_bytes=MAX_UNPACKED_BYTES)

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an encrypted .docx is an OLE container, not a zip
_MACROS = re.compile(r"(^|/)vba(Project\.bin|Data\.xml)$", re.I)
_MACRO_CONTENT_TYPE = b"macroEnabled"


def read_parts(data: bytes) -> dict[str, bytes]:
    """Every part of the document, after checking what the archive holds and unpacks to (each part inflated as a
    stream, within the limits, its declared size proven true: python-docx reads the same bytes afterwards)."""
    if len(data) > MAX_DOCX_BYTES:
        raise TemplateError(
            N_(
                "The Word file has %(size).1f MB; the limit is %(limit)d MB. Make the images in it smaller.",
                size=len(data) / 1024 / 1024,
                limit=MAX_DOCX_BYTES // 1024 // 1024,
            )
        )
    if data.startswith(_OLE_MAGIC):
        raise TemplateError(
            N_(
                "The Word file is password-protected (or an old .doc). Remove the password "
                "(File → Info → Protect Document) and save it as .docx."
            )
        )
    try:
        parts = zip_archives.read(data, limits=_LIMITS)
    except zip_archives.ArchiveRefused as refused:
        raise _refusal(refused) from None
    if "word/document.xml" not in parts:
        raise TemplateError(N_("The file is not a Word document. Save it from Word as .docx and upload it again."))
    if any(_MACROS.search(name) for name in parts) or _MACRO_CONTENT_TYPE in parts.get("[Content_Types].xml", b""):
        raise TemplateError(
            N_(
                "The Word file contains macros, which are not allowed. Save it as a Word Document "
                "(.docx) without macros and upload that."
            )
        )
    return parts


def _refusal(refused: zip_archives.ArchiveRefused) -> TemplateError:
    if refused.reason == "parts":
        return TemplateError(
            N_("The Word file has %(n)d parts; the limit is %(limit)d.", n=refused.size, limit=MAX_PARTS)
        )
    if refused.reason == "part_bytes":
        return TemplateError(
            N_(
                "The Word file is not a real document: its part %(part)s unpacks to more than %(limit)d MB.",
                part=refused.part[:80],
                limit=MAX_PART_BYTES // 1024 // 1024,
            )
        )
    if refused.reason == "total_bytes":
        return TemplateError(
            N_("The Word file unpacks to more than %(limit)d MB.", limit=MAX_UNPACKED_BYTES // 1024 // 1024)
        )
    # zipfile's and zlib's own failures, encrypted parts, and headers that lie about what a part unpacks to.
    return TemplateError(
        N_(
            "The Word file is broken or password-protected and cannot be read. Open it in Word, save "
            "it again as .docx and upload that."
        )
    )


def open_template(data: bytes) -> DocxTemplate:
    try:
        return DocxTemplate(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - python-docx fails on broken parts in many ways
        raise TemplateError(
            N_(
                "The Word file is broken and cannot be read. Open it in Word, save it again as "
                ".docx and upload that. (%(error)s)",
                error=type(exc).__name__,
            )
        ) from None

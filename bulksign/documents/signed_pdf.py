"""The signed record as a PDF: the original pages with the signature block, then the audit certificate.
More in docs/architecture/documents.md."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from io import BytesIO

from flask import has_app_context
from flask_babel import force_locale
from pypdf import PdfReader, PdfWriter

from bulksign.core.messages import N_
from bulksign.documents import pdf_text
from bulksign.documents.audit_certificate import CERTIFICATE_DESTINATION, audit_certificate
from bulksign.documents.audit_record import AuditRecord, FilledField, local_time
from bulksign.documents.pdf_text import BOLD, REGULAR
from bulksign.documents.signature_box import SignatureBox

#: What the stamps write with: the signature block, and the values signers filled.
INK = (0.1, 0.14, 0.19)


@dataclass(frozen=True)
class PartyBlock:
    """One party's signature as the document prints it: at the role's mark (``box``), else on the signature page."""

    #: The party as the document's readers call it (its label in the batch's language), printed over the block.
    label: str
    signer_name: str
    signed_at: datetime
    signer_ip: str
    image_png: bytes | None
    box: SignatureBox | None


def _in_language(language: str):
    """The record's language while it is drawn (outside an app, e.g. a bench, English)."""

    return force_locale(language) if has_app_context() else nullcontext()


def _draw_block(
    c,
    *,
    x: float,
    y: float,
    w: float,
    h: float,
    signer_name: str,
    signed_at: datetime,
    signer_ip: str,
    image_png: bytes | None,
    zone: str,
) -> None:
    """The drawn signature and its four lines, laid out inside the box (x, y, w, h) whatever its shape."""
    from reportlab.lib.units import mm
    from reportlab.lib.utils import ImageReader

    pad = min(2 * mm, h * 0.08, w * 0.04)
    x, y, w, h = x + pad, y + pad, w - 2 * pad, h - 2 * pad
    text_x, text_w, text_h = x, w, h
    if image_png:
        image = ImageReader(BytesIO(image_png))
        if w >= 2.2 * h:  # wide: the drawing on the left, the lines beside it
            img_w = min(w * 0.38, h * 2.5)
            c.drawImage(image, x, y, img_w, h, preserveAspectRatio=True, anchor="c", mask="auto")
            text_x, text_w = x + img_w + pad, w - img_w - pad
        else:  # tall or square: the drawing above, the lines below
            text_h = h * 0.5
            c.drawImage(image, x, y + text_h, w, h - text_h, preserveAspectRatio=True, anchor="c", mask="auto")
    rows = [
        (BOLD, str(N_("Signed electronically"))),
        (REGULAR, signer_name),
        (REGULAR, local_time(signed_at, zone, short=True)),
        (REGULAR, str(N_("IP %(ip)s", ip=signer_ip))),
    ]
    # As large as the box allows up to 8 pt; below 4.5 pt a long name is cut (…) rather than made unreadable.
    widest = max(pdf_text.width(text, font, 1) for font, text in rows[:1] + rows[2:]) or 1
    size = max(4.5, min(8.0, text_h / (len(rows) * 1.3), text_w / widest))
    leading = size * 1.3
    top = y + text_h - (text_h - leading * len(rows)) / 2  # the lines centred in their part of the box
    c.setFillColorRGB(*INK)
    for i, (font, text) in enumerate(rows):
        pdf_text.draw(c, text_x, top - size - i * leading, pdf_text.fit(text, font, size, text_w), font, size)


#: A stamped value's largest and smallest type (points), and its line height: below the smallest, the lines that
#: still do not fit are cut (…); the audit certificate lists the whole value.
VALUE_MAX_PT = 9.0
VALUE_MIN_PT = 4.5
VALUE_LEADING = 1.2


def _value_lines(text: str, *, width: float, height: float) -> tuple[float, list[str]]:
    """``text`` laid out in a box ``width`` × ``height``: the largest size up to ``VALUE_MAX_PT`` at which it fits,
    wrapped at spaces (and between the letters of a word too long for a line), and its lines; at ``VALUE_MIN_PT``
    the lines that fit, the last cut (…)."""
    size = max(VALUE_MIN_PT, min(VALUE_MAX_PT, height / VALUE_LEADING))
    while True:
        lines = pdf_text.wrap(text, REGULAR, size, width)
        tall = len(lines) * size * VALUE_LEADING
        if tall <= height and all(pdf_text.width(line, REGULAR, size) <= width for line in lines):
            return size, lines
        if size <= VALUE_MIN_PT:
            break
        size = max(VALUE_MIN_PT, size - 0.5)
    room = max(1, int(height // (size * VALUE_LEADING)))
    kept = [*lines[: room - 1], " ".join(lines[room - 1 :])]
    return size, [pdf_text.fit(line, REGULAR, size, width) for line in kept]


def _draw_value(c, field: FilledField) -> None:
    """A field's value inside its box: a checkbox as a ticked or an empty square, any other as its text (as large
    as the box allows), in the signature block's ink."""
    box = field.box
    assert box is not None  # only a field with a box is drawn (``_field_drawings``)
    c.setFillColorRGB(*INK)
    c.setStrokeColorRGB(*INK)
    if field.ticked is not None:
        # Framed by us: a PDF template's field or placed box is an invisible place, and over the frame an HTML or
        # Word mark printed ours lies on it.
        side = min(box.w, box.h)
        x, y = box.x + (box.w - side) / 2, box.y + (box.h - side) / 2
        c.setLineWidth(max(0.5, side * 0.05))
        c.rect(x, y, side, side)
        if field.ticked:
            c.setLineWidth(side * 0.12)
            c.setLineCap(1)
            c.setLineJoin(1)
            tick = c.beginPath()
            tick.moveTo(x + side * 0.22, y + side * 0.52)
            tick.lineTo(x + side * 0.42, y + side * 0.28)
            tick.lineTo(x + side * 0.8, y + side * 0.76)
            c.drawPath(tick, stroke=1, fill=0)
        return
    pad = min(2.0, box.h * 0.12, box.w * 0.05)
    size, lines = _value_lines(str(field.text), width=box.w - 2 * pad, height=box.h - 2 * pad)
    leading = size * VALUE_LEADING
    # The lines centred in the box; each baseline where capitals and small letters together look centred in
    # their line (DejaVu's capitals are 0.73 of the size high, its small letters 0.55).
    top = box.y + (box.h + leading * len(lines)) / 2
    for i, line in enumerate(lines):
        pdf_text.draw(c, box.x + pad, top - (i + 1) * leading + (leading - size) / 2 + 0.18 * size, line, REGULAR, size)


def _strike(c, box: SignatureBox) -> None:
    """A line through an empty box, as on paper: nothing can be written in it after the seal."""
    pad = min(2.0, box.w * 0.05)
    c.setStrokeColorRGB(*INK)
    c.setLineWidth(0.6)
    c.line(box.x + pad, box.y + box.h / 2, box.x + box.w - pad, box.y + box.h / 2)


def _field_drawings(
    fields: Sequence[FilledField], *, pages: int, struck: Sequence[SignatureBox] = ()
) -> dict[int, list[Callable]]:
    """What draws each filled field's value in its box, and a line through each ``struck`` box, by page; a field
    without a box (or left empty) is only listed on the certificate."""
    drawings: dict[int, list[Callable]] = {}
    for box in struck:
        if 0 <= box.page < pages:
            drawings.setdefault(box.page, []).append(functools.partial(_strike, box=box))
    for filled in fields:
        if filled.box is None or not 0 <= filled.box.page < pages:
            continue
        if filled.ticked is not None or str(filled.text):
            drawings.setdefault(filled.box.page, []).append(functools.partial(_draw_value, field=filled))
    return drawings


def _block_drawing(box: SignatureBox, **block) -> Callable:
    """What draws a signature block into ``box``. The document draws the box's frame (``{{ signature }}``) or staff
    chose a bare place: no frame of ours."""
    return functools.partial(_draw_block, x=box.x, y=box.y, w=box.w, h=box.h, **block)


def _overlay(page, draw: Callable) -> None:
    """Merge over a pypdf page a page of ours of its size on which ``draw(canvas)`` paints in its user space."""
    from reportlab.pdfgen import canvas

    pdf_text.register_fonts()
    buf = BytesIO()
    c = canvas.Canvas(buf, pagesize=(float(page.mediabox.right), float(page.mediabox.top)))
    draw(c)
    c.showPage()
    c.save()
    page.merge_page(PdfReader(BytesIO(buf.getvalue())).pages[0])


def _stamp_pages(writer, drawings: dict[int, list[Callable]]) -> None:
    """Everything drawn over a page of a pypdf writer as one overlay of that page: each overlay embeds its own copy
    of the letters it uses (about 20 KB for a page's values and block drawn apart)."""
    for index, draws in drawings.items():

        def draw(c, draws=draws) -> None:
            for each in draws:
                each(c)

        _overlay(writer.pages[index], draw)


def _heading(c, *, title: N_, document_name: str, width: float, height: float) -> tuple[float, float]:
    """A signature page's title and the document's name; the left margin and the top of what follows."""
    from reportlab.lib.units import mm

    left, top = 20 * mm, height - 20 * mm
    c.setFillColorRGB(0.1, 0.14, 0.19)
    pdf_text.draw(c, left, top - 15, str(title), BOLD, 15)
    heading = pdf_text.fit(str(N_("Document: %(name)s", name=document_name)), REGULAR, 9, width - 2 * left)
    pdf_text.draw(c, left, top - 32, heading, REGULAR, 9)
    return left, top - 44


def _framed_block(c, *, x: float, y: float, w: float, h: float, **block) -> None:
    """A signature block in a frame of ours (on a signature page, where the document drew none)."""
    from reportlab.lib.units import mm

    c.setStrokeColorRGB(0.14, 0.34, 0.85)
    c.setLineWidth(0.6)
    c.roundRect(x, y, w, h, 2 * mm)
    _draw_block(c, x=x, y=y, w=w, h=h, **block)


def signature_page(record: AuditRecord, *, width: float, height: float, image_png: bytes | None) -> bytes:
    """The page appended when the document marks no place for the signature: nothing of it is covered."""
    from reportlab.lib.units import mm
    from reportlab.pdfgen import canvas

    pdf_text.register_fonts()
    buf = BytesIO()
    c = canvas.Canvas(buf, pagesize=(width, height))
    left, top = _heading(c, title=N_("Signature"), document_name=record.document_name, width=width, height=height)
    box_w, box_h = min(95 * mm, width - 2 * left), 30 * mm
    _framed_block(
        c,
        x=left,
        y=top - box_h,
        w=box_w,
        h=box_h,
        signer_name=record.signer_name,
        signed_at=record.signed_at,
        signer_ip=record.signer_ip,
        image_png=image_png,
        zone=record.timezone,
    )
    c.showPage()
    c.save()
    return buf.getvalue()


def build_signed_pdf(
    original: bytes, record: AuditRecord, *, image_png: bytes | None, box: SignatureBox | None = None
) -> bytes:
    """Original pages with the signature block in ``box`` (or on an appended signature page), then the audit certificate.

    Both speak the recipient's language and give times in the batch's time zone.
    """

    writer = PdfWriter(clone_from=PdfReader(BytesIO(original)))
    with _in_language(record.language):
        drawings = _field_drawings(record.fields, pages=len(writer.pages), struck=record.struck)
        if box is not None and 0 <= box.page < len(writer.pages):
            block = _block_drawing(
                box,
                signer_name=record.signer_name,
                signed_at=record.signed_at,
                signer_ip=record.signer_ip,
                image_png=image_png,
                zone=record.timezone,
            )
            drawings.setdefault(box.page, []).append(block)
        else:
            last = writer.pages[-1].mediabox
            writer.add_page(
                PdfReader(
                    BytesIO(
                        signature_page(record, width=float(last.width), height=float(last.height), image_png=image_png)
                    )
                ).pages[0]
            )
        _stamp_pages(writer, drawings)
        certificate = audit_certificate(record)
    for page in PdfReader(BytesIO(certificate)).pages:
        writer.add_page(page)
    writer.add_metadata({"/Producer": "Bulksign"})
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def stamp_parties(
    original: bytes,
    blocks: Sequence[PartyBlock],
    *,
    document_name: str,
    language: str,
    zone: str,
    fields: Sequence[FilledField] = (),
    struck: Sequence[SignatureBox] = (),
) -> bytes:
    """The original's pages with the values the parties filled (``fields``), a line through each ``struck`` box,
    each party's block at its mark, and
    one signature page holding the blocks of the parties whose role marks no place (never covering the document's
    text). Unsealed: a step's version, or what ``build_parties_pdf`` certifies."""

    writer = PdfWriter(clone_from=PdfReader(BytesIO(original)))
    loose = []
    with _in_language(language):
        drawings = _field_drawings(fields, pages=len(writer.pages), struck=struck)
        for block in blocks:
            if block.box is None or not 0 <= block.box.page < len(writer.pages):
                loose.append(block)
                continue
            drawing = _block_drawing(
                block.box,
                signer_name=block.signer_name,
                signed_at=block.signed_at,
                signer_ip=block.signer_ip,
                image_png=block.image_png,
                zone=zone,
            )
            drawings.setdefault(block.box.page, []).append(drawing)
        _stamp_pages(writer, drawings)
        if loose:
            last = writer.pages[-1].mediabox
            page = parties_page(
                loose, document_name=document_name, width=float(last.width), height=float(last.height), zone=zone
            )
            writer.add_page(PdfReader(BytesIO(page)).pages[0])
    writer.add_metadata({"/Producer": "Bulksign"})
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def marked_copy(pdf: bytes, *, note: str) -> bytes:
    """``pdf`` with ``note`` in a band across the top of every page: a copy that must not pass for the finished
    document (a party's own copy while others still sign)."""
    writer = PdfWriter(clone_from=PdfReader(BytesIO(pdf)))

    def band(c, *, width: float, height: float) -> None:
        c.setFillColorRGB(1, 0.95, 0.8)
        c.rect(0, height - 18, width, 18, stroke=0, fill=1)
        c.setFillColorRGB(0.55, 0.25, 0)
        pdf_text.draw(c, 12, height - 13, pdf_text.fit(note, BOLD, 9, width - 24), BOLD, 9)

    for page in writer.pages:
        box = page.mediabox
        _overlay(page, functools.partial(band, width=float(box.right), height=float(box.top)))
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def parties_page(blocks: Sequence[PartyBlock], *, document_name: str, width: float, height: float, zone: str) -> bytes:
    """The signature page of a document several sign: one framed block per party, under its role, top to bottom
    (smaller as more parties share the page)."""
    from reportlab.lib.units import mm
    from reportlab.pdfgen import canvas

    pdf_text.register_fonts()
    buf = BytesIO()
    c = canvas.Canvas(buf, pagesize=(width, height))
    left, y = _heading(c, title=N_("Signatures"), document_name=document_name, width=width, height=height)
    box_w, box_h = min(95 * mm, width - 2 * left), min(30 * mm, (y - 20 * mm) / len(blocks) - 14)
    for block in blocks:
        c.setFillColorRGB(0.1, 0.14, 0.19)
        pdf_text.draw(c, left, y - 10, block.label, BOLD, 9)
        y -= 14 + box_h
        _framed_block(
            c,
            x=left,
            y=y,
            w=box_w,
            h=box_h,
            signer_name=block.signer_name,
            signed_at=block.signed_at,
            signer_ip=block.signer_ip,
            image_png=block.image_png,
            zone=zone,
        )
        y -= 4 * mm
    c.showPage()
    c.save()
    return buf.getvalue()


def build_parties_pdf(original: bytes, record: AuditRecord, *, blocks: Sequence[PartyBlock]) -> bytes:
    """A document several parties signed: their blocks (``stamp_parties``), then the audit certificate of them all."""

    stamped = stamp_parties(
        original,
        blocks,
        document_name=record.document_name,
        language=record.language,
        zone=record.timezone,
        fields=record.fields,
        struck=record.struck,
    )
    writer = PdfWriter(clone_from=PdfReader(BytesIO(stamped)))
    with _in_language(record.language):
        certificate = audit_certificate(record)
    first = len(writer.pages)
    for page in PdfReader(BytesIO(certificate)).pages:
        writer.add_page(page)
    # Where the certificate starts: after a signature page or not, depending on which roles mark their place.
    writer.add_named_destination(CERTIFICATE_DESTINATION, first)
    out = BytesIO()
    writer.write(out)
    return out.getvalue()

"""The signed record as a PDF: the original pages with the signature block, then the audit certificate.

The block goes in the document's signature box, or on an appended signature page when the document
marks no place; both, and the certificate, speak the recipient's language and time zone. The values
signers filled in (``FilledField``) are stamped in their fields' boxes and listed on the certificate.
``sealing`` seals what this builds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from io import BytesIO
from xml.sax.saxutils import escape
from zoneinfo import ZoneInfo

from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.core.localtime import zone_of
from bulksign.core.messages import N_, N_plural
from bulksign.documents.signature_box import SignatureBox
from bulksign.models import Batch, Document, Event, SigningRequest

FONT_PATH = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
#: The named destination at the first page of the audit certificate of a document several parties signed.
CERTIFICATE_DESTINATION = "bulksign-audit-certificate"
FONT_BOLD_PATH = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"
#: What the stamps write with: the signature block, and the values signers filled.
INK = (0.1, 0.14, 0.19)


@dataclass(frozen=True)
class AuditLine:
    at: datetime
    #: Translated when printed (``N_``), or an unknown event type as it is.
    label: N_ | str
    ip: str
    user_agent: str


@dataclass(frozen=True)
class AuditRecord:
    """Everything the signature block and the audit certificate print (never the batch's internal name)."""

    document_name: str
    batch_id: int
    request_id: int
    recipient_name: str
    recipient_email: str
    signer_name: str
    signer_ip: str
    signed_at: datetime
    original_sha256: str
    lines: tuple[AuditLine, ...]
    #: The recipient's language and time zone (the batch's): the record speaks to them.
    language: str = "en"
    timezone: str = "UTC"
    #: How the signer proved who they are beyond the link (a confirmed one-time code); None: only the link.
    identity: N_ | None = None
    #: The same for each other party of a document several sign that confirmed a code: role → its identity check.
    identities: dict[str, N_] = field(default_factory=dict)
    #: A document signed by several parties (``signing.routing``): each of them, in the order they signed; empty
    #: for a single-signer document, whose signer is the fields above.
    parties: tuple[PartyFacts, ...] = ()
    #: What the signers filled in, in the document's order (``FilledField``).
    fields: tuple[FilledField, ...] = ()


@dataclass(frozen=True)
class PartyFacts:
    """One party of a document signed by several, as its audit certificate lists it."""

    role: str
    name: str
    email: str
    signer_name: str
    signed_at: datetime | None
    signer_ip: str
    #: How the party proved who they are beyond the link; None: only the link.
    identity: N_ | None = None


@dataclass(frozen=True)
class PartyBlock:
    """One party's signature as the document prints it: at the role's mark (``box``), else on the signature page."""

    role: str
    signer_name: str
    signed_at: datetime
    signer_ip: str
    image_png: bytes | None
    box: SignatureBox | None


@dataclass(frozen=True)
class FilledField:
    """A value a signer gave for one of the document's fields (issue 30): stamped in its box before the seal and
    listed on the audit certificate."""

    label: str
    #: As printed (``doc_templates.fields.shown_value``): a checkbox's translated when printed; "" when left empty.
    text: N_ | str
    #: A checkbox's value, drawn as a ticked or an empty box; None for every other type.
    ticked: bool | None
    #: Where the document shows the field; None: its mark was under a condition the row skipped (listed only).
    box: SignatureBox | None
    #: Who gave it (the party's role, name and address), when and from where.
    role: str
    name: str
    email: str
    entered_at: datetime
    entered_ip: str
    #: An attachment's sha256 and size in bytes; None for every other type.
    sha256: str | None = None
    size: int | None = None


#: Event type → label on the audit certificate; other types print as they are.
EVENT_LABELS = {
    "request.created": N_("Created"),
    "status.generating": N_("Document generation started"),
    "status.generated": N_("Document generated"),
    "status.sending": N_("Invitation being sent"),
    "status.sent": N_("Sent"),
    "email.opened": N_("Email opened"),
    "status.opened": N_("Page opened"),
    "page.opened": N_("Page opened again"),
    "status.signed": N_("Signed"),
    # A party of a document several sign (``signing.routing``): ``%(role)s`` from the event's details.
    "party.invited": N_("Invitation sent to %(role)s"),
    "party.opened": N_("Page opened by %(role)s"),
    "party.signed": N_("Signed by %(role)s"),
    "party.declined": N_("Declined by %(role)s"),
    "link.issued": N_("Signing link issued"),
    # One-time codes (``one_time_codes``): ``%(…)s`` are filled from the event's details.
    "code.sent.email": N_("One-time code sent by email to %(to)s"),
    "code.sent.sms": N_("One-time code sent by SMS to %(to)s"),
    "code.failed": N_("Wrong one-time code (%(tries_left)s tries left)"),
    "code.verified": N_("One-time code confirmed"),
    # A countersigner's code, confirmed once for all their documents (``one_time_codes.proof_event``).
    "code.verified.countersign.email": N_("One-time code sent by email to %(to)s confirmed on the countersigning page"),
    "code.verified.countersign.sms": N_("One-time code sent by SMS to %(to)s confirmed on the countersigning page"),
    "code.locked": N_("One-time code locked: too many wrong tries"),
}


def _label(event: Event) -> N_ | str:
    """The event's line on the certificate; a one-time code's lines say where it went and the tries left."""
    details = event.details or {}
    if event.type.startswith("party.") and event.type in EVENT_LABELS:
        return N_(EVENT_LABELS[event.type].msgid, role=details.get("role", ""))
    if not event.type.startswith("code."):
        return EVENT_LABELS.get(event.type, event.type)
    key = event.type
    if event.type == "code.sent":
        key = f"code.sent.{details.get('channel')}"
    elif event.type == "code.verified" and details.get("countersign"):
        key = f"code.verified.countersign.{details.get('channel')}"
    label = EVENT_LABELS.get(key)
    return N_(label.msgid, **details) if label is not None else event.type


def _register_fonts() -> None:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    if "DejaVuSans" not in pdfmetrics.getRegisteredFontNames():
        pdfmetrics.registerFont(TTFont("DejaVuSans", FONT_PATH))
        pdfmetrics.registerFont(TTFont("DejaVuSans-Bold", FONT_BOLD_PATH))


def _local(at: datetime, zone: str, *, short: bool = False) -> str:
    """A moment in the recipient's time zone, with its UTC offset so that it is exact anywhere
    (``short``: the offset without the zone's name, for the narrow signature block)."""
    local = at.astimezone(ZoneInfo(zone))
    if zone == "UTC":
        return f"{local:%Y-%m-%d %H:%M:%S} UTC"
    offset = local.strftime("%z")
    offset = f"UTC{offset[:3]}:{offset[3:]}"
    return f"{local:%Y-%m-%d %H:%M:%S} {offset}" if short else f"{local:%Y-%m-%d %H:%M:%S} {zone} ({offset})"


def _in_language(language: str):
    """The record's language while it is drawn (outside an app, e.g. a bench, English)."""
    from flask import has_app_context
    from flask_babel import force_locale

    return force_locale(language) if has_app_context() else nullcontext()


def _fit(text: str, font: str, size: float, width: float) -> str:
    from reportlab.pdfbase.pdfmetrics import stringWidth

    if stringWidth(text, font, size) <= width:
        return text
    while text and stringWidth(text + "…", font, size) > width:
        text = text[:-1]
    return text + "…"


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
    from reportlab.pdfbase.pdfmetrics import stringWidth

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
        ("DejaVuSans-Bold", str(N_("Signed electronically"))),
        ("DejaVuSans", signer_name),
        ("DejaVuSans", _local(signed_at, zone, short=True)),
        ("DejaVuSans", str(N_("IP %(ip)s", ip=signer_ip))),
    ]
    # As large as the box allows up to 8 pt; below 4.5 pt a long name is cut (…) rather than made unreadable.
    widest = max(stringWidth(text, font, 1) for font, text in rows[:1] + rows[2:]) or 1
    size = max(4.5, min(8.0, text_h / (len(rows) * 1.3), text_w / widest))
    leading = size * 1.3
    top = y + text_h - (text_h - leading * len(rows)) / 2  # the lines centred in their part of the box
    c.setFillColorRGB(*INK)
    for i, (font, text) in enumerate(rows):
        c.setFont(font, size)
        c.drawString(text_x, top - size - i * leading, _fit(text, font, size, text_w))


#: A stamped value's largest and smallest type (points), and its line height: below the smallest, the lines that
#: still do not fit are cut (…); the audit certificate lists the whole value.
VALUE_MAX_PT = 9.0
VALUE_MIN_PT = 4.5
VALUE_LEADING = 1.2


def _value_lines(text: str, *, width: float, height: float) -> tuple[float, list[str]]:
    """``text`` laid out in a box ``width`` × ``height``: the largest size up to ``VALUE_MAX_PT`` at which it fits,
    wrapped at spaces, and its lines; at ``VALUE_MIN_PT`` the lines that fit, the last cut (…)."""
    from reportlab.lib.utils import simpleSplit
    from reportlab.pdfbase.pdfmetrics import stringWidth

    size = max(VALUE_MIN_PT, min(VALUE_MAX_PT, height / VALUE_LEADING))
    while True:
        lines = simpleSplit(text, "DejaVuSans", size, width)
        tall = len(lines) * size * VALUE_LEADING
        if tall <= height and all(stringWidth(line, "DejaVuSans", size) <= width for line in lines):
            return size, lines
        if size <= VALUE_MIN_PT:
            break
        size = max(VALUE_MIN_PT, size - 0.5)
    room = max(1, int(height // (size * VALUE_LEADING)))
    kept = [*lines[: room - 1], " ".join(lines[room - 1 :])]
    return size, [_fit(line, "DejaVuSans", size, width) for line in kept]


def _draw_value(c, field: FilledField) -> None:
    """A field's value inside its box: a checkbox as a ticked or an empty square, any other as its text (as large
    as the box allows), in the signature block's ink."""
    box = field.box
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
    c.setFont("DejaVuSans", size)
    for i, line in enumerate(lines):
        c.drawString(box.x + pad, top - (i + 1) * leading + (leading - size) / 2 + 0.18 * size, line)


def _field_drawings(fields: Sequence[FilledField], *, pages: int) -> dict[int, list[Callable]]:
    """What draws each filled field's value in its box, by page; a field without a box (or left empty) is only listed
    on the certificate."""
    drawings: dict[int, list[Callable]] = {}
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
    from pypdf import PdfReader
    from reportlab.pdfgen import canvas

    _register_fonts()
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
    c.setFont("DejaVuSans-Bold", 15)
    c.drawString(left, top - 15, str(title))
    c.setFont("DejaVuSans", 9)
    c.drawString(
        left, top - 32, _fit(str(N_("Document: %(name)s", name=document_name)), "DejaVuSans", 9, width - 2 * left)
    )
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

    _register_fonts()
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


def audit_certificate(record: AuditRecord) -> bytes:
    """The appended audit certificate page(s): the facts of the document and every event of its request."""
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.lib.units import mm
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

    _register_fonts()
    body = ParagraphStyle("body", fontName="DejaVuSans", fontSize=8.5, leading=11)
    small = ParagraphStyle("small", parent=body, fontSize=7, leading=9)
    title = ParagraphStyle("title", parent=body, fontName="DejaVuSans-Bold", fontSize=15, leading=19)
    heading = ParagraphStyle("heading", parent=body, fontName="DejaVuSans-Bold", fontSize=10.5, leading=14)

    def p(text, style=body):
        # Names and user agents come from people: Paragraph reads markup, so escape everything.
        return Paragraph(escape(str(text)), style)

    zone = record.timezone
    if record.parties:
        signers = []
        for party in record.parties:
            signers += [
                (N_("Party"), f"{party.role}: {party.name} <{party.email}>"),
                (N_("Signed by"), party.signer_name),
                (N_("Signed at"), _local(party.signed_at, zone) if party.signed_at else "—"),
                (N_("Signer IP"), party.signer_ip or "—"),
                (N_("Identity check"), party.identity or N_("The signing link mailed to this address")),
            ]
    else:
        signers = [
            (N_("Recipient"), f"{record.recipient_name} <{record.recipient_email}>"),
            (N_("Signed by"), record.signer_name),
            (N_("Signed at"), _local(record.signed_at, zone)),
            (N_("Signer IP"), record.signer_ip),
            *([(N_("Identity check"), record.identity)] if record.identity else []),
        ]
    facts = [
        (N_("Document"), record.document_name),
        (N_("Reference"), f"#{record.batch_id}-{record.request_id}"),
        *signers,
        (N_("Original sha256"), record.original_sha256),
    ]
    fact_table = Table([[p(k), p(v)] for k, v in facts], colWidths=[38 * mm, 132 * mm])
    event_rows = [
        [
            p(N_("Time (%(zone)s)", zone=zone), small),
            p(N_("Event"), small),
            p(N_("IP"), small),
            p(N_("User agent"), small),
        ]
    ]
    event_rows += [
        [
            p(_local(line.at, zone), small),
            p(line.label, small),
            p(line.ip or "—", small),
            p(line.user_agent or "—", small),
        ]
        for line in record.lines
    ]
    event_table = Table(event_rows, colWidths=[44 * mm, 33 * mm, 26 * mm, 67 * mm], repeatRows=1)
    grid = TableStyle(
        [
            ("GRID", (0, 0), (-1, -1), 0.3, colors.HexColor("#c9ced8")),
            ("VALIGN", (0, 0), (-1, -1), "TOP"),
            ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#eef0f4")),
        ]
    )
    fact_table.setStyle(
        TableStyle([("GRID", (0, 0), (-1, -1), 0.3, colors.HexColor("#c9ced8")), ("VALIGN", (0, 0), (-1, -1), "TOP")])
    )
    event_table.setStyle(grid)
    values = [Spacer(1, 6 * mm), p(N_("Values entered"), heading), Spacer(1, 2 * mm)] if record.fields else []
    if record.fields:
        values.append(_fields_table(record.fields, zone=zone, cell=lambda text: p(text, small), style=grid))
    story = [
        p(N_("Audit certificate"), title),
        Spacer(1, 3 * mm),
        p(
            N_(
                "This page records how the document above was signed electronically. The whole file is sealed "
                "with a PAdES signature; any change after sealing breaks the seal."
            )
        ),
        Spacer(1, 4 * mm),
        fact_table,
        *values,
        Spacer(1, 6 * mm),
        p(N_("Events"), heading),
        Spacer(1, 2 * mm),
        event_table,
    ]
    buf = BytesIO()
    SimpleDocTemplate(
        buf,
        pagesize=A4,
        leftMargin=20 * mm,
        rightMargin=20 * mm,
        topMargin=18 * mm,
        bottomMargin=18 * mm,
        title=str(N_("Audit certificate")),
        author="Bulksign",
    ).build(story)
    return buf.getvalue()


def _fields_table(fields: Sequence[FilledField], *, zone: str, cell: Callable, style):
    """The certificate's table of the values filled: the field, the value as stamped, who entered it and when; under
    an attachment, its sha256 and size across the row."""
    from reportlab.lib.units import mm
    from reportlab.platypus import Table

    rows = [[cell(N_("Field")), cell(N_("Value")), cell(N_("Entered by")), cell(N_("Time (%(zone)s)", zone=zone))]]
    spans = []
    for filled in fields:
        rows.append(
            [
                cell(filled.label),
                cell(filled.text or "—"),
                [
                    cell(
                        f"{filled.role}: {filled.name} <{filled.email}>"
                        if filled.name
                        else f"{filled.role}: {filled.email}"
                    ),
                    *([cell(N_("IP %(ip)s", ip=filled.entered_ip))] if filled.entered_ip else []),
                ],
                cell(_local(filled.entered_at, zone, short=True)),
            ]
        )
        if filled.sha256 is not None:
            size = N_plural("%(num)s byte", "%(num)s bytes", filled.size or 0)
            rows.append(["", [cell(f"sha256 {filled.sha256}"), cell(size)], "", ""])
            last = len(rows) - 1
            spans += [("SPAN", (0, last - 1), (0, last)), ("SPAN", (1, last), (3, last))]
    table = Table(rows, colWidths=[34 * mm, 52 * mm, 52 * mm, 32 * mm], repeatRows=1)
    table.setStyle(style)
    if spans:
        table.setStyle(spans)
    return table


def build_signed_pdf(
    original: bytes, record: AuditRecord, *, image_png: bytes | None, box: SignatureBox | None = None
) -> bytes:
    """Original pages with the signature block in ``box`` (or on an appended signature page), then the audit certificate.

    Both speak the recipient's language and give times in the batch's time zone.
    """
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(BytesIO(original)))
    with _in_language(record.language):
        drawings = _field_drawings(record.fields, pages=len(writer.pages))
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
) -> bytes:
    """The original's pages with the values the parties filled (``fields``) and each party's block at its mark, and
    one signature page holding the blocks of the parties whose role marks no place (never covering the document's
    text). Unsealed: a step's version, or what ``build_parties_pdf`` certifies."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(BytesIO(original)))
    loose = []
    with _in_language(language):
        drawings = _field_drawings(fields, pages=len(writer.pages))
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


def parties_page(blocks: Sequence[PartyBlock], *, document_name: str, width: float, height: float, zone: str) -> bytes:
    """The signature page of a document several sign: one framed block per party, under its role, top to bottom
    (smaller as more parties share the page)."""
    from reportlab.lib.units import mm
    from reportlab.pdfgen import canvas

    _register_fonts()
    buf = BytesIO()
    c = canvas.Canvas(buf, pagesize=(width, height))
    left, y = _heading(c, title=N_("Signatures"), document_name=document_name, width=width, height=height)
    box_w, box_h = min(95 * mm, width - 2 * left), min(30 * mm, (y - 20 * mm) / len(blocks) - 14)
    for block in blocks:
        c.setFillColorRGB(0.1, 0.14, 0.19)
        c.setFont("DejaVuSans-Bold", 9)
        c.drawString(left, y - 10, block.role)
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
    from pypdf import PdfReader, PdfWriter

    stamped = stamp_parties(
        original,
        blocks,
        document_name=record.document_name,
        language=record.language,
        zone=record.timezone,
        fields=record.fields,
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


def certificate_pages(signed: bytes, *, original: bytes, box: SignatureBox | None) -> bytes:
    """The audit certificate pages of a signed PDF ``build_signed_pdf`` made from ``original`` (and ``box``), as a
    PDF of their own: what follows the original's pages and the signature page it appended (unsealed: a copy)."""
    from pypdf import PdfReader, PdfWriter

    signed_reader = PdfReader(BytesIO(signed))
    marked = signed_reader.named_destinations.get(CERTIFICATE_DESTINATION)
    if marked is not None:  # a document several signed (``build_parties_pdf``)
        first = signed_reader.get_destination_page_number(marked)
    else:
        reader = PdfReader(BytesIO(original))
        stamped = box is not None and 0 <= box.page < len(reader.pages)
        first = len(reader.pages) + (0 if stamped else 1)
    writer = PdfWriter()
    for page in signed_reader.pages[first:]:
        writer.add_page(page)
    writer.add_metadata({"/Producer": "Bulksign", "/Title": str(N_("Audit certificate"))})
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def audit_record(session: Session, request: SigningRequest, original: Document) -> AuditRecord:
    """The facts and events of ``request`` as the audit certificate prints them."""
    batch: Batch = request.batch
    events = session.scalars(
        select(Event).where(Event.request_id == request.id).order_by(Event.created_at, Event.id)
    ).all()
    lines = [AuditLine(at=e.created_at, label=_label(e), ip=e.ip or "", user_agent=e.user_agent or "") for e in events]
    types = {e.type for e in events}
    if "request.created" not in types:
        lines.insert(0, AuditLine(at=request.created_at, label=EVENT_LABELS["request.created"], ip="", user_agent=""))
    if request.email_opened_at and "email.opened" not in types:
        lines.append(AuditLine(at=request.email_opened_at, label=EVENT_LABELS["email.opened"], ip="", user_agent=""))
    lines.sort(key=lambda line: line.at)
    return AuditRecord(
        document_name=document_title(batch),
        batch_id=batch.id,
        request_id=request.id,
        recipient_name=request.name or "",
        recipient_email=request.email,
        signer_name=request.signer_name or request.name or "",
        signer_ip=request.signer_ip or "",
        signed_at=request.signed_at,
        original_sha256=original.sha256,
        lines=tuple(lines),
        language=batch.language or "en",
        timezone=zone_of(batch).key,
        identity=_identity(events, zone=zone_of(batch).key),
        identities={
            role: found
            for role in {e.details.get("role") for e in events if e.type == "code.verified"} - {None}
            if (found := _identity(events, zone=zone_of(batch).key, role=role)) is not None
        },
    )


def _identity(events: Sequence[Event], *, zone: str, role: str | None = None) -> N_ | None:
    """The last one-time code the recipient (or the party ``role``) confirmed before signing: where it went and
    when it was confirmed."""
    verified = [e for e in events if e.type == "code.verified" and (e.details or {}).get("role") == role]
    if not verified:
        return None
    facts = verified[-1].details
    if "to" not in facts:
        # A request's own code, issued before it could be confirmed: its ``code.sent`` is in the same trail. (A
        # countersigner's says where it went itself: its ``code.sent`` is the link's.)
        code_id = facts.get("code_id")
        facts = next(e.details for e in events if e.type == "code.sent" and e.details.get("code_id") == code_id)
    when = _local(verified[-1].created_at, zone)
    if facts.get("channel") == "sms":
        return N_("One-time code sent by SMS to %(to)s, confirmed %(when)s", to=facts.get("to"), when=when)
    return N_("One-time code sent by email to %(to)s, confirmed %(when)s", to=facts.get("to"), when=when)


def document_title(batch: Batch) -> str:
    """What recipients call the document: its template's name, never the batch's internal name."""
    template = batch.template_version.template if batch.template_version else None
    return template.name if template else ""

"""The audit certificate: the pages after a signed document listing its facts, the values filled and every
event of its request; ``certificate_pages`` takes them out of a signed PDF again."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from io import BytesIO

from pypdf import PdfReader, PdfWriter

from bulksign.core.messages import N_, N_plural
from bulksign.documents import pdf_text
from bulksign.documents.audit_record import AuditRecord, FilledField, local_time
from bulksign.documents.pdf_text import BOLD, REGULAR
from bulksign.documents.signature_box import SignatureBox

#: The named destination at the first page of the audit certificate of a document several parties signed.
CERTIFICATE_DESTINATION = "bulksign-audit-certificate"


def audit_certificate(record: AuditRecord) -> bytes:
    """The appended audit certificate page(s): the facts of the document and every event of its request."""
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.lib.units import mm
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

    pdf_text.register_fonts()
    body = ParagraphStyle("body", fontName=REGULAR, fontSize=8.5, leading=11)
    small = ParagraphStyle("small", parent=body, fontSize=7, leading=9)
    title = ParagraphStyle("title", parent=body, fontName=BOLD, fontSize=15, leading=19)
    heading = ParagraphStyle("heading", parent=body, fontName=BOLD, fontSize=10.5, leading=14)

    def p(text, style=body):
        # Names and user agents come from people: Paragraph reads markup, so everything is escaped (``markup``).
        return Paragraph(pdf_text.markup(str(text), style.fontName), style)

    zone = record.timezone
    if record.parties:
        signers = []
        for party in record.parties:
            signers += [
                (N_("Party"), f"{record.party(party.role)}: {party.name} <{party.email}>"),
                (N_("Signed by"), party.signer_name),
                (N_("Signed at"), local_time(party.signed_at, zone) if party.signed_at else "—"),
                (N_("Signer IP"), party.signer_ip or "—"),
                (N_("Identity check"), party.identity or N_("The signing link mailed to this address")),
            ]
    else:
        signers = [
            (N_("Recipient"), f"{record.recipient_name} <{record.recipient_email}>"),
            (N_("Signed by"), record.signer_name),
            (N_("Signed at"), local_time(record.signed_at, zone)),
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
            p(local_time(line.at, zone), small),
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
        values.append(
            _fields_table(record.fields, zone=zone, cell=lambda text: p(text, small), style=grid, party=record.party)
        )
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


def _fields_table(fields: Sequence[FilledField], *, zone: str, cell: Callable, style, party: Callable[[str], str]):
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
                        f"{party(filled.role)}: {filled.name} <{filled.email}>"
                        if filled.name
                        else f"{party(filled.role)}: {filled.email}"
                    ),
                    *([cell(N_("IP %(ip)s", ip=filled.entered_ip))] if filled.entered_ip else []),
                ],
                cell(local_time(filled.entered_at, zone, short=True)),
            ]
        )
        if filled.sha256 is not None:
            size = N_plural("%(num)s byte", "%(num)s bytes", filled.size or 0)
            given = (
                [cell(N_("Active content taken out; as given: sha256 %(sha256)s", sha256=filled.original_sha256))]
                if filled.original_sha256
                else []
            )
            rows.append(["", [cell(f"sha256 {filled.sha256}"), cell(size), *given], "", ""])
            last = len(rows) - 1
            spans += [("SPAN", (0, last - 1), (0, last)), ("SPAN", (1, last), (3, last))]
    table = Table(rows, colWidths=[34 * mm, 52 * mm, 52 * mm, 32 * mm], repeatRows=1)
    table.setStyle(style)
    if spans:
        table.setStyle(spans)
    return table


def certificate_pages(signed: bytes, *, original: bytes, box: SignatureBox | None) -> bytes:
    """The audit certificate pages of a signed PDF ``build_signed_pdf`` made from ``original`` (and ``box``), as a
    PDF of their own: what follows the original's pages and the signature page it appended (unsealed: a copy)."""

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

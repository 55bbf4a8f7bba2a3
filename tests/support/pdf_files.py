"""Real PDF files for the PDF-template tests, made with reportlab: fillable forms, plain pages, hostile ones."""
from __future__ import annotations

from io import BytesIO

from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

#: The fields ``contract_form()`` has, on page 1.
CONTRACT_FIELDS = ("name", "city", "position", "salary", "contract_number")


def _body(c, page: int) -> None:
    c.setFont("Helvetica", 11)
    c.drawString(72, 800, f"Employment agreement, page {page}")
    for i in range(36):
        c.drawString(72, 770 - i * 15, "The Employee shall perform the duties of the position with care.")


def contract_form(*, pages: int = 2, fields=CONTRACT_FIELDS, signature: bool = False, checkbox: bool = False,
                  multiline: str | None = None) -> bytes:
    """A 2-page contract whose page 1 has one text field per name in ``fields`` (AcroForm, as Acrobat makes)."""
    buffer = BytesIO()
    c = canvas.Canvas(buffer, pagesize=A4)
    for page in range(1, pages + 1):
        _body(c, page)
        if page == 1:
            for i, name in enumerate(fields):
                y = 180 - i * 22
                c.drawString(72, y + 5, f"{name}:")
                c.acroForm.textfield(name=name, x=200, y=y, width=250, height=18, fontName="Helvetica",
                                     fontSize=11, borderWidth=0, fillColor=None)
            if multiline:
                c.acroForm.textfield(name=multiline, x=72, y=20, width=300, height=40, fontSize=9,
                                     fieldFlags="multiline", borderWidth=0, fillColor=None)
            if checkbox:
                c.acroForm.checkbox(name="agree", x=460, y=180, size=14, checked=True)
        if page == pages and signature:
            c.drawString(300, 110, "Signature:")
            c.acroForm.textfield(name="signature", x=300, y=40, width=200, height=60, borderWidth=1)
        c.showPage()
    c.save()
    return buffer.getvalue()


def plain_pdf(*, pages: int = 1, text: str = "Plain page") -> bytes:
    """A PDF without form fields, as a scanner or "print to PDF" makes."""
    buffer = BytesIO()
    c = canvas.Canvas(buffer, pagesize=A4)
    for page in range(1, pages + 1):
        _body(c, page)
        c.drawString(72, 120, f"{text} {page}")
        c.showPage()
    c.save()
    return buffer.getvalue()


def encrypted_pdf() -> bytes:
    """A form protected with a user password (and one without: owner restrictions only, still encrypted)."""
    buffer = BytesIO()
    c = canvas.Canvas(buffer, pagesize=A4, encrypt="secret")
    _body(c, 1)
    c.showPage()
    c.save()
    return buffer.getvalue()


def xfa_form() -> bytes:
    """A form whose AcroForm carries an XFA packet, as LiveCycle Designer saves."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import NameObject, StreamObject

    writer = PdfWriter(clone_from=PdfReader(BytesIO(contract_form())))
    xfa = StreamObject()
    xfa.set_data(b'<xdp:xdp xmlns:xdp="http://ns.adobe.com/xdp/"></xdp:xdp>')
    writer.root_object["/AcroForm"][NameObject("/XFA")] = writer._add_object(xfa)
    out = BytesIO()
    writer.write(out)
    return out.getvalue()

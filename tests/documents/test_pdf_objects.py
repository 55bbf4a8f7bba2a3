"""A part written from the run's own objects: only what its catalog reaches, copied as the run wrote it."""

from __future__ import annotations

import io

import pytest
from pypdf import PdfReader

from bulksign.documents.pdf_objects import ObjectsError, RunObjects


def _pdf(objects: dict[int, bytes], *, root: int = 1) -> bytes:
    """A PDF of ``objects`` (number → body) with one cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = {}
    for number, body in sorted(objects.items()):
        offsets[number] = len(out)
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    table = len(out)
    size = max(objects) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    out += b"".join(
        b"%010d 00000 n \n" % offsets[n] if n in offsets else b"0000000000 00000 f \n" for n in range(1, size)
    )
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, root, table)
    return bytes(out)


def _run(annotation: bytes = b"") -> bytes:
    """Two pages, each with its own content and one shared resource; the first page's annotation is ``annotation``."""
    annots = b" /Annots [7 0 R]" if annotation else b""
    objects = {
        1: b"<< /Type /Catalog /Pages 2 0 R /Outlines 9 0 R >>",
        2: b"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 /MediaBox [0 0 200 200] >>",
        3: b"<< /Type /Page /Parent 2 0 R /Contents 5 0 R /Resources 8 0 R" + annots + b" >>",
        4: b"<< /Type /Page /Parent 2 0 R /Contents 6 0 R /Resources 8 0 R >>",
        5: b"<< /Length 10 >>\nstream\n0 0 m 1 1 l\nendstream",
        6: b"<< /Length 10 >>\nstream\n0 0 m 2 2 l\nendstream",
        8: b"<< /ProcSet [/PDF] /Note (kept as written: 4 0 R in a string) >>",
        9: b"<< /Count 0 >>",
    }
    if annotation:
        objects[7] = annotation
    return _pdf(objects)


def _split(pdf: bytes, page: int) -> bytes:
    reader = PdfReader(io.BytesIO(pdf))
    return RunObjects(pdf, reader).part([reader.pages[page]], {})


def test_a_part_holds_only_what_its_pages_reach_copied_as_the_run_wrote_it():
    run = _run()
    part = _split(run, 1)
    reader = PdfReader(io.BytesIO(part))
    assert set(reader.xref[0]) == {1, 2, 4, 6, 8}, "not the other page, its content, nor the run's outlines"
    assert [page.get_contents().get_data() for page in reader.pages] == [b"0 0 m 2 2 l"]
    assert reader.trailer["/Root"]["/Pages"]["/Count"] == 1
    assert reader.pages[0].mediabox.width == 200, "what the page tree passes down stays"
    assert b"8 0 obj\n<< /ProcSet [/PDF] /Note (kept as written: 4 0 R in a string) >>\nendobj" in part


def test_a_part_that_would_reach_another_parts_page_is_refused():
    run = _run(b"<< /Type /Annot /Subtype /Link /Rect [0 0 1 1] /P 4 0 R >>")
    with pytest.raises(ObjectsError, match="another part's page"):
        _split(run, 0)


def test_a_run_whose_pages_hang_below_an_inner_node_is_refused():
    run = _pdf(
        {
            1: b"<< /Type /Catalog /Pages 2 0 R >>",
            2: b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            3: b"<< /Type /Pages /Parent 2 0 R /Kids [4 0 R] /Count 1 >>",
            4: b"<< /Type /Page /Parent 3 0 R /MediaBox [0 0 10 10] >>",
        }
    )
    with pytest.raises(ObjectsError, match="children of its page tree"):
        RunObjects(run, PdfReader(io.BytesIO(run)))


def test_a_run_whose_table_points_elsewhere_is_refused():
    run = _run()
    moved = run.replace(b"\n4 0 obj\n", b"\n4 0 obj \n")  # every later object one byte from where the table says
    with pytest.raises(ObjectsError, match="not where the cross-reference table says"):
        RunObjects(moved, PdfReader(io.BytesIO(moved)))

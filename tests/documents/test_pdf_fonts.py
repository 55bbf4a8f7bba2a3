"""What a page's content stream shows in each font, read as Qt writes it; anything written otherwise refuses."""

from __future__ import annotations

import pytest

from bulksign.documents.pdf_fonts import FontError, TextObjects, _read, _shown

FIRST = b"q\nBT\n/F7 24 Tf 1 0 0 -1 0 0 Tm\n255 -42 Td <0001> Tj\n18 0 Td <00020003> Tj\nET\nQ\n"
QT = FIRST + b"BT\n/F8 16 Tf\n<0001> Tj\nET\n"


def test_the_codes_shown_in_each_font_and_how_often():
    assert _shown(QT) == {"F7": {1: 1, 2: 1, 3: 1}, "F8": {1: 1}}
    assert _shown(b"(a literal string outside text) Do\n" + QT) == {"F7": {1: 1, 2: 1, 3: 1}, "F8": {1: 1}}
    assert _shown(QT + QT) == {"F7": {1: 2, 2: 2, 3: 2}, "F8": {1: 2}}


#: A page as Qt begins it (its printable area, 100 high, clipped) and a line drawn at y = 0.5 × (−Td's y) + cm's f.
PAGE = b"0 0 m\n200 0 l\n200 100 l\n0 100 l\n0 0 l\nh\nW* n\n"


def _line(code: bytes, f: float) -> bytes:
    return b"q\n0.5 0 0 0.5 0 %.1f cm\nBT\n/F7 24 Tf 1 0 0 -1 0 0 Tm\n1 -100 Td <%s> Tj\nET\nQ\n" % (f, code)


def test_lines_outside_the_printable_area_are_told_apart_when_asked():
    """A table row that straddles two pages is drawn on both, cut at each page's edge: its baseline lies inside one
    page's printable area and outside the other's."""
    content = b"\n" + PAGE + _line(b"0001", 0) + _line(b"0002", 60) + _line(b"0003", -60)
    placed = _read(content, placed=True)
    assert placed.shown == {"F7": {1: 1}} and placed.clipped == {"F7": {2: 1, 3: 1}}
    assert _read(content).shown == {"F7": {1: 1, 2: 1, 3: 1}} and _read(content).clipped == {}


def test_a_run_reads_each_distinct_text_object_once_and_as_it_would_alone():
    """Pages of one run share most of their text objects byte for byte (with what follows each, up to the next):
    each is read once, and the pages read the same. One glyph apart is another object."""
    other = FIRST.replace(b"<0001>", b"<0004>")
    pages = [QT, QT, QT + QT, QT + other]
    seen = TextObjects()
    assert [_read(page, seen=seen) for page in pages] == [_read(page) for page in pages]
    # 11 text objects, 4 distinct: FIRST's, F8's at the end of a page, F8's before another (``q``), other's.
    assert sum(page.count(b"\nBT\n") for page in pages) == 11 and len(seen) == 4
    assert _read(other, seen=seen).shown == {"F7": {2: 1, 3: 1, 4: 1}}


def test_past_its_size_a_run_reads_new_text_objects_without_keeping_them():
    first = QT.split(b"\nBT\n")[1]
    seen = TextObjects(max_bytes=len(first))
    pages = [QT, QT + QT]
    assert [_read(page, seen=seen) for page in pages] == [_read(page) for page in pages]
    assert len(seen) == 1


def test_a_text_object_read_before_is_placed_where_it_is_drawn_this_time():
    """Its place comes from what is drawn before it (``cm``), which is not part of what is remembered of it."""
    seen = TextObjects()
    inside, outside = (_read(b"\n" + PAGE + _line(b"0002", f), placed=True, seen=seen) for f in (0, 60))
    assert len(seen) == 1  # the same text object on both pages, drawn after another cm
    assert inside.shown == {"F7": {2: 1}} and inside.clipped == {}
    assert outside.shown == {} and outside.clipped == {"F7": {2: 1}}


def test_a_refused_text_object_is_refused_on_every_page_it_is_on():
    seen = TextObjects()
    refused = FIRST + b"BT\n/F8 16 Tf\n(A) Tj\nET\n"
    _read(QT, seen=seen)
    for _ in range(2):
        with pytest.raises(FontError):
            _read(refused, seen=seen)


@pytest.mark.parametrize(
    "content",
    [
        FIRST + b"BT\n/F8 16 Tf\n(A) Tj\nET\n",
        FIRST + b"BT\n/F8 16 Tf\n[<0001>] TJ\nET\n",
        FIRST + b"BT\n/F8 16 Tf\n<001> Tj\nET\n",
        FIRST + b"BT\n/F8 16 Tf\n<0001> Tj\nQ\n",
        b"<0001> Tj\n" + QT,
        QT + b"BI /W 1 /H 1 ID x EI\n",
        b"BI /W 1 /H 1 ID x EI\n" + QT,
        FIRST + b"BT\n/F8 16 Tf\nBI /W 1 /H 1 ID x EI\n<0001> Tj\nET\n",
        FIRST + b"BT\n/F8 16 Tf\n<0001> Tj\nBI\nET\n",
    ],
    ids=[
        "literal",
        "TJ",
        "odd-code",
        "not-ended",
        "outside",
        "inline-image",
        "inline-image-first",
        "inline-image-in-text",
        "inline-image-before-end",
    ],
)
def test_text_not_written_as_qt_writes_it_is_refused(content):
    with pytest.raises(FontError):
        _shown(content)


def test_a_page_without_its_plain_text_objects_keeps_everything_else():
    drawing = b"q 0.6 0.64 0.7 RG 10 10 100 50 re S Q\n"
    read = _read(drawing + FIRST + drawing)
    assert read.shown == {"F7": {1: 1, 2: 1, 3: 1}}
    assert read.without_text == drawing + b"q\n" + b"Q\n" + drawing


@pytest.mark.parametrize(
    "text",
    [
        b"BT\n/F8 16 Tf 1 0 0 -1 0 0 Tm\n1 0 Td <0001> Tj 0.6 0.64 0.7 rg\nET\n",
        b"BT\n/F8 16 Tf 1 0 0 -1 0 0 Tm\n1 0 Td <0001> Tj\n0 0 m 5 5 l S\nET\n",
        b"BT\n/F8 16 Tf 1 0 0 -1 0 0 Tm\n1 0 Td <000F> Tj F\nET\n",
        b"BT\n/F8 16 Tf 2 Tr 1 0 0 -1 0 0 Tm\n1 0 Td <0001> Tj\nET\n",
        b"BT\n/F8 16 Tf\n<0001> Tj\nET\n",
    ],
    ids=["colour", "path", "fill", "render-mode", "no-matrix"],
)
def test_a_text_object_that_may_do_more_than_show_glyphs_keeps_the_page_whole(text):
    """Its glyphs are read as before, but the page has no content without text: it is searched for marks whole."""
    read = _read(FIRST + text)
    assert read.shown["F7"] == {1: 1, 2: 1, 3: 1} and read.without_text is None

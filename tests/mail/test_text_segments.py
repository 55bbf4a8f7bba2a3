"""SMS segments: GSM-7 and its extension characters, UCS-2 for anything else, the part sizes of long texts."""

from __future__ import annotations

import pytest

from bulksign.mail.text_segments import Encoding, segments


@pytest.mark.parametrize(
    ("text", "encoding", "units", "count"),
    [
        ("a" * 160, Encoding.GSM7, 160, 1),
        ("a" * 161, Encoding.GSM7, 161, 2),
        ("a" * 306, Encoding.GSM7, 306, 2),
        ("a" * 307, Encoding.GSM7, 307, 3),
        ("€" * 80, Encoding.GSM7, 160, 1),  # an extension character counts twice
        ("я" * 70, Encoding.UCS2, 70, 1),
        ("я" * 71, Encoding.UCS2, 71, 2),
        ("я" * 134, Encoding.UCS2, 134, 2),
        ("a" * 60 + "«", Encoding.UCS2, 61, 1),  # one character outside GSM-7 makes the whole text UCS-2
        ("😀" * 35, Encoding.UCS2, 70, 1),  # beyond the BMP: two UTF-16 units each
    ],
)
def test_segments(text, encoding, units, count):
    assert segments(text).__dict__ == {
        "encoding": encoding,
        "units": units,
        "count": count,
    }

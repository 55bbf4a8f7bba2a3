"""How many SMS segments a text costs: GSM-7 when every character is in the GSM 03.38 alphabet (160 a text, 153 a
part; the extension characters count twice), else UCS-2 (70, 67 a part; characters beyond the BMP count twice)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

_GSM_BASIC = (
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞ\x1bÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
_GSM_EXTENDED = "^{}\\[~]|€\f"


class Encoding(StrEnum):
    GSM7 = "gsm7"
    UCS2 = "ucs2"


@dataclass(frozen=True)
class Segments:
    encoding: Encoding
    #: Characters as the encoding counts them (septets, or UTF-16 code units).
    units: int
    count: int


def segments(text: str) -> Segments:
    """The encoding, length and number of segments ``text`` goes out as."""
    if all(c in _GSM_BASIC or c in _GSM_EXTENDED for c in text):
        units = sum(2 if c in _GSM_EXTENDED else 1 for c in text)
        return Segments(Encoding.GSM7, units, _count(units, single=160, part=153))
    units = len(text.encode("utf-16-le")) // 2
    return Segments(Encoding.UCS2, units, _count(units, single=70, part=67))


def _count(units: int, *, single: int, part: int) -> int:
    if units <= single:
        return 1
    return -(-units // part)

"""Uploaded zip packages (.docx, .xlsx) inflated as streams within limits, their declared sizes proven true.
More in docs/architecture/core.md."""

from __future__ import annotations

import copy
import io
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from bulksign.core.errors import BulksignError

#: Raw bytes read, and most bytes inflated, per step: what one step may hold in memory.
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Limits:
    #: Most parts the package may have.
    parts: int
    #: Most bytes one part may unpack to.
    part_bytes: int
    #: Most bytes all parts together may unpack to.
    total_bytes: int


class ArchiveRefused(BulksignError):
    """Why a package is refused: ``reason`` is ``broken``, ``parts``, ``part_bytes`` or ``total_bytes``; ``part``
    names the part and ``size`` the count that passed its limit (the parts, or the bytes inflated so far)."""

    def __init__(self, reason: str, *, part: str = "", size: int = 0):
        super().__init__(f"{reason} {part}".strip())
        self.reason, self.part, self.size = reason, part, size


def check(data: bytes, *, limits: Limits) -> None:
    """Inflate every part once, keeping nothing: ArchiveRefused if the package breaks a limit or its headers."""
    for _ in _parts(data, limits, lambda name: False):
        pass


def read(data: bytes, *, limits: Limits, wanted: Callable[[str], bool] = lambda name: True) -> dict[str, bytes]:
    """The ``wanted`` parts by name, after every part has been inflated within ``limits``; ArchiveRefused if not."""
    return dict(_parts(data, limits, wanted))


def _parts(data: bytes, limits: Limits, wanted: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        raise ArchiveRefused("broken") from None
    with archive:
        infos = archive.infolist()
        if len(infos) > limits.parts:
            raise ArchiveRefused("parts", size=len(infos))
        total = 0
        for info in infos:
            if info.is_dir():
                continue
            kept: list[bytes] | None = [] if wanted(info.filename) else None
            size = 0
            for piece in _inflated(archive, info):
                size += len(piece)
                total += len(piece)
                if size > limits.part_bytes:
                    raise ArchiveRefused("part_bytes", part=info.filename, size=size)
                if total > limits.total_bytes:
                    raise ArchiveRefused("total_bytes", part=info.filename, size=total)
                if kept is not None:
                    kept.append(piece)
            if kept is not None:
                yield info.filename, b"".join(kept)


def _inflated(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[bytes]:
    """The part's bytes in pieces of at most ``_CHUNK``, inflated from its raw stream to the stream's own end, then
    checked against the size and CRC its headers declare."""
    if info.flag_bits & 0x1:
        raise ArchiveRefused("broken", part=info.filename)  # encrypted
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise ArchiveRefused("broken", part=info.filename)  # Office writes only these two
    # The raw bytes, as zipfile reads a stored part: its local header checked, no CRC (that is of the inflated
    # bytes, checked below) and no size to stop at but the raw one.
    raw_info = copy.copy(info)
    raw_info.compress_type = zipfile.ZIP_STORED
    raw_info.file_size = info.compress_size
    raw_info.CRC = None  # type: ignore[assignment]  # zipfile checks no CRC where it is None
    inflater = zlib.decompressobj(-zlib.MAX_WBITS) if info.compress_type == zipfile.ZIP_DEFLATED else None
    crc = size = 0
    try:
        with archive.open(raw_info) as raw:
            for piece in _pieces(raw, inflater):
                crc, size = zlib.crc32(piece, crc), size + len(piece)
                if size > info.file_size:
                    raise ArchiveRefused("broken", part=info.filename)  # a header that lies about the size
                yield piece
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error):
        raise ArchiveRefused("broken", part=info.filename) from None
    if size != info.file_size or crc != info.CRC or (inflater is not None and not inflater.eof):
        raise ArchiveRefused("broken", part=info.filename)


def _pieces(raw, inflater) -> Iterator[bytes]:
    """Inflated pieces of at most ``_CHUNK`` bytes, one at a time: a megabyte of zeros inflates to a gigabyte,
    never held at once."""
    while block := raw.read(_CHUNK):
        if inflater is None:
            yield block
            continue
        while block and not inflater.eof:
            yield inflater.decompress(block, _CHUNK)
            block = inflater.unconsumed_tail

"""A part of a run's PDF written from the run's own objects under their own numbers (``together``): the objects its
catalog reaches and no other, each copied as the run wrote it unless the part replaces it (its pages, its page tree,
its fonts cut down). Cloning and writing every object again with pypdf cost more than half of a split.
More in docs/architecture/html-together.md."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from io import BytesIO
from typing import cast

from pypdf import PageObject, PdfReader
from pypdf.generic import (
    ArrayObject,
    DictionaryObject,
    IndirectObject,
    NameObject,
    NumberObject,
    PdfObject,
    StreamObject,
)

from bulksign.core.errors import BulksignError

_STARTXREF = re.compile(rb"startxref\s+(\d+)\s+%%EOF\s*\Z")
_HEADER = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"


class ObjectsError(BulksignError):
    """The run's PDF is not laid out as this module copies objects from (one cross-reference table, generation 0,
    no object streams, one page tree node), or a part would reach a page that is not its own."""


@dataclass(frozen=True)
class Replacement:
    """An object a part writes in place of the run's: as written inside ``n 0 obj … endobj`` (its references keep
    their numbers), and the numbers it names."""

    body: bytes
    names: tuple[int, ...]

    @classmethod
    def of(cls, obj: PdfObject) -> Replacement:
        out = BytesIO()
        obj.write_to_stream(out)
        return cls(out.getvalue(), tuple(_names(obj)))


class RunObjects:
    """The run's objects, each as the run's file holds it, and the numbers each names, read once for all parts."""

    def __init__(self, pdf: bytes, reader: PdfReader) -> None:
        numbers = reader.xref.get(0, {})
        ended = _STARTXREF.search(pdf, max(0, len(pdf) - 64))
        if reader.xref_objStm or any(table for generation, table in reader.xref.items() if generation) or not ended:
            raise ObjectsError("the run's PDF has object streams, later generations or no cross-reference table")
        by_offset = sorted((offset, number) for number, offset in numbers.items())
        ends = [offset for offset, _ in by_offset[1:]] + [int(ended[1])]
        # Where each object's body lies (between ``n 0 obj`` and ``endobj``), sliced only for the objects a part copies.
        self._bodies: dict[int, tuple[int, int]] = {}
        for (offset, number), end in zip(by_offset, ends):
            opening = b"%d 0 obj" % number
            closing = pdf.rfind(b"endobj", offset, end)
            if not pdf.startswith(opening, offset) or closing < 0 or pdf[closing + 6 : end].strip():
                raise ObjectsError(f"object {number} is not where the cross-reference table says")
            self._bodies[number] = (offset + len(opening), closing)
        self._pdf, self._reader = pdf, reader
        self._copies: dict[int, Replacement] = {}
        root, info = (
            reader.trailer.raw_get("/Root"),
            reader.trailer.raw_get("/Info") if "/Info" in reader.trailer else None,
        )
        catalog = root.get_object() if isinstance(root, IndirectObject) else None
        tree = catalog.raw_get("/Pages") if isinstance(catalog, DictionaryObject) else None
        if not isinstance(tree, IndirectObject) or not all(
            isinstance(page.indirect_reference, IndirectObject) and page.raw_get("/Parent") == tree
            for page in reader.pages
        ):
            raise ObjectsError("the run's pages are not all children of its page tree's root")
        self._catalog, self._tree = cast(IndirectObject, root).idnum, tree
        self._info = info.idnum if isinstance(info, IndirectObject) else None
        self._all_pages = {_number(page) for page in reader.pages}

    def part(self, pages: Sequence[PageObject], replaced: Mapping[int, Replacement]) -> bytes:
        """A PDF of ``pages`` (the run's, as the part changed them) with the objects ``replaced``, holding only what
        its catalog and the run's document information reach."""
        run_tree = cast(DictionaryObject, self._tree.get_object())
        tree = DictionaryObject({key: value for key, value in run_tree.items() if key not in ("/Kids", "/Count")})
        tree[NameObject("/Kids")] = ArrayObject(page.indirect_reference for page in pages)
        tree[NameObject("/Count")] = NumberObject(len(pages))
        catalog = DictionaryObject({NameObject("/Type"): NameObject("/Catalog"), NameObject("/Pages"): self._tree})
        own = {self._catalog: catalog, self._tree.idnum: tree, **{_number(page): page for page in pages}}
        written = {**replaced, **{number: Replacement.of(obj) for number, obj in own.items()}}
        reached = self._reached([self._catalog, *([self._info] if self._info else [])], written)
        if (self._all_pages & reached) - {_number(page) for page in pages}:
            raise ObjectsError("a part reaches another part's page")
        return self._write(sorted(reached), written)

    def _reached(self, roots: list[int], replaced: Mapping[int, Replacement]) -> set[int]:
        reached, todo = set(), list(roots)
        while todo:
            number = todo.pop()
            if number not in reached:
                reached.add(number)
                todo += (replaced[number] if number in replaced else self._copy(number)).names
        return reached

    def _copy(self, number: int) -> Replacement:
        """The run's object as a part copies it, read once for all parts: a stream written again from what pypdf
        read (its dictionary, its data as stored: the run's ``/Length`` is an object of its own, which pypdf reads
        into the length and drops), anything else byte for byte, naming what pypdf read in those bytes."""
        if number not in self._copies:
            obj = self._reader.get_object(number)
            if isinstance(obj, StreamObject):
                self._copies[number] = Replacement.of(obj)
            else:
                start, end = self._bodies[number]
                self._copies[number] = Replacement(self._pdf[start:end].strip(), tuple(_names(obj)))
        return self._copies[number]

    def _write(self, numbers: list[int], replaced: Mapping[int, Replacement]) -> bytes:
        out = bytearray(_HEADER)
        offsets = []
        for number in numbers:
            offsets.append(len(out))
            out += b"%d 0 obj\n" % number
            out += replaced[number].body if number in replaced else self._copies[number].body
            out += b"\nendobj\n"
        table = len(out)
        out += b"xref\n0 1\n0000000000 65535 f \n"
        start = 0
        while start < len(numbers):  # one subsection for each run of consecutive numbers
            end = start + 1
            while end < len(numbers) and numbers[end] == numbers[end - 1] + 1:
                end += 1
            out += b"%d %d\n" % (numbers[start], end - start)
            out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets[start:end])
            start = end
        info = b" /Info %d 0 R" % self._info if self._info else b""
        out += b"trailer\n<< /Size %d /Root %d 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (
            numbers[-1] + 1,
            self._catalog,
            info,
            table,
        )
        return bytes(out)


def _number(page: PageObject) -> int:
    return cast(IndirectObject, page.indirect_reference).idnum


def _names(obj: PdfObject | None) -> Iterator[int]:
    """The numbers of the objects ``obj`` refers to, at any depth (a stream's through its dictionary)."""
    if isinstance(obj, IndirectObject):
        yield obj.idnum
    elif isinstance(obj, DictionaryObject):
        for value in obj.values():
            yield from _names(value)
    elif isinstance(obj, ArrayObject):
        for value in obj:
            yield from _names(value)

"""The Word check: a .docx rendered with a sample row (by a job), each tag found on the pages, what was not
understood named with the tag meant. Where a tag lands: a signature's or field's frame is found by its colour, as
sealing finds it; a value's by rendering the file once more with each value a unique marker, read back from the
PDF's text layer."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from bulksign.core.messages import N_
from bulksign.doc_templates import docx_package, docx_templates, kinds
from bulksign.doc_templates import versions as dt
from bulksign.doc_templates.errors import TemplateError
from bulksign.doc_templates.fields import template_fields
from bulksign.doc_templates.template_parties import template_parties
from bulksign.doc_templates.template_sample import clean_sample
from bulksign.doc_templates.variables import sample_row
from bulksign.doc_templates.word_tags import Tag, TagKind, TagReader, classify, colours, parties_of, shown
from bulksign.documents import pdf_pages, poppler
from bulksign.documents.field_boxes import field_name, find_field_boxes
from bulksign.documents.pdf import RenderError
from bulksign.documents.signature_box import SignatureBox, UnreadablePdf, find_signature_boxes, mark_indexes
from bulksign.documents.storage import Storage, StorageError
from bulksign.models import DocumentTemplate, TemplateVersion, User, WordCheck


class CheckStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    READY = "ready"
    FAILED = "failed"


UNFINISHED = (CheckStatus.PENDING, CheckStatus.RUNNING)
#: A check unfinished this long after it started is given up (its job's time limit is 5 minutes).
STALE_AFTER = timedelta(minutes=10)
#: Checks one person may have under way at once: they go ahead of batches' renders on the ``pdf`` queue.
MAX_UNFINISHED = 3
#: Checks deleted per retention run at most; the next run goes on.
MAX_EXPIRED = 1000
#: Where a check's own files are kept: the .docx uploaded, the sample pages.
_FOLDER = "word-checks/"


@dataclass(frozen=True)
class Place:
    """Where a tag printed: ``page`` from 1, the box as fractions of the page's width and height from its top left."""

    page: int
    left: float
    top: float
    width: float
    height: float


@dataclass(frozen=True)
class Examined:
    """What the check found: the tags in document order, where each printed (by name), each page's size in points,
    each party's colour (in party order) and the sample row the pages show."""

    tags: tuple[Tag, ...]
    places: dict[str, tuple[Place, ...]]
    pages: tuple[tuple[float, float], ...]
    parties: dict[str, str]
    sample: dict[str, str]
    #: The values' places could not be found (their marker render failed): the tags are listed without boxes.
    values_unplaced: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "tags": [{k: v for k, v in asdict(t).items() if v not in ("", None)} for t in self.tags],
            "places": {name: [asdict(p) for p in places] for name, places in self.places.items()},
            "pages": [list(p) for p in self.pages],
            "parties": self.parties,
            "sample": self.sample,
            "values_unplaced": self.values_unplaced,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Examined:
        return cls(
            tags=tuple(Tag(**t) for t in data["tags"]),
            places={name: tuple(Place(**p) for p in places) for name, places in data["places"].items()},
            pages=tuple((float(w), float(h)) for w, h in data["pages"]),
            parties=dict(data["parties"]),
            sample=dict(data["sample"]),
            values_unplaced=bool(data.get("values_unplaced")),
        )


def start_check(
    session: Session,
    *,
    storage: Storage,
    user: User,
    now: datetime,
    template: DocumentTemplate | None = None,
    data: bytes | None = None,
    sample: Mapping[str, object] | None = None,
) -> WordCheck:
    """A check of an uploaded .docx (``data``), or of ``template``'s saved one; its job renders it. TemplateError
    for a file refused at once (empty, too large, a template saved as another kind)."""
    if data is None:
        version = _latest(session, template)
        if version is None or version.kind != "docx" or not version.source_key:
            raise TemplateError(N_("The template has no Word file to check: upload one."))
        key = version.source_key
    else:
        if not data:
            raise TemplateError(N_("The uploaded file is empty."))
        if len(data) > docx_package.MAX_DOCX_BYTES:
            raise TemplateError(
                N_(
                    "The Word file has %(size).1f MB; the limit is %(limit)d MB. Make the images in it smaller.",
                    size=len(data) / 1024 / 1024,
                    limit=docx_package.MAX_DOCX_BYTES // 1024 // 1024,
                )
            )
        key = f"{_FOLDER}{hashlib.sha256(data).hexdigest()}.docx"
        if not storage.exists(key):
            storage.put(key, data, content_type=kinds.KINDS["docx"].content_type)
    _refuse_too_many(session, user=user, now=now)
    check = WordCheck(
        template_id=template.id if template is not None else None,
        source_key=key,
        sample=clean_sample(sample) if sample is not None else {},
        status=CheckStatus.PENDING,
        created_by_id=user.id,
        created_at=now,
    )
    session.add(check)
    session.flush()
    return check


def check_again(
    session: Session, *, check: WordCheck, sample: Mapping[str, object], user: User, now: datetime
) -> WordCheck:
    """The same file checked again with the sample row as edited on the page."""
    _refuse_too_many(session, user=user, now=now)
    again = WordCheck(
        template_id=check.template_id,
        source_key=check.source_key,
        sample=clean_sample(sample),
        status=CheckStatus.PENDING,
        created_by_id=user.id,
        created_at=now,
    )
    session.add(again)
    session.flush()
    return again


def _refuse_too_many(session: Session, *, user: User, now: datetime) -> None:
    """TemplateError once ``user`` has ``MAX_UNFINISHED`` checks under way: they go ahead of batches' renders."""
    under_way = session.scalar(
        select(func.count())
        .select_from(WordCheck)
        .where(
            WordCheck.created_by_id == user.id,
            WordCheck.status.in_(UNFINISHED),
            WordCheck.created_at > now - STALE_AFTER,
        )
    )
    if (under_way or 0) >= MAX_UNFINISHED:
        raise TemplateError(
            N_("%(n)s of your checks are still being printed: wait for them before starting another.", n=under_way)
        )


def expire_checks(session: Session, storage: Storage, *, now: datetime, hours: int) -> int:
    """Delete the checks started ``hours`` before ``now`` or earlier, with the files no later check shares (the
    uploaded .docx, the sample pages and their images: a sample row may hold someone's data); how many. A saved
    template's own file stays."""
    old = session.scalars(
        select(WordCheck).where(WordCheck.created_at <= now - timedelta(hours=hours)).limit(MAX_EXPIRED)
    ).all()
    if not old:
        return 0
    ids = [c.id for c in old]
    others = select(WordCheck).where(WordCheck.id.not_in(ids))
    kept = {
        *session.scalars(others.with_only_columns(WordCheck.source_key)),
        *session.scalars(others.with_only_columns(WordCheck.pdf_key)),
    }
    for check in old:
        pages = len((check.result or {}).get("pages") or ())
        for key in {check.source_key, check.pdf_key} - kept:
            if not key or not key.startswith(_FOLDER):
                continue
            storage.delete(key)
            for page in range(pages):
                for width in pdf_pages.WIDTHS:
                    storage.delete(pdf_pages.page_key(key, page=page, width=width))
    session.execute(delete(WordCheck).where(WordCheck.id.in_(ids)))
    return len(ids)


def get_check(session: Session, *, check_id: int, user: User) -> WordCheck | None:
    """A check of ``user``'s own (nobody else sees it: the file may not be saved anywhere else)."""
    check = session.get(WordCheck, check_id)
    return check if check is not None and check.created_by_id == user.id else None


def run_check(session: Session, *, check_id: int, storage: Storage, now: Callable[[], datetime], timeout: float) -> str:
    """Render the check's file and find its tags (the job's work); its status after. Every refusal of the file ends
    the check failed with the reason in words; a check already done is left as it is."""
    check = session.get(WordCheck, check_id)
    if check is None or check.status not in UNFINISHED:
        return check.status if check is not None else "missing"
    check.status = CheckStatus.RUNNING
    session.commit()
    version = _latest(session, session.get(DocumentTemplate, check.template_id) if check.template_id else None)
    try:
        read = read_file(storage.get(check.source_key), version=version)
        # Kept before printing: a sample a test in the file cannot take is corrected on the page and tried again.
        check.sample = dict(check.sample) or read.default_sample()
        examined, pdf = examine(read, row=check.sample, timeout=timeout)
    except (TemplateError, RenderError, StorageError, UnreadablePdf, poppler.PopplerError) as exc:
        message = exc.message if isinstance(exc, (TemplateError, RenderError)) else N_("The pages could not be read.")
        check.status = CheckStatus.FAILED
        check.error = _stored(message)
    else:
        check.pdf_key = f"{_FOLDER}{hashlib.sha256(pdf).hexdigest()}.pdf"
        if not storage.exists(check.pdf_key):
            storage.put(check.pdf_key, pdf)
        check.result = examined.to_json()
        check.status = CheckStatus.READY
    check.finished_at = now()
    session.commit()
    return check.status


def check_error(check: WordCheck, *, now: datetime) -> N_ | None:
    """Why ``check`` failed, to translate when shown; a check unfinished past ``STALE_AFTER`` failed too (its worker
    was lost, or none takes the queue)."""
    if check.status in UNFINISHED and now - check.created_at > STALE_AFTER:
        return N_("The check did not finish: the server did not print the file in time. Try again in a moment.")
    return N_(check.error["msgid"], **(check.error.get("values") or {})) if check.error else None


@dataclass(frozen=True)
class ReadFile:
    """A file read for the check, before it is printed: its tags, how to fill it with a row and its fields' marks,
    its parties (a saved template's, then each new signature mark's) with their colours, and the saved fields."""

    reader: TagReader
    fill: Callable[[dict[str, Any], Mapping[str, str]], bytes]
    parties: list[str]
    colours: dict[str, str]
    fields: dict[str, tuple[str, str]]

    def default_sample(self) -> dict[str, str]:
        """A made-up value for each column the file uses (those understood as columns: not a mark, not a name
        written another way)."""
        everything = {n: "x" for n in self.reader.names if n not in self.reader.unread}
        tags = classify(self.reader, parties=self.parties, fields=self.fields, sample=everything)
        return sample_row([t.name for t in tags if t.kind == TagKind.VALUE])


def read_file(data: bytes, *, version: TemplateVersion | None) -> ReadFile:
    """``data`` read for the check (TemplateError for a file that cannot be a template); ``version``: the saved
    template whose parties and fields the file belongs to."""
    reader = TagReader()
    fill = docx_templates.patched_filler(data, patch=reader)
    parties = parties_of(reader.names, known=[p.key for p in template_parties(version)] if version else [])
    known_colours = {p.key: p.colour for p in template_parties(version)} if version is not None else {}
    return ReadFile(
        reader=reader,
        fill=fill,
        parties=parties,
        colours=colours(parties, known=known_colours),
        fields={f.column: (f.type, f.role) for f in template_fields(version)} if version is not None else {},
    )


def examine(read: ReadFile, *, row: Mapping[str, str], timeout: float) -> tuple[Examined, bytes]:
    """The tags of a file read and where they print with ``row``, and the sample pages."""
    tags = classify(read.reader, parties=read.parties, fields=read.fields, sample=dict(row))
    fields = {t.name: t.field_type for t in tags if t.kind == TagKind.FIELD}
    printed = {t.name: shown(t.written) if t.kind == TagKind.UNKNOWN else row.get(t.name, "") for t in tags}
    values = {**row, **{t.name: "" for t in tags if t.kind == TagKind.SIGNATURE}, **printed}
    values |= sample_row([t.name for t in tags if t.kind == TagKind.VALUE and not row.get(t.name)])
    pdf = docx_templates.convert(read.fill(values, fields), timeout=timeout)
    pages = poppler.page_words(pdf)
    sizes = tuple((p.width, p.height) for p in pages)
    places = _frame_places(pdf, tags, sizes=sizes)
    unplaced = False
    try:
        places |= _value_places(read.fill, values, tags, fields=fields, timeout=timeout)
    except TemplateError:
        unplaced = True  # a value a filter or test needs as it is (a number, a date): shown without boxes
    examined = Examined(
        tags=tags, places=places, pages=sizes, parties=read.colours, sample=dict(row), values_unplaced=unplaced
    )
    return examined, pdf


def _frame_places(
    pdf: bytes, tags: tuple[Tag, ...], *, sizes: tuple[tuple[float, float], ...]
) -> dict[str, tuple[Place, ...]]:
    """Each signature's and field's frame, found by its colour as sealing finds it."""
    marks = mark_indexes(t.name for t in tags if t.kind == TagKind.SIGNATURE)
    found: dict[str, SignatureBox | None] = {}
    if any(t.kind == TagKind.SIGNATURE for t in tags):
        boxes = find_signature_boxes(pdf, count=max(marks.values()) + 1)
        found |= {name: boxes[index] for name, index in marks.items()}
    fields = {t.name: t.field_type for t in tags if t.kind == TagKind.FIELD}
    by_field = find_field_boxes(pdf, variables=fields)
    found |= {name: by_field.get(field_name(name) or "") for name in fields}
    return {
        name: (_from_bottom(box, sizes),) for name, box in found.items() if box is not None and box.page < len(sizes)
    }


def _from_bottom(box: SignatureBox, sizes: tuple[tuple[float, float], ...]) -> Place:
    width, height = sizes[box.page]
    return Place(box.page + 1, box.x / width, (height - box.y - box.h) / height, box.w / width, box.h / height)


def _value_places(
    fill: Callable[[dict[str, Any], Mapping[str, str]], bytes],
    values: dict[str, Any],
    tags: tuple[Tag, ...],
    *,
    fields: Mapping[str, str],
    timeout: float,
) -> dict[str, tuple[Place, ...]]:
    """Where each value and each tag not understood printed: the file rendered again with each a marker about as
    long as its sample, the markers read back from the PDF's words."""
    printed = [t.name for t in tags if t.kind in (TagKind.VALUE, TagKind.UNKNOWN)]
    if not printed:
        return {}
    markers = {name: _marker(i, len(str(values.get(name, "")))) for i, name in enumerate(printed)}
    pdf = docx_templates.convert(fill({**values, **markers}, fields), timeout=timeout)
    found: dict[str, list[Place]] = {}
    for number, page in enumerate(poppler.page_words(pdf), start=1):
        for word in page.words:
            for name, marker in markers.items():
                start = word.text.find(marker[:6])
                if start < 0:
                    continue
                # Only the marker's share of the word: not the comma or the letters written against it.
                whole = word.text.startswith(marker, start)
                end = start + len(marker) if whole else len(word.text)
                share = (word.x1 - word.x0) / max(len(word.text), 1)
                found.setdefault(name, []).append(
                    Place(
                        number,
                        (word.x0 + share * start) / page.width,
                        word.top / page.height,
                        share * (end - start) / page.width,
                        (word.bottom - word.top) / page.height,
                    )
                )
    return {name: tuple(places) for name, places in found.items()}


def _marker(index: int, length: int) -> str:
    """A word found nowhere else, about ``length`` letters long: the value it stands for takes about its room."""
    head = f"QZ{index:03d}Z"
    return head + "x" * max(0, min(length, 60) - len(head))


def _latest(session: Session, template: DocumentTemplate | None) -> TemplateVersion | None:
    return dt.get_version(session, template_id=template.id) if template is not None else None


def _stored(message: object) -> dict[str, Any]:
    if isinstance(message, N_):
        return {"msgid": message.msgid, "values": {k: str(v) for k, v in message.values.items()}}
    return {"msgid": str(message), "values": {}}

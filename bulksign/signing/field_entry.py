"""What a signer fills in on the signing page: the fields of their role, checked, and saved as they sign."""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import regex
from babel.dates import format_date, get_date_format, parse_date
from babel.numbers import NumberFormatError, format_decimal, get_group_symbol, parse_decimal
from sqlalchemy.orm import Session

from bulksign.core.errors import BulksignError
from bulksign.core.messages import N_
from bulksign.core.typed_text import visible_text
from bulksign.doc_templates.fields import FieldSettings, template_fields
from bulksign.documents.document_pages import DocumentPages
from bulksign.documents.pdf_text import unprintable
from bulksign.documents.signature_box import SignatureBox
from bulksign.documents.storage import Storage, StorageError
from bulksign.models import Document, FieldValue, SigningRequest
from bulksign.signing.attachments import Attachment, AttachmentRefused, Upload, attachment_key, checked_attachment

#: How long a staff-written pattern may take to match one value.
PATTERN_SECONDS = 0.1
#: Longest text a text field takes (a pattern is matched against at most this much).
MAX_TEXT_CHARS = 1000
#: Control characters (but tab and line ends): never printable in a name or a value.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: What a ticked checkbox's input sends, and what a file's column may say for one ticked; the values stored for it.
TICKED = "yes"
TICKED_VALUES = frozenset({TICKED, "true", "1", "x", "on", "да"})
CHECKBOX_VALUES = {True: "true", False: "false"}

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FilledForm:
    """What the signer sent for their fields, and where its files go."""

    #: The form's values by field name (a ticked checkbox sends ``TICKED``).
    typed: Mapping[str, str]
    #: The attachments chosen, by field name.
    files: Mapping[str, Upload]
    attachment_max_bytes: int
    #: The storage backend the request's documents are in.
    storage: Storage | None


#: A sign with nothing filled in (a caller with no form: tests, a request whose signer fills no field).
NOTHING_FILLED = FilledForm(typed={}, files={}, attachment_max_bytes=0, storage=None)


@dataclass(frozen=True)
class Entry:
    """One field's checked value, normalised as ``FieldValue.value`` keeps it (None: an optional field left empty)."""

    name: str
    value: str | None
    attachment: Attachment | None = None


@dataclass(frozen=True)
class CheckedEntries:
    """The form's values when all passed (``entries``), else each wrong field's message (``errors``: name →
    message); never both."""

    entries: tuple[Entry, ...] = ()
    errors: Mapping[str, N_] = field(default_factory=dict)
    #: The wrong fields' labels, in the page's order: what the message at the top names.
    wrong_labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class FieldPlace:
    """Where a field sits on its page image, in percent of the page (from its top-left corner)."""

    page: int
    left: float
    top: float
    width: float
    height: float


@dataclass(frozen=True)
class FieldInput:
    """One field as the signing page shows it: numbered in document order like its marker on the page image."""

    number: int
    settings: FieldSettings
    #: What the input holds: the value typed in a refused try, else the file's prefill (a date as ISO), else empty.
    value: str
    #: The file prefilled it and the template does not let the signer change it.
    locked: bool
    place: FieldPlace | None
    #: What the field takes, in the batch's language: a number's or date's range and how to write it.
    hint: tuple[N_, ...]
    error: N_ | None = None
    #: An attachment chosen in a refused try: its name (a browser never keeps a file across pages).
    chosen_file: str | None = None

    @property
    def max_chars(self) -> int:
        """Longest text the input takes."""
        return MAX_TEXT_CHARS

    @property
    def ticked(self) -> bool:
        """A checkbox shown ticked."""
        return _is_ticked(self.value)


def _is_ticked(raw: str | None) -> bool:
    return (raw or "").strip().lower() in TICKED_VALUES


def party_fields(request: SigningRequest, *, role: str) -> tuple[FieldSettings, ...]:
    """The fields ``role`` fills on ``request``'s document, in document order."""
    version = request.batch.template_version
    return tuple(f for f in template_fields(version) if f.role == role) if version is not None else ()


def _prefill(request: SigningRequest, settings: FieldSettings) -> str:
    return str((request.data or {}).get(settings.column) or "").strip()


def _locked(request: SigningRequest, settings: FieldSettings) -> bool:
    """The file prefilled it and the template does not let the signer change it (a file cannot be prefilled)."""
    return settings.read_only and settings.type != "attachment" and bool(_prefill(request, settings))


def form_fields(
    request: SigningRequest,
    *,
    role: str,
    document: Document | None,
    pages: DocumentPages | None,
    typed: Mapping[str, str] | None = None,
    chosen: Mapping[str, str] | None = None,
    errors: Mapping[str, N_] | None = None,
) -> tuple[FieldInput, ...]:
    """The fields ``role`` fills, as the page shows them: ``typed`` (a refused try's values, by name) over the
    prefills, each placed on its page image by ``document``'s ``field_boxes`` and ``pages``' sizes."""
    language = request.batch.language or "en"
    boxes = (document.field_boxes or {}) if document is not None else {}
    shown = []
    for number, settings in enumerate(party_fields(request, role=role), start=1):
        locked = _locked(request, settings)
        if typed is not None and not locked:
            value = typed.get(settings.name, "")
        else:
            value = _prefill(request, settings)
            parsed = _date(value, language) if settings.type == "date" else None
            value = parsed.isoformat() if parsed is not None else value  # what <input type=date> takes
        shown.append(
            FieldInput(
                number=number,
                settings=settings,
                value=value,
                locked=locked,
                place=_place(boxes.get(settings.name), pages),
                hint=_hint(settings, language),
                error=(errors or {}).get(settings.name),
                chosen_file=(chosen or {}).get(settings.name),
            )
        )
    return tuple(shown)


def _place(box: dict[str, Any] | None, pages: DocumentPages | None) -> FieldPlace | None:
    found = SignatureBox.from_json(box)
    if found is None or pages is None or found.page >= len(pages.pages):
        return None
    page = pages.pages[found.page]
    return FieldPlace(
        page=page.number,
        left=round(100 * found.x / page.width_pt, 2),
        top=round(100 * (page.height_pt - found.y - found.h) / page.height_pt, 2),
        width=round(100 * found.w / page.width_pt, 2),
        height=round(100 * found.h / page.height_pt, 2),
    )


def _number_text(value: float | str, language: str) -> str:
    return format_decimal(Decimal(str(value)), locale=language)


def _date_text(value: float | str, language: str) -> str:
    # As the page's other dates read (``localtime.batch_time``): "31 January 2027", "31 января 2027".
    return format_date(dt.date.fromisoformat(str(value)), "d MMMM y", locale=language)


def _hint(settings: FieldSettings, language: str) -> tuple[N_, ...]:
    """What the field takes, for the line under its input (nothing when the input says it all)."""
    low, high = settings.minimum, settings.maximum
    if settings.type == "number":
        show = _number_text
        parts = [N_("Write a number, e.g. %(example)s.", example=format_decimal(Decimal("1234.5"), locale=language))]
    elif settings.type == "date":
        show, parts = _date_text, []
    elif settings.type == "attachment":
        return (N_("A PDF, JPEG or PNG file."),)
    else:
        return ()
    if low is not None and high is not None:
        parts.append(N_("From %(low)s to %(high)s.", low=show(low, language), high=show(high, language)))
    elif low is not None:
        parts.append(N_("At least %(low)s.", low=show(low, language)))
    elif high is not None:
        parts.append(N_("At most %(high)s.", high=show(high, language)))
    return tuple(parts)


def check_entries(request: SigningRequest, *, role: str, filled: FilledForm) -> CheckedEntries:
    """Check every field ``role`` fills on ``request`` against what was ``filled``. A read-only prefilled field
    takes its prefill whatever was sent."""
    language = request.batch.language or "en"
    entries, errors, labels = [], {}, []
    for settings in party_fields(request, role=role):
        try:
            if _locked(request, settings):
                entries.append(_prefilled(settings, _prefill(request, settings), language))
            elif settings.type == "attachment":
                entries.append(_attachment(settings, filled.files.get(settings.name), filled.attachment_max_bytes))
            else:
                value = _value(settings, filled.typed.get(settings.name), language)
                entries.append(Entry(name=settings.name, value=value))
        except _Refused as refused:
            errors[settings.name] = refused.message
            labels.append(settings.shown_label)
    if errors:
        return CheckedEntries(errors=errors, wrong_labels=tuple(labels))
    return CheckedEntries(entries=tuple(entries))


class _Refused(BulksignError):
    """A field's value to correct; ``message`` says how."""

    message: N_

    def __init__(self, message: N_):
        super().__init__(message)


def _prefilled(settings: FieldSettings, prefill: str, language: str) -> Entry:
    """A read-only prefill: normalised when it passes the field's checks; else kept as the file gave it (the
    sender's value, not the signer's to correct), without invisible characters."""
    try:
        return Entry(name=settings.name, value=_value(settings, prefill, language))
    except _Refused:
        return Entry(name=settings.name, value=visible_text(prefill))


def _value(settings: FieldSettings, raw: str | None, language: str) -> str | None:
    """The normalised value of a field that is not an attachment; _Refused says what is wrong."""
    label = settings.shown_label
    if settings.type == "checkbox":
        ticked = _is_ticked(raw)
        if settings.required and not ticked:
            raise _Refused(N_("Tick “%(label)s” to sign.", label=label))
        return CHECKBOX_VALUES[ticked]
    text = visible_text(CONTROL_CHARACTERS.sub("", raw or ""))
    if not text:
        if settings.required:
            raise _Refused(N_("Fill in “%(label)s”: it is required.", label=label))
        return None
    checks = {"text": _text, "number": _number, "date": _date_value, "choice": _choice}
    return checks[settings.type](settings, text, language)


def _text(settings: FieldSettings, text: str, language: str) -> str:
    if missing := unprintable(text):  # the signed PDF would show empty boxes for them
        raise _Refused(
            N_(
                "“%(label)s” has characters the signed document cannot print: %(chars)s. Write it without them.",
                label=settings.shown_label,
                chars=" ".join(missing[:10]),
            )
        )
    if len(text) > MAX_TEXT_CHARS:
        raise _Refused(
            N_(
                "“%(label)s” is too long (at most %(count)s characters).",
                label=settings.shown_label,
                count=MAX_TEXT_CHARS,
            )
        )
    if settings.pattern and not _matches(settings.pattern, text):
        raise _Refused(N_("“%(label)s” is not in the expected form.", label=settings.shown_label))
    return text


def _matches(pattern: str, text: str) -> bool:
    """Whether ``text`` matches staff's ``pattern`` whole. A pattern that backtracks without end ("(a+)+$") is cut
    off after ``PATTERN_SECONDS`` and counts as no match, so one template cannot hold a web worker; staff hear of
    it in the log."""
    try:
        return regex.fullmatch(pattern, text, timeout=PATTERN_SECONDS) is not None
    except TimeoutError:
        logger.warning("field pattern timed out", extra={"pattern": pattern, "length": len(text)})
        return False


def _number(settings: FieldSettings, text: str, language: str) -> str:
    # A typed space groups digits as well as the locale's own (a no-break space in Russian and French).
    digits = re.sub(r"\s", "", text) if get_group_symbol(locale=language).isspace() else text
    try:
        number = parse_decimal(digits, locale=language, strict=True)
    except NumberFormatError:
        number = None
    if number is None or not number.is_finite():
        raise _Refused(
            N_(
                "“%(value)s” is not a number. Write it like %(example)s.",
                value=text[:40],
                example=format_decimal(Decimal("1234.5"), locale=language),
            )
        )
    low, high = settings.minimum, settings.maximum
    if (low is not None and number < Decimal(str(low))) or (high is not None and number > Decimal(str(high))):
        raise _Refused(_out_of_range(settings, _number_text, language))
    canonical = format(number.normalize(), "f")
    return canonical if "." not in canonical else canonical.rstrip("0").rstrip(".")


def _date(text: str, language: str) -> dt.date | None:
    """A date written as ISO (``<input type=date>``) or in the language's short format; None when it is not one."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        pass
    try:
        return parse_date(text, locale=language, format="short")
    except (ValueError, IndexError):  # Babel's ParseError is a ValueError; a short string can index past its end
        return None


def _date_value(settings: FieldSettings, text: str, language: str) -> str:
    found = _date(text, language)
    if found is None:
        raise _Refused(
            N_(
                "“%(value)s” is not a date. Write it like %(example)s.",
                value=text[:40],
                example=format_date(
                    dt.date(2027, 1, 31), get_date_format("short", locale=language).pattern, locale=language
                ),
            )
        )
    low, high = settings.minimum, settings.maximum
    if (low is not None and found.isoformat() < str(low)) or (high is not None and found.isoformat() > str(high)):
        raise _Refused(_out_of_range(settings, _date_text, language))
    return found.isoformat()


def _out_of_range(settings: FieldSettings, show: Callable[[float | str, str], str], language: str) -> N_:
    label, low, high = settings.shown_label, settings.minimum, settings.maximum
    if low is not None and high is not None:
        return N_(
            "“%(label)s” must be from %(low)s to %(high)s.",
            label=label,
            low=show(low, language),
            high=show(high, language),
        )
    if low is not None:
        return N_("“%(label)s” must be at least %(low)s.", label=label, low=show(low, language))
    assert high is not None  # the value crossed a bound: at least one is set
    return N_("“%(label)s” must be at most %(high)s.", label=label, high=show(high, language))


def _choice(settings: FieldSettings, text: str, language: str) -> str:
    if text not in settings.options:
        raise _Refused(N_("Choose one of the options for “%(label)s”.", label=settings.shown_label))
    return text


def _attachment(settings: FieldSettings, upload: Upload | None, max_bytes: int) -> Entry:
    """A chosen file that is what it says (``attachments.checked_attachment``)."""
    label = settings.shown_label
    if upload is None or not upload.data:
        if settings.required:
            raise _Refused(N_("Choose a file for “%(label)s”: it is required.", label=label))
        return Entry(name=settings.name, value=None)
    try:
        found = checked_attachment(upload, label=label, field=settings.name, max_bytes=max_bytes)
    except AttachmentRefused as refused:
        raise _Refused(refused.message) from None
    return Entry(name=settings.name, value=found.filename, attachment=found)


def save_entries(
    session: Session,
    *,
    request: SigningRequest,
    role: str,
    entries: tuple[Entry, ...],
    storage: Storage | None,
    now: dt.datetime,
    ip: str | None,
) -> None:
    """One ``FieldValue`` per entry, given by ``role`` now; an attachment's bytes stored first. The caller commits,
    in the transaction of the sign that won (a file of a transaction that then fails is written over by the next)."""
    for entry in entries:
        attachment, key = entry.attachment, None
        if attachment is not None:
            key = attachment_key(request, name=entry.name, content_type=attachment.content_type)
            if storage is None:
                raise StorageError("no storage to keep an attachment in")
            storage.put(key, attachment.data, content_type=attachment.content_type)
        session.add(
            FieldValue(
                request_id=request.id,
                batch_id=request.batch_id,
                name=entry.name,
                role=role,
                value=entry.value,
                storage_key=key,
                content_type=attachment.content_type if attachment else None,
                size=len(attachment.data) if attachment else None,
                sha256=attachment.sha256 if attachment else None,
                original_sha256=attachment.original_sha256 if attachment else None,
                entered_at=now,
                entered_ip=(ip or "")[:64] or None,
            )
        )

"""What a signer fills in on the signing page: the fields of their role, checked, and saved as they sign."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from babel.numbers import format_decimal
from sqlalchemy import select
from sqlalchemy.orm import Session

from bulksign.core.localtime import zone_of
from bulksign.core.messages import N_
from bulksign.core.typed_text import visible_text
from bulksign.doc_templates.field_conditions import Conditioned, FieldCondition, applying, condition_words
from bulksign.doc_templates.fields import SIGNED_TYPES, FieldSettings, template_fields
from bulksign.documents.document_pages import DocumentPages
from bulksign.documents.signature_box import SignatureBox
from bulksign.documents.storage import Storage, StorageError
from bulksign.models import Document, FieldValue, SigningRequest
from bulksign.signing.attachments import Attachment, AttachmentRefused, Upload, attachment_key, checked_attachment
from bulksign.signing.field_checks import (
    CHECKBOX_VALUES,
    MAX_TEXT_CHARS,
    Refused,
    checked_value,
    date_text,
    is_ticked,
    number_text,
    typed_date,
)


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
    #: Shown only when this condition on another of the signer's fields holds (the page follows it as they type).
    when: FieldCondition | None = None
    #: The condition in words, for the line under the input (a page without scripts shows every field).
    when_words: N_ | None = None

    @property
    def max_chars(self) -> int:
        """Longest text the input takes."""
        return MAX_TEXT_CHARS

    @property
    def ticked(self) -> bool:
        """A checkbox shown ticked."""
        return is_ticked(self.value)


def party_fields(request: SigningRequest, *, role: str) -> tuple[FieldSettings, ...]:
    """The fields ``role`` fills on ``request``'s document, in document order (not those filled in for them when
    they sign: ``signed_entries``)."""
    return tuple(f for f in _all_fields(request) if f.role == role and f.type not in SIGNED_TYPES)


def signed_entries(request: SigningRequest, *, role: str, signer_name: str, now: dt.datetime) -> tuple[Entry, ...]:
    """The values of ``role``'s "date signed" and "signer's name" fields as they sign ``now`` with ``signer_name``:
    the day in the batch's time zone (printed in its language, as any date is), and the name."""
    day = now.astimezone(zone_of(request.batch)).date().isoformat()
    return tuple(
        Entry(name=f.name, value=day if f.type == "signed_date" else signer_name)
        for f in _all_fields(request)
        if f.role == role and f.type in SIGNED_TYPES
    )


def _all_fields(request: SigningRequest) -> tuple[FieldSettings, ...]:
    version = request.batch.template_version
    return template_fields(version) if version is not None else ()


def earlier_values(session: Session, *, request_id: int) -> dict[str, str | None]:
    """The values the request's parties gave so far, by field name: what a condition on an earlier party's field
    looks at."""
    rows = session.execute(select(FieldValue.name, FieldValue.value).where(FieldValue.request_id == request_id))
    return {name: value for name, value in rows}


def _applying(
    request: SigningRequest,
    *,
    role: str,
    own: Callable[[FieldSettings], str | None] | None,
    earlier: Mapping[str, str | None],
) -> frozenset[str]:
    """The fields of ``request`` that apply (``field_conditions.applying``): ``own`` gives the value of each of
    ``role``'s fields as the signer sent it; None (the page before it is sent): a condition on one of them is left to
    the page, which follows it as they type, and holds here."""
    fields = _all_fields(request)
    by_name = {f.name: f for f in fields}

    def live_own(field: FieldSettings) -> bool:
        condition = field.condition
        return condition is not None and condition.live and getattr(by_name.get(condition.source), "role", "") == role

    def field_value(name: str) -> str | None:
        field = by_name[name]
        value = own(field) if own is not None and field.role == role else earlier.get(name)
        return None if field.type == "checkbox" and value != CHECKBOX_VALUES[True] else value

    conditioned = [
        Conditioned(name=f.name, role=f.role, condition=None) if own is None and live_own(f) else f.conditioned
        for f in fields
    ]
    return applying(
        conditioned, field_value=field_value, column_value=lambda column: str((request.data or {}).get(column) or "")
    )


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
    earlier: Mapping[str, str | None] | None = None,
) -> tuple[FieldInput, ...]:
    """The fields ``role`` fills, as the page shows them: ``typed`` (a refused try's values, by name) over the
    prefills, each placed on its page image by ``document``'s ``field_boxes`` and ``pages``' sizes. A field whose
    condition looks at a column or an ``earlier`` party's value is left out when it does not hold; one whose
    condition looks at the signer's own fields carries it (``when``) for the page to follow."""
    language = request.batch.language or "en"
    boxes = (document.field_boxes or {}) if document is not None else {}
    applies = _applying(request, role=role, own=None, earlier=earlier or {})
    own = {f.name: f for f in party_fields(request, role=role)}
    shown = []
    for number, settings in enumerate(own.values(), start=1):
        if settings.name not in applies:
            continue
        condition = settings.condition
        when = condition if condition is not None and condition.live and condition.source in own else None
        locked = _locked(request, settings)
        if typed is not None and not locked:
            value = typed.get(settings.name, "")
        else:
            value = _prefill(request, settings)
            parsed = typed_date(value, language) if settings.type == "date" else None
            value = parsed.isoformat() if parsed is not None else value  # what <input type=date> takes
        shown.append(
            FieldInput(
                number=number,
                settings=settings,
                value=value,
                locked=locked,
                place=page_place(boxes.get(settings.name), pages),
                hint=_hint(settings, language),
                error=(errors or {}).get(settings.name),
                chosen_file=(chosen or {}).get(settings.name),
                when=when,
                when_words=condition_words(when, source=own[when.source].shown_label) if when is not None else None,
            )
        )
    return tuple(shown)


def page_place(box: dict[str, Any] | None, pages: DocumentPages | None) -> FieldPlace | None:
    """Where a box stored as ``SignatureBox.to_json`` sits on its page image; None when it is on no page shown."""
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


def _hint(settings: FieldSettings, language: str) -> tuple[N_, ...]:
    """What the field takes, for the line under its input (nothing when the input says it all)."""
    low, high = settings.minimum, settings.maximum
    if settings.type == "number":
        show = number_text
        parts = [N_("Write a number, e.g. %(example)s.", example=format_decimal(Decimal("1234.5"), locale=language))]
    elif settings.type == "date":
        show, parts = date_text, []
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


def check_entries(
    request: SigningRequest, *, role: str, filled: FilledForm, earlier: Mapping[str, str | None] | None = None
) -> CheckedEntries:
    """Check every field ``role`` fills on ``request`` against what was ``filled``. A read-only prefilled field
    takes its prefill whatever was sent. A field whose condition does not hold (on what was sent, a column, or an
    ``earlier`` party's value) is not asked for and what was sent for it is dropped: it gets no entry."""
    language = request.batch.language or "en"
    applies = _applying(
        request, role=role, own=lambda f: _sent_value(request, f, filled, language), earlier=earlier or {}
    )
    entries, errors, labels = [], {}, []
    for settings in party_fields(request, role=role):
        if settings.name not in applies:
            continue
        try:
            if _locked(request, settings):
                entries.append(_prefilled(settings, _prefill(request, settings), language))
            elif settings.type == "attachment":
                entries.append(_attachment(settings, filled.files.get(settings.name), filled.attachment_max_bytes))
            else:
                value = checked_value(settings, filled.typed.get(settings.name), language)
                entries.append(Entry(name=settings.name, value=value))
        except Refused as refused:
            errors[settings.name] = refused.message
            labels.append(settings.shown_label)
    if errors:
        return CheckedEntries(errors=errors, wrong_labels=tuple(labels))
    return CheckedEntries(entries=tuple(entries))


def _sent_value(request: SigningRequest, settings: FieldSettings, filled: FilledForm, language: str) -> str | None:
    """A field's value as a condition reads it: normalised as it would be stored, an attachment's file name; None
    when empty or not a value of its type (the field's own check then says so)."""
    if _locked(request, settings):
        return _prefill(request, settings) or None
    if settings.type == "attachment":
        upload = filled.files.get(settings.name)
        return (upload.filename or settings.name) if upload is not None and upload.data else None
    try:
        return checked_value(dataclasses.replace(settings, required=False), filled.typed.get(settings.name), language)
    except Refused:
        return None


def _prefilled(settings: FieldSettings, prefill: str, language: str) -> Entry:
    """A read-only prefill: normalised when it passes the field's checks; else kept as the file gave it (the
    sender's value, not the signer's to correct), without invisible characters."""
    try:
        return Entry(name=settings.name, value=checked_value(settings, prefill, language))
    except Refused:
        return Entry(name=settings.name, value=visible_text(prefill))


def _attachment(settings: FieldSettings, upload: Upload | None, max_bytes: int) -> Entry:
    """A chosen file that is what it says (``attachments.checked_attachment``)."""
    label = settings.shown_label
    if upload is None or not upload.data:
        if settings.required:
            raise Refused(N_("Choose a file for “%(label)s”: it is required.", label=label))
        return Entry(name=settings.name, value=None)
    try:
        found = checked_attachment(upload, label=label, field=settings.name, max_bytes=max_bytes)
    except AttachmentRefused as refused:
        raise Refused(refused.message) from None
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

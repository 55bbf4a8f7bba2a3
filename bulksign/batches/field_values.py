"""What signers filled in, as staff and machines read it: each request's values labelled by its fields, in
document order, and its attachments; values go out as stored, formatted for people elsewhere."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.orm import Session, load_only

from bulksign.core.messages import N_
from bulksign.core.slicing import slices
from bulksign.doc_templates.fields import FieldSettings, attachment_filename, shown_value, template_fields
from bulksign.models import Batch, SigningRequest, TemplateVersion
from bulksign.models.fields import FieldValue

ATTACHMENT = "attachment"


@dataclass(frozen=True)
class GivenValue:
    """One field a request's signer filled, as staff see it."""

    name: str
    label: str
    type: str
    #: The party's role that gave it.
    role: str
    #: As stored (normalised by type); None for an optional field left empty.
    value: str | None
    #: As a person reads it, in the batch's language ("" when left empty; a checkbox's words translated when shown).
    shown: N_ | str
    entered_at: datetime
    #: An attachment's checked type, size (bytes) and sha256; None for every other type.
    content_type: str | None = None
    size: int | None = None
    sha256: str | None = None
    #: Whether an attachment's file is in storage (not once its request was purged).
    stored: bool = False

    @property
    def is_attachment(self) -> bool:
        return self.type == ATTACHMENT


@dataclass(frozen=True)
class StoredAttachment:
    """An attachment's file in storage, with what a download or an archive needs of it."""

    request_id: int
    name: str
    #: The name the signer's file had.
    filename: str
    storage_key: str
    content_type: str


def safe_name(text: str, limit: int = 100) -> str:
    """``text`` as a part of a file name in an archive: letters, digits and ``@._-``, anything else ``_``."""
    return "".join(c if c.isalnum() or c in "@._-" else "_" for c in text)[:limit]


@dataclass(frozen=True)
class BatchFields:
    """The fields of a batch's template version, in document order, and the language its values are written in."""

    fields: tuple[FieldSettings, ...]
    language: str


def batch_fields(session: Session, *, batch_id: int) -> BatchFields:
    """The batch's fields (none for a template without any) and language, in one query."""
    # Only the fields' settings of the version: the table's page and its poll read them, not its document.
    found = session.execute(
        select(TemplateVersion, Batch.language)
        .join(Batch, Batch.template_version_id == TemplateVersion.id)
        .where(Batch.id == batch_id)
        .options(load_only(TemplateVersion.fields))
    ).first()
    if found is None:
        return BatchFields(fields=(), language="en")
    version, language = found
    return BatchFields(fields=template_fields(version), language=language or "en")


@dataclass(frozen=True)
class StoredValue:
    """A ``FieldValue`` as it is given out; an attachment's ``value`` is the name it goes out under
    (``fields.attachment_filename``: named by its checked type, whatever name it was kept with)."""

    request_id: int
    name: str
    role: str
    value: str | None
    storage_key: str | None
    content_type: str | None
    size: int | None
    sha256: str | None
    original_sha256: str | None
    entered_at: datetime


#: What is read of a value: plain rows, so an export's progress commits expire nothing that is read again.
_VALUE_COLUMNS = (
    FieldValue.request_id,
    FieldValue.name,
    FieldValue.role,
    FieldValue.value,
    FieldValue.storage_key,
    FieldValue.content_type,
    FieldValue.size,
    FieldValue.sha256,
    FieldValue.original_sha256,
    FieldValue.entered_at,
)


def _value(row: Row[Any]) -> StoredValue:
    value = row.value
    if row.content_type is not None:
        value = attachment_filename(value, content_type=row.content_type, field=row.name)
    return StoredValue(**{**row._asdict(), "value": value})


def stored_values(session: Session, *, request_ids: Iterable[int]) -> dict[int, dict[str, StoredValue]]:
    """Each request's values by field name, requests without any left out."""
    found: dict[int, dict[str, StoredValue]] = {}
    for part in slices(sorted(set(request_ids))):
        rows = session.execute(
            select(*_VALUE_COLUMNS)
            .where(FieldValue.request_id.in_(part))
            .order_by(FieldValue.request_id, FieldValue.name)
        )
        for row in rows:
            found.setdefault(row.request_id, {})[row.name] = _value(row)
    return found


def values_by_name(session: Session, request_ids: Iterable[int]) -> dict[int, dict[str, str | None]]:
    """Each request's values by field name as machines are given them (an attachment's by the name it goes out
    under), requests without any left out: what a ``request.signed`` webhook carries."""
    return {
        request_id: {name: value.value for name, value in values.items()}
        for request_id, values in stored_values(session, request_ids=request_ids).items()
    }


def given_values(
    session: Session,
    *,
    batch_id: int,
    request_ids: Iterable[int],
    fields: BatchFields | None = None,
    language: str | None = None,
) -> dict[int, tuple[GivenValue, ...]]:
    """Each request's filled fields, in the template's order (a value for a field the version no longer has, last),
    labelled and formatted in ``language`` (staff pages: the reader's; default: the batch's) (``fields``: the
    batch's, when the caller has read them); requests without values left out."""
    by_request = stored_values(session, request_ids=request_ids)
    if not by_request:
        return {}
    fields = fields if fields is not None else batch_fields(session, batch_id=batch_id)
    order = {f.name: i for i, f in enumerate(fields.fields)}
    settings = {f.name: f for f in fields.fields}
    return {
        request_id: tuple(
            _given(settings.get(name) or FieldSettings(name=name), rows[name], language or fields.language)
            for name in sorted(rows, key=lambda n: (order.get(n, len(order)), n))
        )
        for request_id, rows in by_request.items()
    }


def _given(field: FieldSettings, row: StoredValue, language: str) -> GivenValue:
    return GivenValue(
        name=row.name,
        label=field.shown_label,
        type=field.type,
        role=row.role,
        value=row.value,
        shown=shown_value(field, row.value, language=language),
        entered_at=row.entered_at,
        content_type=row.content_type,
        size=row.size,
        sha256=row.sha256,
        stored=row.storage_key is not None,
    )


def request_values(
    session: Session, *, batch_id: int, request_id: int, language: str | None = None
) -> tuple[GivenValue, ...]:
    """One request's filled fields (``given_values``)."""
    return given_values(session, batch_id=batch_id, request_ids=[request_id], language=language).get(request_id, ())


def stored_attachments(session: Session, *, request_ids: Iterable[int]) -> dict[int, tuple[StoredAttachment, ...]]:
    """Each request's attachments still in storage, by field name (requests without any left out)."""
    return {
        request_id: found
        for request_id, values in stored_values(session, request_ids=request_ids).items()
        if (found := tuple(_stored(row, row.storage_key) for row in values.values() if row.storage_key is not None))
    }


def _stored(row: StoredValue, storage_key: str) -> StoredAttachment:
    return StoredAttachment(
        request_id=row.request_id,
        name=row.name,
        filename=row.value or row.name,
        storage_key=storage_key,
        content_type=row.content_type or "application/octet-stream",
    )


def attachment_of(session: Session, *, batch_id: int, request_id: int, name: str) -> StoredAttachment | None:
    """The attachment ``name`` of a request of the batch, while its file is kept; None otherwise (the caller has
    already checked that the user sees the batch: ``people.access``)."""
    row = session.execute(
        select(*_VALUE_COLUMNS)
        .join(SigningRequest, SigningRequest.id == FieldValue.request_id)
        .where(
            FieldValue.request_id == request_id,
            FieldValue.batch_id == batch_id,
            SigningRequest.batch_id == batch_id,
            SigningRequest.purged_at.is_(None),
            FieldValue.name == name,
            FieldValue.storage_key.is_not(None),
        )
    ).first()
    value = _value(row) if row is not None else None
    return _stored(value, value.storage_key) if value is not None and value.storage_key is not None else None

"""What signers filled in: one row per field of a request, written when its party signs.
More in docs/architecture/models.md."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bulksign.core.extensions import db
from bulksign.models.base import BigId, Model, UTCDateTime, utcnow


class FieldValue(Model):
    __tablename__ = "field_values"
    __table_args__ = (UniqueConstraint("request_id", "name"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    request_id: Mapped[int] = mapped_column(BigId, db.ForeignKey("signing_requests.id", ondelete="CASCADE"))
    #: For the batch's exports and retention, without a join through the requests.
    batch_id: Mapped[int] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"), index=True)
    #: The field's name: ``iban`` for the mark ``{{ field_iban }}``.
    name: Mapped[str] = mapped_column(db.String(64))
    #: The role of the party that gave it (``recipient`` or a ``signature_<role>`` role).
    role: Mapped[str] = mapped_column(db.String(40))
    #: As the signer gave it, normalised by its type: text as typed, a number and a date in their canonical form
    #: (``1234.5``, ``2027-01-31``), ``true``/``false`` for a checkbox, the option chosen, an attachment's file name.
    #: None: an optional field left empty.
    value: Mapped[str | None] = mapped_column(db.Text)
    #: An attachment's bytes in storage, and what they were found to be; None for every other type.
    storage_key: Mapped[str | None] = mapped_column(db.String(500))
    content_type: Mapped[str | None] = mapped_column(db.String(100))
    size: Mapped[int | None] = mapped_column(BigInteger)
    sha256: Mapped[str | None] = mapped_column(db.String(64))
    #: An attachment's sha256 as the signer gave it, when active content was taken out of it before it was stored
    #: (``sha256`` is then the stored file's); None when it is stored as given.
    original_sha256: Mapped[str | None] = mapped_column(db.String(64))
    #: When and from where it was given (the audit certificate prints both with the party).
    entered_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    entered_ip: Mapped[str | None] = mapped_column(db.String(64))

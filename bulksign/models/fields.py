"""What signers filled in (issue 30): one row per field of a request, written when its party signs.

The settings of each field (type, label, checks, the role that fills it) are the template version's
(``TemplateVersion.fields``); a row here is a value given for one of them. An attachment's bytes live in the
storage backend under ``storage_key``, like a document's; its row keeps the name the signer's file had, its
checked content type, size and sha256 (the audit certificate prints the hash).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bulksign.core.extensions import db
from bulksign.models.base import BigId, UTCDateTime, utcnow


class FieldValue(db.Model):
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
    #: When and from where it was given (the audit certificate prints both with the party).
    entered_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    entered_ip: Mapped[str | None] = mapped_column(db.String(64))

"""Corrections of a request before it is complete (new row values, names or addresses, with a note): each one makes
a new version of the document; the links of the version it replaced are kept by hash so they can say so.
More in docs/architecture/models.md."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import JSON, Index, text
from sqlalchemy.orm import Mapped, mapped_column

from bulksign.core.extensions import db
from bulksign.models.base import BigId, Model, UTCDateTime
from bulksign.models.people import HeldForApproval


class CorrectionStatus(StrEnum):
    """Where a correction stands."""

    #: Held for a manager of the team or an admin (a team that requires approval).
    PENDING = "pending"
    #: Made: the request went back to be rendered as a new version.
    APPLIED = "applied"
    REJECTED = "rejected"
    #: The request moved on before the correction could be made (signed by all, cancelled) or a newer one replaced it.
    WITHDRAWN = "withdrawn"


C = CorrectionStatus

#: Every legal move; a decided correction stays as it was decided.
CORRECTION_TRANSITIONS: dict[CorrectionStatus, frozenset[CorrectionStatus]] = {
    C.PENDING: frozenset({C.APPLIED, C.REJECTED, C.WITHDRAWN}),
    C.APPLIED: frozenset(),
    C.REJECTED: frozenset(),
    C.WITHDRAWN: frozenset(),
}


class Correction(HeldForApproval, Model):
    __tablename__ = "corrections"
    __table_args__ = (
        Index("ix_corrections_request_status", "request_id", "status"),
        Index("ix_corrections_batch_status", "batch_id", "status"),
        # At most one correction of a request waits: asking again replaces it.
        Index(
            "uq_corrections_one_pending",
            "request_id",
            unique=True,
            postgresql_where=text("status = 'pending'"),
            sqlite_where=text("status = 'pending'"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    request_id: Mapped[int] = mapped_column(BigId, db.ForeignKey("signing_requests.id", ondelete="CASCADE"))
    batch_id: Mapped[int] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"))
    #: What changes: ``{"values": {column: [old, new]}, "name": [old, new], "emails": {role: [old, new]}}``
    #: (emptied by the purge).
    changes: Mapped[dict] = mapped_column(JSON, default=dict)
    #: Why, in the asker's words: every party is told it.
    note: Mapped[str] = mapped_column(db.Text, default="")
    #: A ``CorrectionStatus``; moved only by ``batches.corrections``.
    status: Mapped[str] = mapped_column(db.String(10), default=C.PENDING.value)
    #: The document version it made (set when applied).
    version: Mapped[int | None] = mapped_column()


class ReplacedLink(Model):
    """A signing link a correction replaced, by its token's hash: opening it says a newer version exists."""

    __tablename__ = "replaced_links"

    token_hash: Mapped[str] = mapped_column(db.String(64), primary_key=True)
    request_id: Mapped[int] = mapped_column(BigId, db.ForeignKey("signing_requests.id", ondelete="CASCADE"), index=True)
    #: The version the link showed.
    version: Mapped[int] = mapped_column()
    replaced_at: Mapped[datetime] = mapped_column(UTCDateTime)

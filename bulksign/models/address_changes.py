"""A change of where a request's document goes, asked after its batch left approval in a team that requires
approval: held until a manager of the team or an admin who did not ask for it decides (``batches.address_approval``).
More in docs/architecture/models.md."""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy import Index, text
from sqlalchemy.orm import Mapped, mapped_column

from bulksign.core.extensions import db
from bulksign.models.base import BigId, Model
from bulksign.models.people import HeldForApproval


class AddressChangeStatus(StrEnum):
    """Where a held address change stands."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    #: Replaced by a newer change of the same party's address, or taken back by asking for the current address.
    WITHDRAWN = "withdrawn"


A = AddressChangeStatus

#: Every legal move; a decided change stays as it was decided.
ADDRESS_CHANGE_TRANSITIONS: dict[AddressChangeStatus, frozenset[AddressChangeStatus]] = {
    A.PENDING: frozenset({A.APPROVED, A.REJECTED, A.WITHDRAWN}),
    A.APPROVED: frozenset(),
    A.REJECTED: frozenset(),
    A.WITHDRAWN: frozenset(),
}


class AddressChange(HeldForApproval, Model):
    __tablename__ = "address_changes"
    __table_args__ = (
        # The batch page's and the API's changes waiting for a decision; a request's panel.
        Index("ix_address_changes_batch_status", "batch_id", "status"),
        Index("ix_address_changes_request_status", "request_id", "status"),
        # At most one change of a party's address waits: asking again replaces it.
        Index(
            "uq_address_changes_one_pending",
            "request_id",
            "role",
            unique=True,
            postgresql_where=text("status = 'pending'"),
            sqlite_where=text("status = 'pending'"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    request_id: Mapped[int] = mapped_column(BigId, db.ForeignKey("signing_requests.id", ondelete="CASCADE"))
    batch_id: Mapped[int] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"))
    #: The party whose address it is: ``recipient`` (the request's own) or another role.
    role: Mapped[str] = mapped_column(db.String(40))
    #: The address when it was asked, and the one asked for (both emptied by the purge).
    old_email: Mapped[str] = mapped_column(db.String(254))
    new_email: Mapped[str] = mapped_column(db.String(254))
    #: Why, in the asker's words, for the approver.
    note: Mapped[str | None] = mapped_column(db.Text)
    #: An ``AddressChangeStatus``; moved only by ``batches.address_changes.move_change``.
    status: Mapped[str] = mapped_column(db.String(10), default=A.PENDING.value)

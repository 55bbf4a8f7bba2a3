"""A countersigner's digest link and the runs that sign many documents at once.
More in docs/architecture/models.md."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from bulksign.core.extensions import db
from bulksign.models.base import BigId, Model, UTCDateTime, utcnow
from bulksign.models.batches import Batch


class CountersignLink(Model):
    __tablename__ = "countersign_links"
    __table_args__ = (UniqueConstraint("batch_id", "email"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    batch_id: Mapped[int] = mapped_column(db.ForeignKey("batches.id", ondelete="CASCADE"))
    #: The countersigner's address, lower-cased (parties match it by ``lower(email)``).
    email: Mapped[str] = mapped_column(db.String(254))
    #: sha256 hex of the link's token and the nonce it is derived from (``tokens.signing_token``), so a retried
    #: digest mails the same link and a copy of the database alone cannot open it.
    token_hash: Mapped[str] = mapped_column(db.String(64), unique=True)
    token_nonce: Mapped[str] = mapped_column(db.String(64))
    #: Digests queued so far (each one's Message-ID is derived from its number) and when the last one was.
    digest_count: Mapped[int] = mapped_column(default=0)
    last_digest_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    batch: Mapped[Batch] = relationship()


class CountersignRun(Model):
    """One "Sign all" (or a selection): what was chosen and the signature given once for all of them."""

    __tablename__ = "countersign_runs"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    link_id: Mapped[int] = mapped_column(db.ForeignKey("countersign_links.id", ondelete="CASCADE"), index=True)
    #: The parties to sign (ids), in the order chosen; its chunk jobs take slices of it.
    party_ids: Mapped[list] = mapped_column(JSON)
    #: The typed name (cleaned), the drawn signature (clean PNG or None), where from: each document's own event
    #: and block carry them, with the time that document was signed.
    signer_name: Mapped[str] = mapped_column(db.String(300))
    signature_image: Mapped[bytes | None] = mapped_column(db.LargeBinary)
    signer_ip: Mapped[str | None] = mapped_column(db.String(64))
    user_agent: Mapped[str | None] = mapped_column(db.String(500))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    #: The RQ ids of the chunk jobs now answerable for it; when none will run and documents are left, the
    #: reconciler queues new ones and counts a generation up (compare-and-set: two reconcilers queue once).
    job_ids: Mapped[list] = mapped_column(JSON, default=list)
    generation: Mapped[int] = mapped_column(default=0)
    #: When no chosen document was left to sign.
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: The link's one-time code the signer's session had verified when the batch asks for one: each document the run
    #: signs records it in its own trail (``link_proofs.link_proof``).
    code_id: Mapped[int | None] = mapped_column(BigId, db.ForeignKey("one_time_codes.id", ondelete="SET NULL"))

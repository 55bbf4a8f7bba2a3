"""corrections of a request before it is complete, the document's version, the links a correction replaced

Revision ID: 5c2e8a1f4d7b
Revises: 4b7d9e1f3a5c
Create Date: 2026-12-06 16:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "5c2e8a1f4d7b"
down_revision = "4b7d9e1f3a5c"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade():
    with op.batch_alter_table("signing_requests") as batch_op:
        batch_op.add_column(sa.Column("document_version", sa.Integer(), server_default="1", nullable=False))
    op.create_table(
        "corrections",
        sa.Column("id", BigId, nullable=False),
        sa.Column("request_id", BigId, nullable=False),
        sa.Column("batch_id", sa.Integer(), nullable=False),
        sa.Column("changes", sa.JSON(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.Column("requested_by_id", sa.Integer(), nullable=True),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_by_id", sa.Integer(), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["request_id"], ["signing_requests.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["batch_id"], ["batches.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["requested_by_id"], ["users.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["decided_by_id"], ["users.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_corrections_request_status", "corrections", ["request_id", "status"])
    op.create_index("ix_corrections_batch_status", "corrections", ["batch_id", "status"])
    op.create_index(
        "uq_corrections_one_pending",
        "corrections",
        ["request_id"],
        unique=True,
        postgresql_where=sa.text("status = 'pending'"),
        sqlite_where=sa.text("status = 'pending'"),
    )
    op.create_table(
        "replaced_links",
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("request_id", BigId, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("replaced_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["request_id"], ["signing_requests.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("token_hash"),
    )
    op.create_index("ix_replaced_links_request_id", "replaced_links", ["request_id"])


def downgrade():
    op.drop_index("ix_replaced_links_request_id", table_name="replaced_links")
    op.drop_table("replaced_links")
    op.drop_index("uq_corrections_one_pending", table_name="corrections")
    op.drop_index("ix_corrections_batch_status", table_name="corrections")
    op.drop_index("ix_corrections_request_status", table_name="corrections")
    op.drop_table("corrections")
    with op.batch_alter_table("signing_requests") as batch_op:
        batch_op.drop_column("document_version")

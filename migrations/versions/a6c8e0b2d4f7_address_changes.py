"""address changes held for a second look: in a team that requires approval, a change of where a document goes
after approval waits for a manager's or an admin's decision

Revision ID: a6c8e0b2d4f7
Revises: e4a7c2d9f1b3
Create Date: 2026-12-06 10:00:00

"""

import sqlalchemy as sa
from alembic import op

import bulksign.models

# revision identifiers, used by Alembic.
revision = "a6c8e0b2d4f7"
down_revision = "e4a7c2d9f1b3"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade():
    op.create_table(
        "address_changes",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("request_id", BIG_ID, nullable=False),
        sa.Column("batch_id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=40), nullable=False),
        sa.Column("old_email", sa.String(length=254), nullable=False),
        sa.Column("new_email", sa.String(length=254), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("requested_by_id", sa.Integer(), nullable=True),
        sa.Column("requested_at", bulksign.models.UTCDateTime(), nullable=False),
        sa.Column("decided_by_id", sa.Integer(), nullable=True),
        sa.Column("decided_at", bulksign.models.UTCDateTime(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["batch_id"], ["batches.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["request_id"], ["signing_requests.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["requested_by_id"], ["users.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["decided_by_id"], ["users.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("address_changes", schema=None) as batch_op:
        batch_op.create_index("ix_address_changes_batch_status", ["batch_id", "status"], unique=False)
        batch_op.create_index("ix_address_changes_request_status", ["request_id", "status"], unique=False)
        batch_op.create_index(
            "uq_address_changes_one_pending",
            ["request_id", "role"],
            unique=True,
            postgresql_where=sa.text("status = 'pending'"),
            sqlite_where=sa.text("status = 'pending'"),
        )


def downgrade():
    with op.batch_alter_table("address_changes", schema=None) as batch_op:
        batch_op.drop_index("uq_address_changes_one_pending")
        batch_op.drop_index("ix_address_changes_request_status")
        batch_op.drop_index("ix_address_changes_batch_status")
    op.drop_table("address_changes")

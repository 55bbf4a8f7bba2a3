"""what signers filled in: a value (or an attachment) per field of a request

Revision ID: e9f1a3c5b7d2
Revises: d5e7f9a1b3c4
Create Date: 2026-12-04 07:20:00

"""

import sqlalchemy as sa
from alembic import op

import bulksign.models

# revision identifiers, used by Alembic.
revision = "e9f1a3c5b7d2"
down_revision = "d5e7f9a1b3c4"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "field_values",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("request_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("batch_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("role", sa.String(length=40), nullable=False),
        sa.Column("value", sa.Text(), nullable=True),
        sa.Column("storage_key", sa.String(length=500), nullable=True),
        sa.Column("content_type", sa.String(length=100), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=True),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column("entered_at", bulksign.models.UTCDateTime(), nullable=False),
        sa.Column("entered_ip", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(["batch_id"], ["batches.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["request_id"], ["signing_requests.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("request_id", "name"),
    )
    with op.batch_alter_table("field_values", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_field_values_batch_id"), ["batch_id"], unique=False)


def downgrade():
    with op.batch_alter_table("field_values", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_field_values_batch_id"))
    op.drop_table("field_values")

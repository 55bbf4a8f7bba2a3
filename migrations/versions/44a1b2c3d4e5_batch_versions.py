"""a version per batch, bumped at commit by every change of its requests, parties or status: live pages poll with it
and are answered 304 while it stands

Revision ID: 44a1b2c3d4e5
Revises: 42a7c1e9d3b5
Create Date: 2026-12-06 03:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "44a1b2c3d4e5"
down_revision = "42a7c1e9d3b5"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "batch_versions",
        sa.Column("batch_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.ForeignKeyConstraint(["batch_id"], ["batches.id"], name="fk_batch_versions_batch_id_batches", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("batch_id", name="pk_batch_versions"),
    )


def downgrade():
    op.drop_table("batch_versions")

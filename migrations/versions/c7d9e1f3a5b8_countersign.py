"""a countersigner's digest link per (batch, address) and the runs that sign many documents at once

Revision ID: c7d9e1f3a5b8
Revises: c4d6e8f0a2b4
Create Date: 2026-12-04 07:30:00

"""

import sqlalchemy as sa
from alembic import op

import bulksign.models

# revision identifiers, used by Alembic.
revision = "c7d9e1f3a5b8"
down_revision = "c4d6e8f0a2b4"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "countersign_links",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.Integer(), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("token_nonce", sa.String(length=64), nullable=False),
        sa.Column("digest_count", sa.Integer(), nullable=False),
        sa.Column("last_digest_at", bulksign.models.UTCDateTime(), nullable=True),
        sa.Column("created_at", bulksign.models.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["batch_id"], ["batches.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("batch_id", "email"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_table(
        "countersign_runs",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("link_id", sa.Integer(), nullable=False),
        sa.Column("party_ids", sa.JSON(), nullable=False),
        sa.Column("signer_name", sa.String(length=300), nullable=False),
        sa.Column("signature_image", sa.LargeBinary(), nullable=True),
        sa.Column("signer_ip", sa.String(length=64), nullable=True),
        sa.Column("user_agent", sa.String(length=500), nullable=True),
        sa.Column("created_at", bulksign.models.UTCDateTime(), nullable=False),
        sa.Column("job_ids", sa.JSON(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("finished_at", bulksign.models.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["link_id"], ["countersign_links.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("countersign_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_countersign_runs_link_id"), ["link_id"], unique=False)


def downgrade():
    with op.batch_alter_table("countersign_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_countersign_runs_link_id"))
    op.drop_table("countersign_runs")
    op.drop_table("countersign_links")

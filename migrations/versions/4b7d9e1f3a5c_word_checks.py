"""Word files checked with a sample row: the file, the row, what the check found and the sample pages

Revision ID: 4b7d9e1f3a5c
Revises: 43a1c5e7b9d2
Create Date: 2026-12-06 16:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "4b7d9e1f3a5c"
down_revision = "43a1c5e7b9d2"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "word_checks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("template_id", sa.Integer(), nullable=True),
        sa.Column("source_key", sa.String(length=500), nullable=False),
        sa.Column("sample", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("pdf_key", sa.String(length=500), nullable=True),
        sa.Column("created_by_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["template_id"], ["document_templates.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["created_by_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_word_checks_created_by_id", "word_checks", ["created_by_id"], unique=False)


def downgrade():
    op.drop_index("ix_word_checks_created_by_id", table_name="word_checks")
    op.drop_table("word_checks")

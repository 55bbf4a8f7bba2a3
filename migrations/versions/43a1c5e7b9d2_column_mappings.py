"""the columns a team matched for a template's files, remembered; and those matched for one upload

Revision ID: 43a1c5e7b9d2
Revises: 44a1b2c3d4e5
Create Date: 2026-12-06 03:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "43a1c5e7b9d2"
down_revision = "44a1b2c3d4e5"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "column_mappings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("template_id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=True),
        sa.Column("columns", sa.JSON(), nullable=False),
        sa.Column("updated_by_id", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["template_id"], ["document_templates.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["updated_by_id"], ["users.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("template_id", "team_id"),
    )
    op.create_index("ix_column_mappings_team_id", "column_mappings", ["team_id"], unique=False)
    with op.batch_alter_table("recipient_uploads") as batch_op:
        batch_op.add_column(sa.Column("columns", sa.JSON(), nullable=True))


def downgrade():
    with op.batch_alter_table("recipient_uploads") as batch_op:
        batch_op.drop_column("columns")
    op.drop_index("ix_column_mappings_team_id", table_name="column_mappings")
    op.drop_table("column_mappings")

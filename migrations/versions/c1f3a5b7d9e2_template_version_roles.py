"""template versions keep the roles that sign them, read from their marks at save

Every version saved before is signed by its recipient alone (``["recipient"]``): a version that printed a column
such as ``signature_date`` keeps it a column, as it always was.

Revision ID: c1f3a5b7d9e2
Revises: a7c3e9f1b2d4
Create Date: 2026-12-02 06:20:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "c1f3a5b7d9e2"
down_revision = "a7c3e9f1b2d4"
branch_labels = None
depends_on = None


def upgrade():
    # The server default back-fills every existing version in the same statement.
    with op.batch_alter_table("template_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("roles", sa.JSON(), nullable=False, server_default=sa.text("'[\"recipient\"]'")))


def downgrade():
    # Not in batch mode: SQLite (3.35+) drops a plain column in place, where batch mode re-creates the table and
    # fails while batches point at its rows.
    op.drop_column("template_versions", "roles")

"""template versions keep the fields their signer fills, documents where each field sits

Revision ID: d5e7f9a1b3c4
Revises: c1f3a5b7d9e2
Create Date: 2026-12-02 06:30:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "d5e7f9a1b3c4"
down_revision = "c1f3a5b7d9e2"
branch_labels = None
depends_on = None


def upgrade():
    # Null for every version saved before: it marks no field (a {{ field_x }} then was a column, and stays one).
    with op.batch_alter_table("template_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("fields", sa.JSON(), nullable=True))
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("field_boxes", sa.JSON(), nullable=True))


def downgrade():
    # Not in batch mode: SQLite (3.35+) drops a plain column in place, where batch mode re-creates the table and
    # fails while batches point at its rows.
    op.drop_column("documents", "field_boxes")
    op.drop_column("template_versions", "fields")

"""PDF template versions keep who each of the form's own fields belongs to

Revision ID: 8d3f5a7c9e1b
Revises: 5c2e8a1f4d7b
Create Date: 2026-12-06 18:40:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "8d3f5a7c9e1b"
down_revision = "5c2e8a1f4d7b"
branch_labels = None
depends_on = None


def upgrade():
    # A plain ALTER TABLE: a nullable column needs no copy of the table.
    op.add_column("template_versions", sa.Column("pdf_form_fields", sa.JSON(), nullable=True))


def downgrade():
    # Not in batch mode: SQLite (3.35+) drops a plain column in place, where batch mode re-creates the table and
    # fails while batches point at its rows.
    op.drop_column("template_versions", "pdf_form_fields")

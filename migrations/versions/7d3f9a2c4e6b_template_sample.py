"""a template's sample row (column → value), edited on the template page and used by the parties' previews;
templates made before keep none and get one made from their columns

Revision ID: 7d3f9a2c4e6b
Revises: 8d3f5a7c9e1b
Create Date: 2026-12-06 18:30:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "7d3f9a2c4e6b"
down_revision = "8d3f5a7c9e1b"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("document_templates", sa.Column("sample", sa.JSON(), nullable=True))


def downgrade():
    with op.batch_alter_table("document_templates") as batch:
        batch.drop_column("sample")

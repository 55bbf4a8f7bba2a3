"""a template version's parties (labels per language, colour, who by default) and its signing order, saved with it;
versions saved before keep both empty and derive them from their roles

Revision ID: 42a7c1e9d3b5
Revises: 45a1c3e5f7b9
Create Date: 2026-12-06 03:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "42a7c1e9d3b5"
down_revision = "45a1c3e5f7b9"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("template_versions") as batch:
        batch.add_column(sa.Column("parties", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("routing", sa.JSON(), nullable=True))


def downgrade():
    with op.batch_alter_table("template_versions") as batch:
        batch.drop_column("routing")
        batch.drop_column("parties")

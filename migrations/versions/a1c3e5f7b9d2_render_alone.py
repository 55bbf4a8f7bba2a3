"""a template version's documents go one by one: why a run of them failed its check, kept for staff to see

Revision ID: a1c3e5f7b9d2
Revises: d8e0f2a4b6c9
Create Date: 2026-12-05 14:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "a1c3e5f7b9d2"
down_revision = "d8e0f2a4b6c9"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("template_versions") as batch:
        batch.add_column(sa.Column("render_alone", sa.JSON(), nullable=True))


def downgrade():
    with op.batch_alter_table("template_versions") as batch:
        batch.drop_column("render_alone")

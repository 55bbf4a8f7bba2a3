"""an attachment's sha256 as the signer gave it, when its active content was taken out before it was stored

Revision ID: b8f0a2c4e6d1
Revises: a1c3e5f7b9d2
Create Date: 2026-12-06 10:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "b8f0a2c4e6d1"
down_revision = "a1c3e5f7b9d2"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("field_values") as batch_op:
        batch_op.add_column(sa.Column("original_sha256", sa.String(length=64), nullable=True))


def downgrade():
    with op.batch_alter_table("field_values") as batch_op:
        batch_op.drop_column("original_sha256")

"""one-time codes of the other parties of a document several sign: the party a code belongs to

Revision ID: c4d6e8f0a2b4
Revises: e9f1a3c5b7d2
Create Date: 2026-12-04 07:30:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "c4d6e8f0a2b4"
down_revision = "e9f1a3c5b7d2"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("one_time_codes") as batch_op:
        batch_op.add_column(sa.Column("party_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True))
        batch_op.create_foreign_key(
            op.f("fk_one_time_codes_party_id_parties"), "parties", ["party_id"], ["id"], ondelete="CASCADE"
        )


def downgrade():
    with op.batch_alter_table("one_time_codes") as batch_op:
        batch_op.drop_constraint(op.f("fk_one_time_codes_party_id_parties"), type_="foreignkey")
        batch_op.drop_column("party_id")

"""one-time codes of a countersigner's link (one code unlocks the page of all their documents), and the code a run
was started under

Revision ID: d8e0f2a4b6c9
Revises: c7d9e1f3a5b8
Create Date: 2026-12-04 14:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "d8e0f2a4b6c9"
down_revision = "c7d9e1f3a5b8"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade():
    with op.batch_alter_table("one_time_codes") as batch_op:
        batch_op.alter_column("request_id", existing_type=BIG_ID, nullable=True)
        batch_op.add_column(sa.Column("countersign_link_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            op.f("fk_one_time_codes_countersign_link_id_countersign_links"),
            "countersign_links",
            ["countersign_link_id"],
            ["id"],
            ondelete="CASCADE",
        )
        batch_op.create_index("ix_one_time_codes_link_created", ["countersign_link_id", "created_at"], unique=False)
        batch_op.create_check_constraint(
            op.f("ck_one_time_codes_one_owner"), "(request_id IS NULL) <> (countersign_link_id IS NULL)"
        )
    with op.batch_alter_table("countersign_runs") as batch_op:
        batch_op.add_column(sa.Column("code_id", BIG_ID, nullable=True))
        batch_op.create_foreign_key(
            op.f("fk_countersign_runs_code_id_one_time_codes"),
            "one_time_codes",
            ["code_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade():
    with op.batch_alter_table("countersign_runs") as batch_op:
        batch_op.drop_constraint(op.f("fk_countersign_runs_code_id_one_time_codes"), type_="foreignkey")
        batch_op.drop_column("code_id")
    # A link's codes have no request to keep them under: they go (each lets a browser in for two hours at most).
    op.execute("DELETE FROM one_time_codes WHERE countersign_link_id IS NOT NULL")
    with op.batch_alter_table("one_time_codes") as batch_op:
        batch_op.drop_constraint(op.f("ck_one_time_codes_one_owner"), type_="check")
        batch_op.drop_index("ix_one_time_codes_link_created")
        batch_op.drop_constraint(op.f("fk_one_time_codes_countersign_link_id_countersign_links"), type_="foreignkey")
        batch_op.drop_column("countersign_link_id")
        batch_op.alter_column("request_id", existing_type=BIG_ID, nullable=False)

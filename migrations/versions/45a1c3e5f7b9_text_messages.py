"""invitations and reminders by text message: the batch's channel and text cap, the channel of each outgoing
message (its phone, why it went by text, the provider's id and delivery), and the numbers no text goes to

Revision ID: 45a1c3e5f7b9
Revises: c3e5a7b9d1f4
Create Date: 2026-12-06 03:10:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "45a1c3e5f7b9"
down_revision = "c3e5a7b9d1f4"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade():
    with op.batch_alter_table("batches") as batch_op:
        batch_op.add_column(sa.Column("channel", sa.String(24), nullable=False, server_default="mail"))
        batch_op.add_column(sa.Column("text_cap", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("texts_sent", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("text_cap_reached_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("outgoing_mails") as batch_op:
        batch_op.add_column(sa.Column("channel", sa.String(10), nullable=False, server_default="mail"))
        batch_op.add_column(sa.Column("to_phone", sa.String(20), nullable=True))
        batch_op.add_column(sa.Column("text_reason", sa.String(20), nullable=True))
        batch_op.add_column(sa.Column("provider_ref", sa.String(100), nullable=True))
        batch_op.add_column(sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index("ix_outgoing_mails_provider_ref", ["provider_ref"], unique=False)
    op.create_table(
        "phone_suppressions",
        sa.Column("id", BIG_ID, primary_key=True),
        sa.Column("phone", sa.String(20), nullable=False, unique=True),
        sa.Column("source", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade():
    op.drop_table("phone_suppressions")
    with op.batch_alter_table("outgoing_mails") as batch_op:
        batch_op.drop_index("ix_outgoing_mails_provider_ref")
        for column in ("delivered_at", "provider_ref", "text_reason", "to_phone", "channel"):
            batch_op.drop_column(column)
    with op.batch_alter_table("batches") as batch_op:
        for column in ("text_cap_reached_at", "texts_sent", "text_cap", "channel"):
            batch_op.drop_column(column)

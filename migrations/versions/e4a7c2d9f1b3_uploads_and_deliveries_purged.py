"""recipients files kept between check and create as rows (their age and the batch made of them, for the purge),
and the request each webhook delivery tells of (for the purge of its person)

Revision ID: e4a7c2d9f1b3
Revises: b4d6f8a0c2e4
Create Date: 2026-12-05 12:00:00

"""

import sqlalchemy as sa
from alembic import op

import bulksign.models

# revision identifiers, used by Alembic.
revision = "e4a7c2d9f1b3"
down_revision = "b4d6f8a0c2e4"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade():
    op.create_table(
        "recipient_uploads",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("template_id", sa.Integer(), nullable=True),
        sa.Column("filename", sa.String(length=200), nullable=False),
        sa.Column("created_at", bulksign.models.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_recipient_uploads_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_recipient_uploads")),
    )
    with op.batch_alter_table("recipient_uploads") as batch_op:
        batch_op.create_index(batch_op.f("ix_recipient_uploads_user_id"), ["user_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_recipient_uploads_created_at"), ["created_at"], unique=False)
    with op.batch_alter_table("batches") as batch_op:
        batch_op.add_column(sa.Column("upload_id", sa.String(length=32), nullable=True))
        batch_op.create_index(batch_op.f("ix_batches_upload_id"), ["upload_id"], unique=False)
    with op.batch_alter_table("webhook_deliveries") as batch_op:
        batch_op.add_column(sa.Column("request_id", BIG_ID, nullable=True))
        batch_op.create_index(batch_op.f("ix_webhook_deliveries_request_id"), ["request_id"], unique=False)
    # Deliveries recorded before: their request is in the payload.
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "UPDATE webhook_deliveries SET request_id = (payload -> 'request' ->> 'id')::bigint"
            " WHERE payload -> 'request' ->> 'id' IS NOT NULL"
        )
    else:
        op.execute(
            "UPDATE webhook_deliveries SET request_id = json_extract(payload, '$.request.id')"
            " WHERE json_extract(payload, '$.request.id') IS NOT NULL"
        )


def downgrade():
    with op.batch_alter_table("webhook_deliveries") as batch_op:
        batch_op.drop_index(batch_op.f("ix_webhook_deliveries_request_id"))
        batch_op.drop_column("request_id")
    with op.batch_alter_table("batches") as batch_op:
        batch_op.drop_index(batch_op.f("ix_batches_upload_id"))
        batch_op.drop_column("upload_id")
    op.drop_table("recipient_uploads")

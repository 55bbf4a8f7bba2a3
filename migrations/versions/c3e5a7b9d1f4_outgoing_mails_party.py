"""the party a mail to one party of a request is for, as a column: its builder looks the party up by it instead of
reading it out of the Message-ID

Revision ID: c3e5a7b9d1f4
Revises: a6c8e0b2d4f7
Create Date: 2026-12-06 12:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "c3e5a7b9d1f4"
down_revision = "a6c8e0b2d4f7"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# The Message-IDs the party mails were written with (``mailer.message_id_for``): the invitation's and the reminder's
# name the party's id, the decline's and the completion's its request and role.
BY_PARTY_ID = "'<party-' || {kind} || '-' || p.id || '-'"
BY_ROLE = "'<party-' || {kind} || '-' || p.request_id || '-' || p.role || '@'"


def _prefix_is(prefix: str) -> str:
    return f"substr(outgoing_mails.message_id, 1, length({prefix})) = {prefix}"


def upgrade():
    with op.batch_alter_table("outgoing_mails") as batch_op:
        batch_op.add_column(sa.Column("party_id", BIG_ID, nullable=True))
        batch_op.create_foreign_key(
            "fk_outgoing_mails_party_id_parties", "parties", ["party_id"], ["id"], ondelete="SET NULL"
        )
        batch_op.create_index("ix_outgoing_mails_party_id", ["party_id"], unique=False)
    matches = " OR ".join(
        [
            _prefix_is(BY_PARTY_ID.format(kind="'invitation'")),
            _prefix_is(BY_PARTY_ID.format(kind="'reminder'")),
            _prefix_is(BY_ROLE.format(kind="'declined'")),
            _prefix_is(BY_ROLE.format(kind="'completed'")),
        ]
    )
    op.execute(
        "UPDATE outgoing_mails SET party_id = ("
        " SELECT p.id FROM parties p WHERE p.request_id = outgoing_mails.request_id AND (" + matches + "))"
        " WHERE kind IN ('party_invitation', 'party_reminder', 'party_declined', 'party_completed')"
        " AND request_id IS NOT NULL"
    )


def downgrade():
    with op.batch_alter_table("outgoing_mails") as batch_op:
        batch_op.drop_index("ix_outgoing_mails_party_id")
        batch_op.drop_constraint("fk_outgoing_mails_party_id_parties", type_="foreignkey")
        batch_op.drop_column("party_id")

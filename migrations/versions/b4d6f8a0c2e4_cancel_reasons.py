"""the reason staff give when they cancel a request or a whole batch (told to the parties already invited and shown
on the cancelled link's page)

Revision ID: b4d6f8a0c2e4
Revises: a3c5e7f9b1d2
Create Date: 2026-12-10 12:00:00

"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "b4d6f8a0c2e4"
down_revision = "a3c5e7f9b1d2"
branch_labels = None
depends_on = None


def upgrade():
    # Plain ALTER TABLEs: a batch copy of signing_requests on SQLite would lose its index on lower(email).
    op.add_column("signing_requests", sa.Column("cancel_reason", sa.Text(), nullable=True))
    op.add_column("batches", sa.Column("cancel_reason", sa.Text(), nullable=True))


def downgrade():
    op.drop_column("batches", "cancel_reason")
    op.drop_column("signing_requests", "cancel_reason")

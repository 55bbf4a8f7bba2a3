"""index on lower(email) of signing requests

Bounce reports name the address in the provider's case; they are matched on lower(email).

Revision ID: 3b7d1c2e9a41
Revises: c8d2e3f4a5b6
Create Date: 2026-12-01 00:40:00

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '3b7d1c2e9a41'
down_revision = 'c8d2e3f4a5b6'
branch_labels = None
depends_on = None


def upgrade():
    op.create_index('ix_signing_requests_email_lower', 'signing_requests', [sa.text('lower(email)')], unique=False)


def downgrade():
    op.drop_index('ix_signing_requests_email_lower', table_name='signing_requests')

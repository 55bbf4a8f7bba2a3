"""documents remember where their signature goes

The render step finds the box a document marks for the signature ({{ signature }}, a form
field, a box staff placed) and stores it with the original; sealing stamps the block there,
or appends a signature page, instead of stamping over the last page's bottom margin.

Revision ID: a3e5f7b9c1d2
Revises: f7ec47aedb66
Create Date: 2026-12-01 04:40:00

"""
from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision = 'a3e5f7b9c1d2'
down_revision = 'f7ec47aedb66'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('documents', schema=None) as batch_op:
        batch_op.add_column(sa.Column('signature_box', sa.JSON(), nullable=True))


def downgrade():
    with op.batch_alter_table('documents', schema=None) as batch_op:
        batch_op.drop_column('signature_box')

"""users.logouts: a logout ends the user's sessions and "remember me" cookies

Revision ID: 5c2e8f1a7b90
Revises: 3b7d1c2e9a41
Create Date: 2026-12-01 00:50:00

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '5c2e8f1a7b90'
down_revision = '3b7d1c2e9a41'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('logouts', sa.Integer(), server_default='0', nullable=False))


def downgrade():
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('logouts')

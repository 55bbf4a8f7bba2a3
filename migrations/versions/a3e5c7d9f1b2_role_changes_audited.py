"""role changes audited with membership changes

``membership_changes`` also records roles given (at creation or later): the role before and
after; such a row names no team.

Revision ID: a3e5c7d9f1b2
Revises: e4b8c2d6f1a3
Create Date: 2026-12-01 04:30:00

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a3e5c7d9f1b2'
down_revision = 'e4b8c2d6f1a3'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('membership_changes', schema=None) as batch_op:
        batch_op.add_column(sa.Column('old_role', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('new_role', sa.String(length=16), nullable=True))
        batch_op.alter_column('team_name', existing_type=sa.String(length=100), nullable=True)


def downgrade():
    # Role rows have no team and no place in the older table: they go.
    op.execute("DELETE FROM membership_changes WHERE team_name IS NULL")
    with op.batch_alter_table('membership_changes', schema=None) as batch_op:
        batch_op.alter_column('team_name', existing_type=sa.String(length=100), nullable=False)
        batch_op.drop_column('new_role')
        batch_op.drop_column('old_role')

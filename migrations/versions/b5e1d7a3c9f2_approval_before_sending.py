"""approval before sending

A team may require that its staff's new batches wait for another member's approval (``teams.require_approval``);
a batch keeps whether it needed one and how it was decided (``approval``: waiting, approved, rejected), by whom,
when, and a rejection's reason. Older batches needed none (null).

Revision ID: b5e1d7a3c9f2
Revises: b9d1e3f5a7c2
Create Date: 2026-12-01 23:40:00

"""
from alembic import op
import sqlalchemy as sa

import bulksign.models


# revision identifiers, used by Alembic.
revision = 'b5e1d7a3c9f2'
down_revision = 'b9d1e3f5a7c2'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('teams', sa.Column('require_approval', sa.Boolean(), server_default=sa.false(), nullable=False))
    with op.batch_alter_table('batches') as batch:
        batch.add_column(sa.Column('approval', sa.String(length=10), nullable=True))
        batch.add_column(sa.Column('approval_by_id', sa.Integer(), nullable=True))
        batch.add_column(sa.Column('approval_at', bulksign.models.base.UTCDateTime(), nullable=True))
        batch.add_column(sa.Column('rejection_reason', sa.Text(), nullable=True))
        batch.create_foreign_key(
            'fk_batches_approval_by_id_users', 'users', ['approval_by_id'], ['id'], ondelete='SET NULL'
        )


def downgrade():
    with op.batch_alter_table('batches') as batch:
        batch.drop_constraint('fk_batches_approval_by_id_users', type_='foreignkey')
        batch.drop_column('rejection_reason')
        batch.drop_column('approval_at')
        batch.drop_column('approval_by_id')
        batch.drop_column('approval')
    op.drop_column('teams', 'require_approval')

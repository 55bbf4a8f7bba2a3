"""Retention: per team and per batch how long documents and personal data are kept, legal holds, purged requests

Revision ID: b9d1e3f5a7c2
Revises: c4e6a8b0d2f3
Create Date: 2026-12-01 23:50:00

"""
from alembic import op
import sqlalchemy as sa

import bulksign.models


# revision identifiers, used by Alembic.
revision = 'b9d1e3f5a7c2'
down_revision = 'c4e6a8b0d2f3'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'team_retention',
        sa.Column('team_id', sa.Integer(), nullable=False),
        sa.Column('keep_signed_days', sa.Integer(), nullable=True),
        sa.Column('keep_unsigned_days', sa.Integer(), nullable=False),
        sa.Column('updated_at', bulksign.models.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['team_id'], ['teams.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('team_id'),
    )
    op.create_table(
        'batch_retention',
        sa.Column('batch_id', sa.Integer(), nullable=False),
        sa.Column('keep_signed_days', sa.Integer(), nullable=True),
        sa.Column('keep_unsigned_days', sa.Integer(), nullable=True),
        sa.Column('held_at', bulksign.models.UTCDateTime(timezone=True), nullable=True),
        sa.Column('hold_reason', sa.Text(), nullable=True),
        sa.Column('held_by_id', sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(['batch_id'], ['batches.id'], ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['held_by_id'], ['users.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('batch_id'),
    )
    with op.batch_alter_table('signing_requests', schema=None) as batch_op:
        batch_op.add_column(sa.Column('purged_at', bulksign.models.UTCDateTime(timezone=True), nullable=True))


def downgrade():
    # Not batch mode: on SQLite that copies the table and loses its expression index (lower(email)), whose own
    # downgrade then fails; SQLite 3.35+ drops a plain column in place, as PostgreSQL does.
    op.execute('ALTER TABLE signing_requests DROP COLUMN purged_at')
    op.drop_table('batch_retention')
    op.drop_table('team_retention')

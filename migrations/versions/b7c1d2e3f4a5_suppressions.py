"""suppression list and complaints

Addresses that hard-bounced or complained get no more mail until an admin lifts the entry;
a request remembers when its recipient marked our mail as spam.

Revision ID: b7c1d2e3f4a5
Revises: 94228360f359
Create Date: 2026-12-01 00:30:00

"""
from alembic import op
import sqlalchemy as sa

import bulksign.models

# revision identifiers, used by Alembic.
revision = 'b7c1d2e3f4a5'
down_revision = '94228360f359'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('suppressions',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('email', sa.String(length=254), nullable=False),
    sa.Column('source', sa.String(length=20), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('batch_id', sa.Integer(), nullable=True),
    sa.Column('request_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('created_at', bulksign.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('lifted_at', bulksign.models.UTCDateTime(timezone=True), nullable=True),
    sa.Column('lifted_by_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['batch_id'], ['batches.id'], name=op.f('fk_suppressions_batch_id_batches'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['lifted_by_id'], ['users.id'], name=op.f('fk_suppressions_lifted_by_id_users'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['request_id'], ['signing_requests.id'], name=op.f('fk_suppressions_request_id_signing_requests'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_suppressions')),
    sa.UniqueConstraint('email', name=op.f('uq_suppressions_email'))
    )
    with op.batch_alter_table('suppressions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_suppressions_created_at'), ['created_at'], unique=False)
    with op.batch_alter_table('signing_requests', schema=None) as batch_op:
        batch_op.add_column(sa.Column('complained_at', bulksign.models.UTCDateTime(timezone=True), nullable=True))


def downgrade():
    with op.batch_alter_table('signing_requests', schema=None) as batch_op:
        batch_op.drop_column('complained_at')
    with op.batch_alter_table('suppressions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_suppressions_created_at'))
    op.drop_table('suppressions')

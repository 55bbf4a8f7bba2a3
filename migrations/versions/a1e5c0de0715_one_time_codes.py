"""one-time codes: per batch, recipients confirm a code before they can sign

Revision ID: a1e5c0de0715
Revises: a1d3e5f7b9c2
Create Date: 2026-12-01 04:30:00

"""
from alembic import op
import sqlalchemy as sa

import bulksign.models

# revision identifiers, used by Alembic.
revision = 'a1e5c0de0715'
down_revision = 'a1d3e5f7b9c2'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('batches', sa.Column('one_time_code', sa.Boolean(), server_default=sa.false(), nullable=False))
    op.create_table('one_time_codes',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('request_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('channel', sa.String(length=10), nullable=False),
    sa.Column('destination', sa.String(length=254), nullable=False),
    sa.Column('nonce', sa.String(length=32), nullable=False),
    sa.Column('code_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', bulksign.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('expires_at', bulksign.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('verified_at', bulksign.models.UTCDateTime(timezone=True), nullable=True),
    sa.Column('locked_at', bulksign.models.UTCDateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['request_id'], ['signing_requests.id'], name=op.f('fk_one_time_codes_request_id_signing_requests'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_one_time_codes'))
    )
    op.create_index('ix_one_time_codes_request_created', 'one_time_codes', ['request_id', 'created_at'], unique=False)


def downgrade():
    op.drop_index('ix_one_time_codes_request_created', table_name='one_time_codes')
    op.drop_table('one_time_codes')
    # Not in batch mode: SQLite (3.35+) drops the column in place, where re-creating ``batches`` would
    # cascade-delete every request of every batch (foreign keys are enforced).
    op.drop_column('batches', 'one_time_code')

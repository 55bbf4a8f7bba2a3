"""idempotency keys of API calls

Every creating API call takes ``Idempotency-Key``; the answer is kept per API key until it expires.

Revision ID: a1d3e5f7b9c2
Revises: f7ec47aedb66
Create Date: 2026-12-01 04:30:00

"""
from alembic import op
import sqlalchemy as sa

import bulksign.models

# revision identifiers, used by Alembic.
revision = 'a1d3e5f7b9c2'
down_revision = 'a3e5c7d9f1b2'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('idempotency_keys',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('api_key_id', sa.Integer(), nullable=False),
    sa.Column('key', sa.String(length=200), nullable=False),
    sa.Column('fingerprint', sa.String(length=64), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('response_body', sa.JSON(), nullable=True),
    sa.Column('created_at', bulksign.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('expires_at', bulksign.models.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['api_key_id'], ['api_keys.id'], name=op.f('fk_idempotency_keys_api_key_id_api_keys'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_idempotency_keys')),
    sa.UniqueConstraint('api_key_id', 'key', name=op.f('uq_idempotency_keys_api_key_id'))
    )
    with op.batch_alter_table('idempotency_keys', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_idempotency_keys_expires_at'), ['expires_at'], unique=False)


def downgrade():
    with op.batch_alter_table('idempotency_keys', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_idempotency_keys_expires_at'))
    op.drop_table('idempotency_keys')

"""seal certificates kept for verification after rotation

Every certificate that sealed documents is kept, and each signed document names the one that
sealed it, so /verify recognises documents sealed before the certificate was replaced.

Revision ID: c8d2e3f4a5b6
Revises: b7c1d2e3f4a5
Create Date: 2026-12-01 00:40:00

"""
from alembic import op
import sqlalchemy as sa

import bulksign.models

# revision identifiers, used by Alembic.
revision = 'c8d2e3f4a5b6'
down_revision = 'b7c1d2e3f4a5'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('seal_certificates',
    sa.Column('fingerprint', sa.String(length=64), nullable=False),
    sa.Column('subject', sa.String(length=500), nullable=False),
    sa.Column('der', sa.LargeBinary(), nullable=False),
    sa.Column('not_after', bulksign.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('first_used_at', bulksign.models.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('fingerprint', name=op.f('pk_seal_certificates'))
    )
    with op.batch_alter_table('documents', schema=None) as batch_op:
        batch_op.add_column(sa.Column('seal_fingerprint', sa.String(length=64), nullable=True))


def downgrade():
    with op.batch_alter_table('documents', schema=None) as batch_op:
        batch_op.drop_column('seal_fingerprint')
    op.drop_table('seal_certificates')

"""parties: every request gets its recipient party

A request's parties are the people who sign its document. Every existing request gets its ``recipient``
(step 0) in the state its request stands for, so single-signer batches, their links (which stay the request's)
and API answers are unchanged.

Revision ID: a7c3e9f1b2d4
Revises: b5e1d7a3c9f2
Create Date: 2026-12-01 23:45:00

"""
from alembic import op
import sqlalchemy as sa

import bulksign.models


# revision identifiers, used by Alembic.
revision = 'a7c3e9f1b2d4'
down_revision = 'b5e1d7a3c9f2'
branch_labels = None
depends_on = None

# The party state each request state stands for, spelled out so the migration does not change with the code. A
# cancelled request's party stands where the request was when staff cancelled it.
PARTY_STATUS = (
    "CASE WHEN status IN ('signed', 'declined', 'opened') THEN status "
    "WHEN status IN ('sent', 'expired', 'bounced') THEN 'invited' "
    "WHEN status = 'cancelled' AND opened_at IS NOT NULL THEN 'opened' "
    "WHEN status = 'cancelled' AND sent_at IS NOT NULL THEN 'invited' "
    "ELSE 'waiting' END"
)


def upgrade():
    op.create_table('parties',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('request_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('batch_id', sa.Integer(), nullable=False),
    sa.Column('role', sa.String(length=40), nullable=False),
    sa.Column('step', sa.Integer(), nullable=False),
    sa.Column('source', sa.String(length=10), nullable=True),
    sa.Column('email', sa.String(length=254), nullable=True),
    sa.Column('name', sa.String(length=300), nullable=True),
    sa.Column('phone', sa.String(length=50), nullable=True),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('status_changed_at', bulksign.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=True),
    sa.Column('token_nonce', sa.String(length=64), nullable=True),
    sa.Column('invited_at', bulksign.models.UTCDateTime(timezone=True), nullable=True),
    sa.Column('opened_at', bulksign.models.UTCDateTime(timezone=True), nullable=True),
    sa.Column('signed_at', bulksign.models.UTCDateTime(timezone=True), nullable=True),
    sa.Column('declined_at', bulksign.models.UTCDateTime(timezone=True), nullable=True),
    sa.Column('decline_reason', sa.Text(), nullable=True),
    sa.Column('signer_name', sa.String(length=300), nullable=True),
    sa.Column('signer_ip', sa.String(length=64), nullable=True),
    sa.Column('signature_image', sa.LargeBinary(), nullable=True),
    sa.Column('reminder_count', sa.Integer(), nullable=False),
    sa.Column('last_reminder_at', bulksign.models.UTCDateTime(timezone=True), nullable=True),
    sa.Column('created_at', bulksign.models.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['batch_id'], ['batches.id'], name=op.f('fk_parties_batch_id_batches'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['request_id'], ['signing_requests.id'], name=op.f('fk_parties_request_id_signing_requests'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_parties')),
    sa.UniqueConstraint('request_id', 'role', name=op.f('uq_parties_request_id')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_parties_token_hash'))
    )
    op.create_index('ix_parties_batch_role_status', 'parties', ['batch_id', 'role', 'status'], unique=False)
    op.create_index('ix_parties_email_lower', 'parties', [sa.text('lower(email)')], unique=False)
    op.execute(
        "INSERT INTO parties (request_id, batch_id, role, step, status, status_changed_at, invited_at, opened_at, "
        "signed_at, declined_at, reminder_count, created_at) "
        f"SELECT id, batch_id, 'recipient', 0, {PARTY_STATUS}, status_changed_at, sent_at, opened_at, signed_at, "
        "declined_at, 0, created_at FROM signing_requests"
    )


def downgrade():
    op.drop_index('ix_parties_email_lower', table_name='parties')
    op.drop_index('ix_parties_batch_role_status', table_name='parties')
    op.drop_table('parties')

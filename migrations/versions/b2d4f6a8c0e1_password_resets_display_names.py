"""users.display_name and password_resets: staff are called by name in mails; "forgot password" links

Revision ID: b2d4f6a8c0e1
Revises: a1e5c0de0715
Create Date: 2026-12-01 23:00:00

"""
from alembic import op
import sqlalchemy as sa

import bulksign.models

# revision identifiers, used by Alembic.
revision = 'b2d4f6a8c0e1'
down_revision = 'a1e5c0de0715'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('users', sa.Column('display_name', sa.String(length=100), nullable=True))
    op.create_table('password_resets',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('nonce', sa.String(length=32), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('locale', sa.String(length=8), nullable=False),
    sa.Column('created_at', bulksign.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('expires_at', bulksign.models.UTCDateTime(timezone=True), nullable=False),
    sa.Column('used_at', bulksign.models.UTCDateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_password_resets_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_password_resets')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_password_resets_token_hash'))
    )
    op.create_index('ix_password_resets_user_created', 'password_resets', ['user_id', 'created_at'], unique=False)


def downgrade():
    op.drop_index('ix_password_resets_user_created', table_name='password_resets')
    op.drop_table('password_resets')
    # Not in batch mode: SQLite (3.35+) drops the column in place, where re-creating ``users`` would cascade-delete
    # every team membership and API key (foreign keys are enforced).
    op.drop_column('users', 'display_name')

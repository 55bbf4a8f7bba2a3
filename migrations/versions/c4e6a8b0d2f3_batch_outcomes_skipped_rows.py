"""batch outcomes and skipped rows

A batch's status says what it means for its owner: ``completed`` (every invitation dispatched) becomes
``awaiting_signatures``, and a dispatched batch in which nobody can sign any more becomes ``all_signed`` or
``closed`` (``settled_at``). ``last_expires_at`` is when its last link expires; ``skipped_count`` and
``batch_skipped_rows`` keep the rows of the file left out at creation (none are known for older batches).

Revision ID: c4e6a8b0d2f3
Revises: b2d4f6a8c0e1
Create Date: 2026-12-01 23:00:00

"""
from alembic import op
import sqlalchemy as sa

import bulksign.models


# revision identifiers, used by Alembic.
revision = 'c4e6a8b0d2f3'
down_revision = 'b2d4f6a8c0e1'
branch_labels = None
depends_on = None

# Request statuses as of this revision, spelled out so the migration does not change with the code.
OPEN = "('pending','generating','generated','sending','sent','opened')"
WAITING = "('sent','opened')"


def upgrade():
    op.add_column('batches', sa.Column('last_expires_at', bulksign.models.UTCDateTime(timezone=True), nullable=True))
    op.add_column('batches', sa.Column('skipped_count', sa.Integer(), server_default='0', nullable=False))
    op.add_column('batches', sa.Column('settled_at', bulksign.models.UTCDateTime(timezone=True), nullable=True))
    op.create_table('batch_skipped_rows',
    sa.Column('batch_id', sa.Integer(), nullable=False),
    sa.Column('row_number', sa.Integer(), nullable=False),
    sa.Column('cells', sa.JSON(), nullable=False),
    sa.Column('reasons', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['batch_id'], ['batches.id'], name=op.f('fk_batch_skipped_rows_batch_id_batches'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('batch_id', 'row_number', name=op.f('pk_batch_skipped_rows'))
    )
    # Counted from the requests, not the counters: exact whatever state the counters are in.
    left = lambda states: (  # noqa: E731
        f"(SELECT count(*) FROM signing_requests r WHERE r.batch_id = batches.id AND r.status IN {states})"
    )
    unsigned = "(SELECT count(*) FROM signing_requests r WHERE r.batch_id = batches.id AND r.status <> 'signed')"
    dispatched = "status IN ('completed', 'partially_failed')"
    op.execute(
        "UPDATE batches SET last_expires_at = "
        "(SELECT max(r.expires_at) FROM signing_requests r WHERE r.batch_id = batches.id) "
        f"WHERE {dispatched}"
    )
    op.execute(f"UPDATE batches SET status = 'all_signed', settled_at = finished_at WHERE {dispatched} "
               f"AND {left(OPEN)} = 0 AND {unsigned} = 0")
    op.execute(f"UPDATE batches SET status = 'closed', settled_at = finished_at WHERE {dispatched} "
               f"AND {left(OPEN)} = 0")
    op.execute("UPDATE batches SET status = 'awaiting_signatures' WHERE status = 'completed'")


def downgrade():
    # As the old code closed them: partially_failed when any request failed or bounced, else completed.
    failed = (
        "EXISTS (SELECT 1 FROM signing_requests r WHERE r.batch_id = batches.id AND r.status IN ('failed', 'bounced'))"
    )
    op.execute(f"UPDATE batches SET status = 'partially_failed' WHERE status = 'closed' AND {failed}")
    op.execute("UPDATE batches SET status = 'completed' WHERE status IN ('awaiting_signatures', 'all_signed', 'closed')")
    op.drop_table('batch_skipped_rows')
    # Plain DROP COLUMN (SQLite 3.35+ has it): a batch-mode copy of ``batches`` would drop the old table and so
    # cascade-delete every request of every batch (foreign keys are enforced).
    op.drop_column('batches', 'settled_at')
    op.drop_column('batches', 'skipped_count')
    op.drop_column('batches', 'last_expires_at')

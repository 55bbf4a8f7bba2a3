"""template versions have a kind (html, docx, pdf) and keep their uploaded file

Existing versions are HTML: the server default fills them in.

Revision ID: d3a9e1c7b5f0
Revises: f7ec47aedb66
Create Date: 2026-12-01 04:30:00

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'd3a9e1c7b5f0'
down_revision = 'f7ec47aedb66'
branch_labels = None
depends_on = None


def upgrade():
    # Plain ALTER TABLE, no batch copy: SQLite would re-create template_versions, and dropping the old
    # table fails while batches point at it (foreign keys are enforced).
    op.add_column('template_versions', sa.Column('kind', sa.String(length=16), server_default='html', nullable=False))
    op.add_column('template_versions', sa.Column('source_key', sa.String(length=500), nullable=True))


def downgrade():
    # Not in batch mode: SQLite (3.35+) drops a plain column in place, where batch mode re-creates the table and
    # fails while batches point at its rows.
    op.drop_column('template_versions', 'source_key')
    op.drop_column('template_versions', 'kind')

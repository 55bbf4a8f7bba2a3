"""PDF template versions keep the boxes staff placed on their pages

Revision ID: e4b8c2d6f1a3
Revises: d3a9e1c7b5f0, a3e5f7b9c1d2
Create Date: 2026-12-01 04:40:00

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'e4b8c2d6f1a3'
# Also joins the template kinds (docx) and signature boxes (sigplace) branches of the chain.
down_revision = ('d3a9e1c7b5f0', 'a3e5f7b9c1d2')
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('template_versions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('pdf_boxes', sa.JSON(), nullable=True))


def downgrade():
    # Not in batch mode: SQLite (3.35+) drops a plain column in place, where batch mode re-creates the table and
    # fails while batches point at its rows.
    op.drop_column('template_versions', 'pdf_boxes')

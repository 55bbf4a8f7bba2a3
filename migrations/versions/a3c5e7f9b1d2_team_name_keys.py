"""teams' name keys: each name folded by Python (str.casefold), unique, so a name is found the same way in every
database (SQLite's lower() folds only ASCII); two existing teams whose names fold alike keep the older's name, the
newer gets its id added. On SQLite, the indexes on lower(email) are built again with the lower() the app now gives
SQLite (Python's: bulksign.core.sqlite), so the rows of addresses with capital non-ASCII letters are found by them

Revision ID: a3c5e7f9b1d2
Revises: b8f0a2c4e6d1
Create Date: 2026-12-10 10:00:00

"""

import unicodedata

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "a3c5e7f9b1d2"
down_revision = "b8f0a2c4e6d1"
branch_labels = None
depends_on = None


def _key(name: str) -> str:
    # As bulksign.people.teams.name_key folds names at this revision (a migration keeps its own copy).
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", " ".join(name.split())).casefold())


def upgrade():
    with op.batch_alter_table("teams") as batch_op:
        batch_op.add_column(sa.Column("name_key", sa.String(length=300), nullable=True))
    conn = op.get_bind()
    teams = sa.table("teams", sa.column("id", sa.Integer), sa.column("name", sa.String), sa.column("name_key"))
    seen: set[str] = set()
    for team_id, name in conn.execute(sa.select(teams.c.id, teams.c.name).order_by(teams.c.id)).all():
        key = _key(name)
        if key in seen:  # made twice where lower() did not see the first: the newer is told apart by its id
            name = f"{name[: 100 - len(f' ({team_id})')]} ({team_id})"
            key = _key(name)
        seen.add(key)
        conn.execute(sa.update(teams).where(teams.c.id == team_id).values(name=name, name_key=key))
    with op.batch_alter_table("teams") as batch_op:
        batch_op.alter_column("name_key", existing_type=sa.String(length=300), nullable=False)
        batch_op.create_unique_constraint(batch_op.f("uq_teams_name_key"), ["name_key"])
    if conn.dialect.name == "sqlite":
        for index in ("ix_signing_requests_email_lower", "ix_parties_email_lower"):
            op.execute(f"REINDEX {index}")


def downgrade():
    with op.batch_alter_table("teams") as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_teams_name_key"), type_="unique")
        batch_op.drop_column("name_key")

"""The migrations build the same schema as the models, on PostgreSQL and on SQLite, and roll back."""
from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from flask_migrate import downgrade, upgrade
from sqlalchemy import create_engine, inspect

from bulksign import create_app
from bulksign.extensions import db
from tests.support.services import postgres_database


@pytest.fixture(params=["postgresql", "sqlite"])
def empty_database_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/migrations.db"
    else:
        with postgres_database() as url:
            yield url


def test_migrations_upgrade_to_the_models_and_downgrade_to_nothing(empty_database_url, redis_server, tmp_path):
    app = create_app({"DATABASE_URL": empty_database_url, "REDIS_URL": redis_server.url, "SECRET_KEY": "x",
                      "VAR_DIR": str(tmp_path), "TESTING": True})
    with app.app_context():
        upgrade()
        engine = create_engine(app.config["SQLALCHEMY_DATABASE_URI"])
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": False}), db.metadata)
        assert diff == [], "models and migrations differ: run `flask db migrate`"
        assert {"users", "batches", "signing_requests", "events", "outgoing_mails"} <= set(inspect(engine).get_table_names())
        downgrade(revision="base")
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        engine.dispose()
        db.engine.dispose()

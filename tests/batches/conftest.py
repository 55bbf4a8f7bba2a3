"""Fixtures of the batch tests: a stand-in SMS gateway the app sends its texts to, an app on either database."""

from __future__ import annotations

import pytest

from bulksign.core.extensions import db
from tests.support.sms_gateway import SmsGateway


@pytest.fixture
def gateway(app):
    server = SmsGateway()
    app.config["SMS_HTTP_URL"] = server.url
    yield server
    server.close()


@pytest.fixture(params=["postgresql", pytest.param("sqlite", marks=pytest.mark.sqlite)])
def any_db(request, make_app, tmp_path):
    """An app on the test PostgreSQL, or on a fresh SQLite file (the embedded default)."""
    sqlite = request.param == "sqlite"
    app = make_app(**({"DATABASE_URL": f"sqlite:///{tmp_path}/batches.db"} if sqlite else {}))
    with app.app_context():
        if sqlite:
            db.create_all()
        yield request.param

"""Fixtures of the batch tests: a stand-in SMS gateway the app sends its texts to."""

from __future__ import annotations

import pytest

from tests.support.sms_gateway import SmsGateway


@pytest.fixture
def gateway(app):
    server = SmsGateway()
    app.config["SMS_HTTP_URL"] = server.url
    yield server
    server.close()

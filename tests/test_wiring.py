"""The factory lists every blueprint, and the API flag (bearer key, no CSRF) is given there, not by a file name."""
from __future__ import annotations

import importlib
import pkgutil

import pytest

from bulksign import create_app, views
from bulksign.auth import API_BLUEPRINTS

#: Blueprints registered with ``api=True``, each reviewed: a bearer key instead of the session, no CSRF token.
EXPECTED_API = {"api", "api_batch_actions", "api_dashboard", "api_docs", "api_reminders", "api_suppressions", "api_templates",
                "api_uploads"}


@pytest.fixture(scope="module")
def bare_app(tmp_path_factory):
    var = tmp_path_factory.mktemp("wiring")
    return create_app({"DATABASE_URL": f"sqlite:///{var}/wiring.db", "REDIS_URL": "redis://127.0.0.1:1/0",
                       "SECRET_KEY": "x", "VAR_DIR": str(var), "TESTING": True})


def test_every_view_module_with_a_blueprint_is_listed_in_the_factory(bare_app):
    for info in pkgutil.iter_modules(views.__path__):
        module = importlib.import_module(f"{views.__name__}.{info.name}")
        if hasattr(module, "bp"):
            assert bare_app.blueprints.get(module.bp.name) is module.bp, f"add {info.name} to _register_blueprints"


def test_the_api_blueprints_are_exactly_the_reviewed_list(bare_app):
    assert bare_app.extensions[API_BLUEPRINTS] == EXPECTED_API

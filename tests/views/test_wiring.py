"""The factory lists every blueprint, and the API flag (bearer key, no CSRF) is given there, not by a file name."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from bulksign import views
from bulksign.app import create_app
from bulksign.people.auth import API_BLUEPRINTS

#: Blueprints registered with ``api=True``, each reviewed: a bearer key instead of the session, no CSRF token.
EXPECTED_API = {
    "api",
    "api_approval",
    "api_batch_actions",
    "api_corrections",
    "api_dashboard",
    "api_docs",
    "api_evidence",
    "api_exports",
    "api_privacy",
    "api_reminders",
    "api_requests",
    "api_suppressions",
    "api_templates",
    "api_uploads",
}

#: View modules whose blueprint has another name: the dashboard's endpoints are named after its URLs (/batches/…),
#: the API's shared module and the admin pages after their package, the incoming webhooks after their URL. Other
#: API modules are ``api_<module>``.
BLUEPRINT_NAMES = {"staff.dashboard": "batches", "api.common": "api", "admin.pages": "admin", "webhooks_in": "webhooks"}


def _view_modules():
    """(path below views, module) of every view module with a blueprint."""
    for info in pkgutil.walk_packages(views.__path__, f"{views.__name__}."):
        module = importlib.import_module(info.name)
        if hasattr(module, "bp"):
            yield info.name.removeprefix(f"{views.__name__}."), module


def _expected_name(path: str) -> str:
    package, _, name = path.rpartition(".")
    return BLUEPRINT_NAMES.get(path, f"api_{name}" if package == "api" else name)


@pytest.fixture(scope="module")
def bare_app(tmp_path_factory):
    var = tmp_path_factory.mktemp("wiring")
    return create_app(
        {
            "DATABASE_URL": f"sqlite:///{var}/wiring.db",
            "REDIS_URL": "redis://127.0.0.1:1/0",
            "SECRET_KEY": "x",
            "VAR_DIR": str(var),
            "TESTING": True,
        }
    )


def test_every_view_module_with_a_blueprint_is_listed_in_the_factory(bare_app):
    for name, module in _view_modules():
        assert bare_app.blueprints.get(module.bp.name) is module.bp, f"add {name} to _register_blueprints"


def test_a_view_module_is_named_as_its_blueprint():
    for name, module in _view_modules():
        assert module.bp.name == _expected_name(name), name


def test_the_api_blueprints_are_exactly_the_reviewed_list(bare_app):
    assert bare_app.extensions[API_BLUEPRINTS] == EXPECTED_API

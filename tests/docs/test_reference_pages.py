"""The documentation's generated reference pages cover the code: every environment variable the code reads is in the
settings table (and the table lists nothing the code does not read), every ``flask`` command is in the CLI
reference, and every operation of the OpenAPI document the app serves is in the API reference."""

from __future__ import annotations

import ast
import os
import re
import runpy

import pytest

from bulksign.app import create_app
from bulksign.core import settings
from bulksign.core.config import BASE_DIR, load_config

#: Variables read that are not settings: the ``flask`` command sets this one itself.
NOT_SETTINGS = {"FLASK_RUN_FROM_CLI"}
#: Where the code reads the environment: the package, the entry points, the container's entrypoint.
PYTHON_SOURCES = [*sorted((BASE_DIR / "bulksign").rglob("*.py")), BASE_DIR / "wsgi.py", BASE_DIR / "gunicorn.conf.py"]
SHELL_SOURCES = [BASE_DIR / "scripts" / "docker-entrypoint.sh"]


@pytest.fixture(scope="module")
def reference():
    return runpy.run_path(str(BASE_DIR / "scripts" / "docs_reference.py"), run_name="docs_reference")


@pytest.fixture(scope="module")
def docs_app():
    return create_app({"SECRET_KEY": "reference-pages-test"})


@pytest.fixture(scope="module")
def pages(reference):
    return reference["pages"]()


def table_variables(page: str) -> set[str]:
    return set(re.findall(r"^\| `([A-Z0-9_]+)` \|", page, re.MULTILINE))


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _environment_read(node: ast.AST) -> str | None:
    """The variable's name when ``node`` reads one: ``os.environ.get("X")``, ``os.environ["X"]``,
    ``os.getenv("X")``, ``settings.value("X")``."""
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
        return _literal(node.slice)
    if isinstance(node, ast.Call) and node.args:
        called = ast.unparse(node.func)
        if called in {"os.environ.get", "os.getenv", "settings.value", "value"}:
            return _literal(node.args[0])
    return None


def variables_read_in_code() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in PYTHON_SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            name = _environment_read(node)
            if name:
                found.setdefault(name, str(path.relative_to(BASE_DIR)))
    for path in SHELL_SOURCES:
        for name in re.findall(r"\$\{([A-Z][A-Z0-9_]*)", path.read_text()):
            found.setdefault(name, str(path.relative_to(BASE_DIR)))
    return found


class RecordingEnviron(dict):
    """The environment, noting every name asked for."""

    def __init__(self, values):
        super().__init__(values)
        self.asked: set[str] = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.asked.add(key)
        return super().__getitem__(key)


def test_every_variable_the_code_reads_is_in_the_settings_table(pages, monkeypatch):
    table = table_variables(pages["admin/settings.md"])
    environ = RecordingEnviron(os.environ)
    monkeypatch.setattr(os, "environ", environ)
    load_config({"SECRET_KEY": "x"})
    assert environ.asked, "load_config read nothing from os.environ: the recording missed it"
    in_code = variables_read_in_code()
    missing = {name: where for name, where in in_code.items() if name not in table and name not in NOT_SETTINGS}
    missing.update({name: "load_config" for name in environ.asked - table - NOT_SETTINGS})
    assert not missing, (
        f"read by the code, absent from docs/admin/settings.md (add them to core/settings.py): {missing}"
    )


def test_the_settings_table_lists_nothing_the_code_does_not_read(pages):
    table = table_variables(pages["admin/settings.md"])
    config = load_config({"SECRET_KEY": "x"})
    read = set(variables_read_in_code()) | {name for name in table if name in config}
    assert table - read == set()
    assert table == {s.name for s in settings.SETTINGS}


def test_a_setting_read_by_the_app_has_its_documented_default(monkeypatch):
    for setting in settings.SETTINGS:
        monkeypatch.delenv(setting.name, raising=False)
    monkeypatch.setenv("MAIL_RATE_PER_MINUTE", "250")
    config = load_config()
    assert config["MAIL_RATE_PER_MINUTE"] == 250
    assert config["SIGNING_RATE_LIMIT"] == "60 per minute"
    assert config["RENDER_TOGETHER"] is True and config["MAIL_USE_TLS"] is False
    assert config["SEAL_PKCS12_PATH"] is None
    assert config["APP_URL"] == "http://127.0.0.1:5000"


def config_keys_read_in_code() -> dict[str, str]:
    """Every upper-case key the package reads from an app's config: ``….config["X"]``, ``….config.get("X")``."""
    found: dict[str, str] = {}
    for path in PYTHON_SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            key = None
            if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("config"):
                key = _literal(node.slice)
            elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("config.get") and node.args:
                key = _literal(node.args[0])
            if key and key.isupper():
                found.setdefault(key, str(path.relative_to(BASE_DIR)))
    return found


def test_every_config_key_the_code_reads_is_a_setting_or_derived_from_them(pages):
    table = table_variables(pages["admin/settings.md"])
    config = load_config({"SECRET_KEY": "x"})
    keys = config_keys_read_in_code()
    assert {"MAIL_RATE_PER_MINUTE", "LOGIN_RATE_LIMIT", "VAR_DIR"} <= set(keys)
    unknown = {key: where for key, where in keys.items() if key not in table and key not in config}
    assert not unknown, f"read from the app's config but neither a setting nor derived by load_config: {unknown}"


def cli_commands_by_help(app) -> set[str]:
    """Every command and subcommand, as each group's own ``--help`` lists them."""
    runner = app.test_cli_runner()
    found: set[str] = set()

    def walk(path: list[str]) -> None:
        result = runner.invoke(args=[*path, "--help"])
        assert result.exit_code == 0, result.output
        listed = result.output.split("Commands:", 1)
        for line in listed[1].splitlines() if len(listed) == 2 else []:
            if line.startswith("  ") and line.strip():
                name = line.split()[0]
                found.add(" ".join(["flask", *path, name]))
                walk([*path, name])

    for name in app.cli.commands:
        found.add(f"flask {name}")
        walk([name])
    return found


def test_every_cli_command_is_in_the_reference(pages, docs_app):
    headings = set(re.findall(r"^## `(flask [a-z0-9 -]+)`$", pages["admin/cli.md"], re.MULTILINE))
    commands = cli_commands_by_help(docs_app)
    assert {"flask users create", "flask privacy erase", "flask jobs worker", "flask db upgrade"} <= commands
    assert commands - headings == set()


def test_every_served_operation_is_in_the_api_reference(pages, docs_app):
    served = docs_app.test_client().get("/api/v1/openapi.json")
    assert served.status_code == 200
    page = pages["api/reference.md"]
    for path, operations in served.get_json()["paths"].items():
        for method in operations:
            assert f"\n### {method.upper()} {path}\n" in page
    for event in served.get_json()["webhooks"]:
        assert f"\n### Event {event}\n" in page

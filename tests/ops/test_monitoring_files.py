"""The monitoring files: alert rules and their promtool unit tests, Prometheus' config, the Grafana dashboard, compose."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from bulksign.core.config import BASE_DIR
from tests.support.metrics import scrape_after_work

PROMETHEUS = BASE_DIR / "deploy" / "prometheus"
DASHBOARD = BASE_DIR / "deploy" / "grafana" / "bulksign.json"


def promtool(*args: str) -> subprocess.CompletedProcess:
    """Run promtool (Debian package ``prometheus``, installed by ``scripts/install-system-deps.sh --test``)."""
    assert shutil.which("promtool"), "promtool is missing: run scripts/install-system-deps.sh --test"
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=120)


def test_the_alert_rules_pass_promtool_and_their_unit_tests():
    checked = promtool("check", "rules", str(PROMETHEUS / "alerts.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", str(PROMETHEUS / "alerts.test.yml"))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_prometheus_config_is_valid(tmp_path):
    # Its paths are the container's: point them at the repository's files.
    config = (PROMETHEUS / "prometheus.yml").read_text()
    config = config.replace("/etc/prometheus/alerts.yml", str(PROMETHEUS / "alerts.yml"))
    config = config.replace("/etc/prometheus/metrics_token", str(tmp_path / "token"))
    (tmp_path / "token").write_text("t")
    (tmp_path / "prometheus.yml").write_text(config)
    checked = promtool("check", "config", str(tmp_path / "prometheus.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _names_in(expressions: list[str]) -> set[str]:
    return set(re.findall(r"\bbulksign_[a-z_]+\b", " ".join(expressions)))


def _rule_expressions() -> list[str]:
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def _dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def test_every_metric_the_rules_and_the_dashboard_read_is_exposed(make_app, users, smtp):
    app = make_app(BOUNCE_WEBHOOK_SECRET="hook")
    with app.app_context():
        client = app.test_client()
        client.post("/webhooks/bounces?token=hook", json={"email": "x@example.com", "reason": "550"})
        text = scrape_after_work(client, owner=users["staff"])
    exposed = set(re.findall(r"^(bulksign_[a-z_]+)", text, re.M))
    used = _names_in(_rule_expressions() + _dashboard_expressions())
    assert used - exposed == set()


def test_the_dashboard_is_grafana_json_on_the_provisioned_datasource():
    dashboard = json.loads(DASHBOARD.read_text())
    datasource = yaml.safe_load((BASE_DIR / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text())
    uid = datasource["datasources"][0]["uid"]
    panels = dashboard["panels"]
    assert dashboard["uid"] == "bulksign" and len({p["id"] for p in panels}) == len(panels)
    titles = " ".join(p["title"].lower() for p in panels)
    for subject in (
        "requests",
        "latency",
        "errors",
        "queued",
        "batches in flight",
        "mails per minute",
        "bounce",
        "workers",
    ):
        assert subject in titles, subject
    for panel in panels:
        assert set(panel["gridPos"]) == {"x", "y", "w", "h"} and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        for target in panel.get("targets", []):
            assert target["expr"].strip() and target["datasource"]["uid"] == uid


def test_compose_adds_prometheus_and_grafana_under_a_profile_that_is_off_by_default():
    compose = yaml.safe_load((BASE_DIR / "docker-compose.yml").read_text())
    services = compose["services"]
    assert services["prometheus"]["profiles"] == ["monitoring"] and services["grafana"]["profiles"] == ["monitoring"]
    assert [name for name, s in services.items() if "profiles" not in s] == [
        "postgres",
        "pgbouncer",
        "redis",
        "minio",
        "minio-bucket",
        "web",
        "worker-pdf",
        "worker-mail",
        "scheduler",
    ]
    for name in ("prometheus", "grafana"):
        for volume in services[name]["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (BASE_DIR / source).exists(), source
    assert "METRICS_TOKEN" in compose["x-app"]["environment"]


#: The services compose runs for the app's processes (the monitoring profile aside).
APP_SERVICES = ("web", "worker-pdf", "worker-mail", "scheduler")
#: What they stand on, each answering a health check before they start.
BACKING_SERVICES = ("postgres", "pgbouncer", "redis", "minio")


def test_compose_runs_what_the_readme_recommends_pgbouncer_and_an_s3_store_all_health_checked():
    services = yaml.safe_load((BASE_DIR / "docker-compose.yml").read_text())["services"]
    for name in APP_SERVICES:
        app = services[name]
        environment = app["environment"]
        # The app reaches PostgreSQL only through PgBouncer, on the port PgBouncer listens on.
        database = urlsplit(environment["DATABASE_URL"])
        assert (database.hostname, database.port) == (
            "pgbouncer",
            int(services["pgbouncer"]["environment"]["LISTEN_PORT"]),
        )
        # Documents in the MinIO bucket that the one-shot service makes, with the key it gives the app.
        assert environment["STORAGE_URL"].startswith("s3://bulksign/")
        assert urlsplit(environment["S3_ENDPOINT_URL"]).hostname == "minio"
        assert environment["AWS_ACCESS_KEY_ID"] and environment["AWS_SECRET_ACCESS_KEY"]
        assert app["depends_on"] == {
            **{backing: {"condition": "service_healthy"} for backing in BACKING_SERVICES},
            "minio-bucket": {"condition": "service_completed_successfully"},
        }
        assert "seccomp=unconfined" in app["security_opt"]  # the converters' sandbox makes user namespaces

    pgbouncer = services["pgbouncer"]["environment"]
    assert pgbouncer["POOL_MODE"] == "transaction" and pgbouncer["DB_HOST"] == "postgres"
    assert services["pgbouncer"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    bucket = services["minio-bucket"]
    assert "mc mb --ignore-existing store/bulksign" in bucket["command"][0]
    assert bucket["depends_on"] == {"minio": {"condition": "service_healthy"}}
    assert "restart" not in bucket  # a one-shot: done once it has run

    checks = {name: services[name]["healthcheck"]["test"] for name in BACKING_SERVICES}
    assert checks["postgres"][:2] == ["CMD", "pg_isready"] and checks["pgbouncer"][:2] == ["CMD", "pg_isready"]
    assert checks["redis"] == ["CMD", "redis-cli", "ping"]
    assert checks["minio"] == ["CMD", "mc", "ready", "local"]


def test_the_monitoring_guide_explains_every_alert():
    readme = (BASE_DIR / "docs" / "admin" / "monitoring.md").read_text()
    alerts = {
        rule["alert"]
        for group in yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())["groups"]
        for rule in group["rules"]
    }
    assert alerts and all(f"`{name}`" in readme for name in alerts)


def test_install_script_brings_promtool_for_the_tests():
    script = Path(BASE_DIR / "scripts/install-system-deps.sh").read_text()
    assert re.search(r"--test.*\bprometheus\b", script)

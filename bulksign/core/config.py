"""The app's settings: read from the environment by their list (``core.settings``), checked, and the values
the extensions want derived from them."""

from __future__ import annotations

import os
import secrets
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit
from zoneinfo import available_timezones

from bulksign.core.branding import BrandError, normalise_color
from bulksign.core.redis_client import check_url, rate_limit_storage
from bulksign.core.settings import BASE_DIR as BASE_DIR
from bulksign.core.settings import SETTINGS, read, switch_on, value
from bulksign.core.settings import VAR_DIR as VAR_DIR
from bulksign.core.settings import ConfigError as ConfigError


def _database_url(raw: str) -> str:
    # Heroku-style URLs say postgres://; SQLAlchemy wants the psycopg 3 driver named.
    if raw.startswith("postgres://"):
        raw = "postgresql://" + raw[len("postgres://") :]
    if raw.startswith("postgresql://"):
        raw = "postgresql+psycopg://" + raw[len("postgresql://") :]
    return raw


def _app_url(app_url: str, bind: str) -> str:
    """``APP_URL``, else the address ``make run`` binds (``BIND``): links in mail must reach the running app."""
    if app_url:
        return app_url.rstrip("/")
    host, _, port = (bind or "127.0.0.1:5000").strip().rpartition(":")
    # A wildcard bind is reachable on loopback; a link to 0.0.0.0 works in no mail client.
    host = "127.0.0.1" if host in ("", "0.0.0.0", "[::]", "::") else host
    return f"http://{host}:{port}"


def mail_server() -> tuple[str, int]:
    """``MAIL_SERVER`` and ``MAIL_PORT``: where the app sends mail, and where ``make run``'s catcher listens."""
    return value("MAIL_SERVER"), value("MAIL_PORT")


def load_config(overrides: dict | None = None) -> dict:
    """Read every setting from the environment, apply ``overrides``, and check them."""
    cfg: dict = {s.name: read(s, os.environ) for s in SETTINGS if s.in_config}
    cfg["APP_URL"] = _app_url(cfg["APP_URL"], value("BIND"))
    cfg["VAR_DIR"] = str(VAR_DIR)
    cfg.update(overrides or {})
    cfg["DATABASE_URL"] = _database_url(cfg["DATABASE_URL"])
    _check(cfg)
    _derive(cfg)
    return cfg


#: The languages the app and its mails speak (a batch's recipients read one of them).
LANGUAGES = ("en", "ru")


@cache
def time_zones() -> frozenset[str]:
    """The IANA zone names, read from the zone files once per process (the test suite builds an app per test)."""
    return frozenset(available_timezones())


def _check(cfg: dict) -> None:
    scheme = urlsplit(cfg["DATABASE_URL"]).scheme
    if not scheme.startswith(("sqlite", "postgresql")):
        raise ConfigError(f"DATABASE_URL must be a sqlite:/// or postgresql:// URL, got scheme {scheme!r}")
    problem = check_url(cfg["REDIS_URL"])
    if problem:
        raise ConfigError(f"REDIS_URL {problem}, got {cfg['REDIS_URL']!r}")
    if urlsplit(cfg["APP_URL"]).scheme not in {"http", "https"}:
        raise ConfigError(f"APP_URL must start with http:// or https://, got {cfg['APP_URL']!r}")
    if not 0 <= cfg["MAIL_RATE_PER_MINUTE"] <= 100_000:
        raise ConfigError("MAIL_RATE_PER_MINUTE must be between 0 (no limit) and 100000")
    if not 0 <= cfg["SMS_RATE_PER_MINUTE"] <= 100_000:
        raise ConfigError("SMS_RATE_PER_MINUTE must be between 0 (no limit) and 100000")
    if cfg["PHONE_REGION"] and not (len(cfg["PHONE_REGION"]) == 2 and cfg["PHONE_REGION"].isalpha()):
        raise ConfigError(f"PHONE_REGION must be a two-letter region such as DE, got {cfg['PHONE_REGION']!r}")
    if not 1 <= cfg["PREVIEW_TIMEOUT_SECONDS"] <= cfg["WEB_TIMEOUT_SECONDS"] - 10:
        raise ConfigError(
            "PREVIEW_TIMEOUT_SECONDS must be at least 1 and 10 less than WEB_TIMEOUT_SECONDS "
            "(gunicorn's timeout): a slower preview would get the web worker killed"
        )
    for name in (
        "PDF_CONCURRENCY",
        "RENDER_CHUNK_SIZE",
        "SEND_CHUNK_SIZE",
        "CHUNKS_QUEUED_PER_BATCH",
        "ATTACHMENT_MAX_MB",
    ):
        if cfg[name] < 1:
            raise ConfigError(f"{name} must be at least 1")
    if cfg["SMS_HTTP_URL"] and urlsplit(cfg["SMS_HTTP_URL"]).scheme not in {"http", "https"}:
        raise ConfigError(f"SMS_HTTP_URL must start with https:// (or http://), got {cfg['SMS_HTTP_URL']!r}")
    for name in ("WORKER_MAX_JOBS", "WORKER_MAX_RSS_MB"):
        if cfg[name] < 0:
            raise ConfigError(f"{name} must be 0 (no limit) or more")
    _check_brand(cfg)
    if cfg["ORG_TIMEZONE"] not in time_zones():
        raise ConfigError(f"ORG_TIMEZONE must be an IANA time zone such as Europe/Berlin, got {cfg['ORG_TIMEZONE']!r}")


#: Image types a logo file may have (the browser and mail clients show these).
LOGO_TYPES = {
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


def _check_brand(cfg: dict) -> None:
    if cfg.get("ORG_COLOR"):
        try:
            normalise_color(cfg["ORG_COLOR"])
        except BrandError as exc:
            raise ConfigError(str(exc)) from None
    logo = (cfg.get("ORG_LOGO") or "").strip()
    if logo and not logo.startswith(("http://", "https://")):
        path = Path(logo)
        if path.suffix.lower() not in LOGO_TYPES:
            raise ConfigError(
                f"ORG_LOGO must be an http(s) URL or an image file ({', '.join(LOGO_TYPES)}), got {logo!r}"
            )
        if not path.is_file():
            raise ConfigError(f"ORG_LOGO names a file that does not exist: {logo!r}")


def _derive(cfg: dict) -> None:
    """Settings that the extensions read under their own names."""
    if not cfg["SECRET_KEY"]:
        cfg["SECRET_KEY"] = _embedded_secret_key()
    cfg["SQLALCHEMY_DATABASE_URI"] = cfg["DATABASE_URL"]
    cfg.setdefault("SQLALCHEMY_ENGINE_OPTIONS", {"pool_pre_ping": True})
    if cfg["DATABASE_URL"].startswith("postgresql"):
        cfg["SQLALCHEMY_ENGINE_OPTIONS"] = engine_options_for_pooler(cfg["SQLALCHEMY_ENGINE_OPTIONS"])
    cfg["MAX_CONTENT_LENGTH"] = cfg["MAX_UPLOAD_MB"] * 1024 * 1024
    if "RATELIMIT_STORAGE_URI" not in cfg:
        cfg["RATELIMIT_STORAGE_URI"], cfg["RATELIMIT_STORAGE_OPTIONS"] = rate_limit_storage(cfg["REDIS_URL"])
    cfg["RATELIMIT_HEADERS_ENABLED"] = True
    # Flask-Limiter would raise every answer's Retry-After to its window's end (a 409's "try again in 5 s" came as
    # ~60): its own goes under another name, and a 429 says when to come back (``seconds_until_limit_resets``).
    cfg["RATELIMIT_HEADER_RETRY_AFTER"] = "X-RateLimit-Retry-After"
    # A Redis outage must not turn logins and signing pages into 500s.
    cfg["RATELIMIT_SWALLOW_ERRORS"] = True
    # The in-memory fallback keeps limits while Redis is away, at the cost of an expiry timer thread;
    # processes that serve no requests (workers, scheduler, one-shot commands) turn it off (wsgi.py).
    cfg.setdefault("RATELIMIT_IN_MEMORY_FALLBACK_ENABLED", True)
    cfg["RQ_DASHBOARD_REDIS_URL"] = cfg["REDIS_URL"]
    # Behind TLS (APP_URL https) cookies never travel over plain http, links are built https, and browsers
    # are told to come back over https only; SESSION_COOKIE_SECURE=false still opts out (a TLS-less test rig).
    https = urlsplit(cfg["APP_URL"]).scheme == "https"
    secure = cfg["SESSION_COOKIE_SECURE"]
    cfg["SESSION_COOKIE_SECURE"] = https if secure in ("", None) else switch_on(str(secure))
    cfg["PREFERRED_URL_SCHEME"] = "https" if https else "http"
    cfg["HSTS"] = f"max-age={cfg['HSTS_SECONDS']}" if https and cfg["HSTS_SECONDS"] > 0 else None
    cfg["SESSION_COOKIE_HTTPONLY"] = True
    cfg["SESSION_COOKIE_SAMESITE"] = "Lax"
    cfg["REMEMBER_COOKIE_HTTPONLY"] = True
    cfg["REMEMBER_COOKIE_SAMESITE"] = "Lax"
    # "Remember me" is a long-lived login: behind TLS it must not travel over plain http either.
    cfg["REMEMBER_COOKIE_SECURE"] = cfg["SESSION_COOKIE_SECURE"]
    cfg["WTF_CSRF_TIME_LIMIT"] = None
    cfg["BABEL_DEFAULT_LOCALE"] = "en"
    cfg["LANGUAGES"] = LANGUAGES


def engine_options_for_pooler(options: dict) -> dict:
    """``create_engine`` options that stay correct behind PgBouncer in transaction pooling: no server-side prepared
    statements, always (why: docs/architecture/core.md)."""
    connect_args = {**options.get("connect_args", {}), "prepare_threshold": None}
    return {**options, "connect_args": connect_args}


def _embedded_secret_key() -> str:
    """A key kept under var/ so that sessions survive a restart of the embedded setup."""
    path = VAR_DIR / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        key = secrets.token_hex(32)
        path.write_text(key)
        path.chmod(0o600)
        return key

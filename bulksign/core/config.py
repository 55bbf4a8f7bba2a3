"""Settings from environment variables (12-factor), with embedded defaults for a first run."""

from __future__ import annotations

import os
import secrets
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit
from zoneinfo import available_timezones

from bulksign.core.branding import BrandError, normalise_color
from bulksign.core.redis_client import check_url, rate_limit_storage

#: The project folder; embedded defaults keep their files under ``var/`` here.
BASE_DIR = Path(__file__).resolve().parents[2]  # the checkout: bulksign/core/config.py
VAR_DIR = Path(os.environ.get("BULKSIGN_VAR_DIR", BASE_DIR / "var"))


class ConfigError(RuntimeError):
    """A setting is missing or malformed; the message names the variable."""


def _bool(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None


def _database_url(raw: str) -> str:
    # Heroku-style URLs say postgres://; SQLAlchemy wants the psycopg 3 driver named.
    if raw.startswith("postgres://"):
        raw = "postgresql://" + raw[len("postgres://") :]
    if raw.startswith("postgresql://"):
        raw = "postgresql+psycopg://" + raw[len("postgresql://") :]
    return raw


def _app_url(env) -> str:
    """``APP_URL``, else the address ``make run`` binds (``BIND``): links in mail must reach the running app."""
    if env.get("APP_URL"):
        return env["APP_URL"].rstrip("/")
    host, _, port = (env.get("BIND") or "127.0.0.1:5000").strip().rpartition(":")
    # A wildcard bind is reachable on loopback; a link to 0.0.0.0 works in no mail client.
    host = "127.0.0.1" if host in ("", "0.0.0.0", "[::]", "::") else host
    return f"http://{host}:{port}"


def mail_server() -> tuple[str, int]:
    """``MAIL_SERVER`` and ``MAIL_PORT``: where the app sends mail, and where ``make run``'s catcher listens."""
    return os.environ.get("MAIL_SERVER", "127.0.0.1"), _int("MAIL_PORT", 1025)


def load_config(overrides: dict | None = None) -> dict:
    """Read every setting from the environment, apply ``overrides``, and check them."""
    env = os.environ
    cfg: dict = {
        "SECRET_KEY": env.get("SECRET_KEY", ""),
        "DATABASE_URL": _database_url(env.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'bulksign.db'}")),
        "REDIS_URL": env.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
        "APP_URL": _app_url(env),
        "MAIL_SERVER": mail_server()[0],
        "MAIL_PORT": mail_server()[1],
        "MAIL_USERNAME": env.get("MAIL_USERNAME") or None,
        "MAIL_PASSWORD": env.get("MAIL_PASSWORD") or None,
        "MAIL_USE_TLS": _bool(env.get("MAIL_USE_TLS", "false")),
        "MAIL_USE_SSL": _bool(env.get("MAIL_USE_SSL", "false")),
        "MAIL_DEFAULT_SENDER": env.get("MAIL_DEFAULT_SENDER", "Bulksign <no-reply@bulksign.local>"),
        "MAIL_TIMEOUT_SECONDS": _int("MAIL_TIMEOUT_SECONDS", 30),
        "MAIL_RATE_PER_MINUTE": _int("MAIL_RATE_PER_MINUTE", 100),
        # DKIM signing of every outgoing mail (off while DKIM_DOMAIN is empty).
        "DKIM_DOMAIN": env.get("DKIM_DOMAIN", ""),
        "DKIM_SELECTOR": env.get("DKIM_SELECTOR", ""),
        "DKIM_PRIVATE_KEY": env.get("DKIM_PRIVATE_KEY", ""),
        "DKIM_PRIVATE_KEY_PATH": env.get("DKIM_PRIVATE_KEY_PATH", ""),
        "STORAGE_URL": env.get("STORAGE_URL", str(VAR_DIR / "storage")),
        "S3_ENDPOINT_URL": env.get("S3_ENDPOINT_URL") or None,
        "PDF_CONCURRENCY": _int("PDF_CONCURRENCY", os.cpu_count() or 1),
        "PDF_TIMEOUT_SECONDS": _int("PDF_TIMEOUT_SECONDS", 60),
        # A preview renders in the web request: it must give up before gunicorn kills the worker (its --timeout,
        # WEB_TIMEOUT_SECONDS, read by gunicorn.conf.py too) and answer a 422 instead.
        "PREVIEW_TIMEOUT_SECONDS": _int("PREVIEW_TIMEOUT_SECONDS", 15),
        "WEB_TIMEOUT_SECONDS": _int("WEB_TIMEOUT_SECONDS", 30),
        # Work per job: per-job costs are paid once per chunk; a killed worker redoes at most one chunk. 40: the
        # chunk is one wkhtmltopdf run (RENDER_TOGETHER), and bench_pipeline at 600 gave 1.8-3.0x the bare loop at
        # 40, 1.4-2.1x at 20, 1.1x at 10 (README).
        "RENDER_CHUNK_SIZE": _int("RENDER_CHUNK_SIZE", 40),
        # A render job's HTML documents from one wkhtmltopdf run, split per recipient (documents/together.py).
        "RENDER_TOGETHER": _bool(env.get("RENDER_TOGETHER", "true")),
        "SEND_CHUNK_SIZE": _int("SEND_CHUNK_SIZE", 20),
        # Chunk jobs a batch keeps waiting per step: the queues serve waiting batches in turn (work/pipeline.py).
        "CHUNKS_QUEUED_PER_BATCH": _int("CHUNKS_QUEUED_PER_BATCH", 2),
        "SEAL_PKCS12_PATH": env.get("SEAL_PKCS12_PATH") or None,
        "SEAL_PKCS12_PASSWORD": env.get("SEAL_PKCS12_PASSWORD") or None,
        # RFC 3161 time-stamps on every seal (PAdES B-T; B-LT with the TSA's CA certificate).
        "TSA_URL": env.get("TSA_URL", ""),
        "TSA_USERNAME": env.get("TSA_USERNAME", ""),
        "TSA_PASSWORD": env.get("TSA_PASSWORD", ""),
        "TSA_CA_CERT_PATH": env.get("TSA_CA_CERT_PATH", ""),
        "TSA_TIMEOUT_SECONDS": _int("TSA_TIMEOUT_SECONDS", 10),
        # One-time codes by SMS: an HTTP provider when the URL is set, else the development provider (the
        # log and the caught-mail folder), so `make run` shows the codes without an SMS account.
        "SMS_HTTP_URL": env.get("SMS_HTTP_URL", ""),
        "SMS_HTTP_TOKEN": env.get("SMS_HTTP_TOKEN", ""),
        "SMS_TIMEOUT_SECONDS": _int("SMS_TIMEOUT_SECONDS", 10),
        # Invitations and reminders by text: Twilio's Messages API when the account SID is set (else the HTTP
        # gateway above), the global text throttle, the delivery webhook's secret, and the region national phone
        # numbers of a file are read in (empty: by the batch's language).
        "TWILIO_ACCOUNT_SID": env.get("TWILIO_ACCOUNT_SID", ""),
        "TWILIO_AUTH_TOKEN": env.get("TWILIO_AUTH_TOKEN", ""),
        "TWILIO_FROM": env.get("TWILIO_FROM", ""),
        "TWILIO_API_URL": env.get("TWILIO_API_URL", "https://api.twilio.com"),
        "SMS_RATE_PER_MINUTE": _int("SMS_RATE_PER_MINUTE", 30),
        "SMS_WEBHOOK_SECRET": env.get("SMS_WEBHOOK_SECRET", ""),
        "PHONE_REGION": env.get("PHONE_REGION", ""),
        "BOUNCE_WEBHOOK_SECRET": env.get("BOUNCE_WEBHOOK_SECRET", ""),
        "METRICS_TOKEN": env.get("METRICS_TOKEN", ""),
        # Error tracking: off when the DSN is empty; recipients' addresses are sent only with SENTRY_SEND_PII.
        "SENTRY_DSN": env.get("SENTRY_DSN", ""),
        "SENTRY_ENVIRONMENT": env.get("SENTRY_ENVIRONMENT", "production"),
        "SENTRY_SEND_PII": _bool(env.get("SENTRY_SEND_PII", "false")),
        # Outgoing webhooks may reach this host itself (loopback); link-local addresses never.
        "WEBHOOK_ALLOW_LOCAL": _bool(env.get("WEBHOOK_ALLOW_LOCAL", "false")),
        # Work younger than this is left to its job even if none is seen (the commit→enqueue gap); older work
        # whose job is dead (its beat silent for 30 s, or lost with Redis) is queued again.
        "RECONCILE_AFTER_SECONDS": _int("RECONCILE_AFTER_SECONDS", 20),
        # A countersigner's digest ("N documents wait for your signature") at most this often while more arrive.
        "COUNTERSIGN_DIGEST_HOURS": _int("COUNTERSIGN_DIGEST_HOURS", 24),
        "LOGIN_RATE_LIMIT": env.get("LOGIN_RATE_LIMIT", "10 per minute"),
        "SIGNING_RATE_LIMIT": env.get("SIGNING_RATE_LIMIT", "60 per minute"),
        "SIGNING_PAGE_IMAGE_RATE_LIMIT": env.get("SIGNING_PAGE_IMAGE_RATE_LIMIT", "600 per minute"),
        "API_RATE_LIMIT": env.get("API_RATE_LIMIT", "600 per minute"),
        # Reverse proxies in front of the app that append to X-Forwarded-For (0: clients connect directly).
        "PROXY_HOPS": _int("PROXY_HOPS", 0),
        "PASSWORD_HASH_METHOD": env.get("PASSWORD_HASH_METHOD", "scrypt"),
        # Retries: RQ waits RETRY_BACKOFF_SECONDS × 1, 2, 4 …; the jobs give up after these many tries.
        "RETRY_BACKOFF_SECONDS": _int("RETRY_BACKOFF_SECONDS", 10),
        "RENDER_MAX_ATTEMPTS": _int("RENDER_MAX_ATTEMPTS", 3),
        "MAIL_MAX_ATTEMPTS": _int("MAIL_MAX_ATTEMPTS", 5),
        "SEAL_MAX_ATTEMPTS": _int("SEAL_MAX_ATTEMPTS", 3),
        # The throttle's window (MAIL_RATE_PER_MINUTE per this many seconds) and how long a send may wait for it.
        "MAIL_RATE_WINDOW_SECONDS": _int("MAIL_RATE_WINDOW_SECONDS", 60),
        "THROTTLE_MAX_WAIT_SECONDS": _int("THROTTLE_MAX_WAIT_SECONDS", 120),
        # A worker ends cleanly after this many jobs, or after a job that left it above this size
        # (0: never); its supervisor starts a fresh one.
        "WORKER_MAX_JOBS": _int("WORKER_MAX_JOBS", 0),
        "WORKER_MAX_RSS_MB": _int("WORKER_MAX_RSS_MB", 1024),
        "MAX_UPLOAD_MB": _int("MAX_UPLOAD_MB", 50),
        # A recipients file checked but never made into a batch is deleted this long after its upload (one made
        # into a batch goes with the batch's purge).
        "UPLOAD_KEEP_HOURS": _int("UPLOAD_KEEP_HOURS", 24),
        # Largest file a signer attaches to an attachment field.
        "ATTACHMENT_MAX_MB": _int("ATTACHMENT_MAX_MB", 10),
        # Empty: secure when APP_URL is https (see _derive).
        "SESSION_COOKIE_SECURE": env.get("SESSION_COOKIE_SECURE", ""),
        "HSTS_SECONDS": _int("HSTS_SECONDS", 31_536_000),
        "VAR_DIR": str(VAR_DIR),
        "LOG_JSON": _bool(env.get("LOG_JSON", "true")),
        # The organisation on staff pages, signing pages and mails: a name, a logo (http(s) URL or image file) and
        # a hex colour; empty means the bundled Bulksign look.
        "ORG_NAME": env.get("ORG_NAME", ""),
        "ORG_LOGO": env.get("ORG_LOGO", ""),
        "ORG_COLOR": env.get("ORG_COLOR", ""),
        # The organisation's time zone (an IANA name): what a new batch's form offers its recipients first.
        "ORG_TIMEZONE": env.get("ORG_TIMEZONE", "UTC"),
    }
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
    cfg["SESSION_COOKIE_SECURE"] = https if secure in ("", None) else _bool(str(secure))
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

"""Every environment variable the app reads, listed once: its default, how it is read and what it means.

``config.load_config`` reads the app's settings from this list, the other readers (the converters' paths, gunicorn's
timeout, the container's entrypoint) name theirs here too, and the documentation's settings table is generated from
it, so the table cannot drift from the code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

#: The project folder; embedded defaults keep their files under ``var/`` here.
BASE_DIR = Path(__file__).resolve().parents[2]  # the checkout: bulksign/core/settings.py
VAR_DIR = Path(os.environ.get("BULKSIGN_VAR_DIR") or BASE_DIR / "var")


class ConfigError(RuntimeError):
    """A setting is missing or malformed; the message names the variable."""


class Kind(StrEnum):
    """How a variable's text is read."""

    TEXT = "text"
    #: Empty or unset is ``None``.
    OPTIONAL = "optional"
    NUMBER = "whole number"
    #: ``1``, ``true``, ``yes`` or ``on`` (any case) is true, anything else false.
    SWITCH = "true/false"


@dataclass(frozen=True)
class Setting:
    """One environment variable: ``default`` as the environment would give it, ``shown`` when the table says it
    otherwise (a default worked out at start), ``reader`` when something other than the app's config reads it."""

    name: str
    default: str
    meaning: str
    kind: Kind = Kind.TEXT
    shown: str = ""
    reader: str = ""

    @property
    def in_config(self) -> bool:
        return not self.reader


def switch_on(text: str) -> bool:
    """Whether a switch's text says on."""
    return text.strip().lower() in {"1", "true", "yes", "on"}


def read(setting: Setting, env: Mapping[str, str]) -> Any:
    """The setting's value in ``env``, read by its kind; a malformed number is a ``ConfigError`` naming it."""
    raw = env.get(setting.name)
    if setting.kind is Kind.OPTIONAL:
        return raw or None
    if setting.kind is Kind.SWITCH:
        return switch_on(setting.default if raw is None else raw)
    if setting.kind is Kind.NUMBER:
        text = setting.default if raw is None or raw == "" else raw
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{setting.name} must be a whole number, got {text!r}") from None
    return setting.default if raw is None else raw


def value(name: str) -> Any:
    """A setting read from this process's environment now (for readers outside the app's config)."""
    return read(BY_NAME[name], os.environ)


_S = Setting
_N, _B, _O = Kind.NUMBER, Kind.SWITCH, Kind.OPTIONAL

#: The settings by topic, in the order the table shows them.
SECTIONS: tuple[tuple[str, tuple[Setting, ...]], ...] = (
    (
        "Where things live",
        (
            _S(
                "DATABASE_URL",
                f"sqlite:///{VAR_DIR / 'bulksign.db'}",
                "`postgresql://user:password@host/db` in production: PostgreSQL, or PgBouncer in transaction pooling.",
                shown="sqlite:///var/bulksign.db",
            ),
            _S(
                "REDIS_URL",
                "redis://127.0.0.1:6379/0",
                "Queues, the mail throttle, rate limits, the scheduler. With Sentinel: "
                "`redis+sentinel://[:password@]host:26379,host2:26379/master-name[?db=N]` (every connection asks the "
                "sentinels for the master, so a failover needs no restart).",
            ),
            _S(
                "STORAGE_URL",
                str(VAR_DIR / "storage"),
                "Where documents are kept: a folder, or `s3://bucket/prefix` (credentials from the usual "
                "`AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`).",
                shown="var/storage",
            ),
            _S(
                "S3_ENDPOINT_URL",
                "",
                "An S3-compatible store other than AWS (MinIO, Ceph), e.g. `http://minio:9000`.",
                _O,
            ),
            _S(
                "SECRET_KEY",
                "",
                "Signs sessions and derives signing links and one-time codes. Set it in production, the same on every "
                "host.",
                shown="generated into var/secret_key",
            ),
            _S(
                "APP_URL",
                "",
                "The public base of signing links, e.g. `https://sign.example.com`; https turns on secure cookies and "
                "HSTS.",
                shown="http://$BIND",
            ),
            _S(
                "BIND",
                "127.0.0.1:5000",
                "The address `make run` serves on; `APP_URL` defaults to it.",
                reader="Makefile, APP_URL's default",
            ),
            _S(
                "BULKSIGN_VAR_DIR",
                "",
                "The folder of the embedded defaults (SQLite database, storage, caught mail, self-signed seal).",
                shown="var/ in the checkout",
                reader="at import (core/settings.py)",
            ),
        ),
    ),
    (
        "Mail",
        (
            _S("MAIL_SERVER", "127.0.0.1", "The SMTP server (`make run` catches mail there when it is this host)."),
            _S("MAIL_PORT", "1025", "Its port.", _N),
            _S("MAIL_USERNAME", "", "SMTP login.", _O),
            _S("MAIL_PASSWORD", "", "SMTP password.", _O),
            _S("MAIL_USE_TLS", "false", "STARTTLS to the SMTP server.", _B),
            _S("MAIL_USE_SSL", "false", "SMTP over TLS from the start (port 465).", _B),
            _S("MAIL_DEFAULT_SENDER", "Bulksign <no-reply@bulksign.local>", "The From: of every mail."),
            _S("MAIL_TIMEOUT_SECONDS", "30", "How long one SMTP exchange may take.", _N),
            _S("MAIL_RATE_PER_MINUTE", "100", "Mails per window across all workers (0: no limit).", _N),
            _S("MAIL_RATE_WINDOW_SECONDS", "60", "The throttle's window.", _N),
            _S(
                "THROTTLE_MAX_WAIT_SECONDS",
                "120",
                "Longest a send waits for the throttle before it is queued again.",
                _N,
            ),
            _S("DKIM_DOMAIN", "", "Sign every mail with DKIM for this domain (the From domain); empty: no signing."),
            _S("DKIM_SELECTOR", "", "The DKIM selector (`flask mail dkim-keygen` prints its DNS record)."),
            _S("DKIM_PRIVATE_KEY", "", "The RSA private key as PEM text (`\\n` for line breaks)."),
            _S("DKIM_PRIVATE_KEY_PATH", "", "Or the key's file."),
            _S(
                "BOUNCE_WEBHOOK_SECRET",
                "",
                "Shared secret of `POST /webhooks/bounces` (SES/SNS, Postmark or plain JSON); empty: webhook off.",
            ),
        ),
    ),
    (
        "Text messages",
        (
            _S(
                "SMS_HTTP_URL",
                "",
                'SMS gateway: each text is POSTed as JSON `{"to", "text"}`; any 2xx is taken. Empty: texts land in '
                "the caught-mail folder (`/admin/mailbox`).",
            ),
            _S("SMS_HTTP_TOKEN", "", "Sent as `Authorization: Bearer <token>` to the gateway."),
            _S("SMS_TIMEOUT_SECONDS", "10", "How long the gateway may take to answer (the job retries).", _N),
            _S("SMS_RATE_PER_MINUTE", "30", "Texts per minute across all workers, apart from mail (0: no limit).", _N),
            _S(
                "SMS_WEBHOOK_SECRET",
                "",
                "Shared secret of `POST /webhooks/sms` (delivery reports and STOP replies); empty: webhook off. "
                "With Twilio the webhook checks `X-Twilio-Signature` instead.",
            ),
            _S("TWILIO_ACCOUNT_SID", "", "Send texts through Twilio's Messages API instead of `SMS_HTTP_URL`."),
            _S("TWILIO_AUTH_TOKEN", "", "Twilio's auth token (also checks its webhook's signature)."),
            _S("TWILIO_FROM", "", "The number or sender id texts come from."),
            _S("TWILIO_API_URL", "https://api.twilio.com", "Where Twilio's API is reached."),
            _S(
                "PHONE_REGION",
                "",
                "Two letters (e.g. `DE`): the region national numbers of a recipients file are read in; empty: by "
                "the batch's language (`ru`: RU, else GB). Numbers with `+` are read as written.",
            ),
        ),
    ),
    (
        "Documents and seals",
        (
            _S("PDF_CONCURRENCY", str(os.cpu_count() or 1), "PDF renders in parallel per host.", _N, "number of cores"),
            _S("PDF_TIMEOUT_SECONDS", "60", "How long one render (wkhtmltopdf, LibreOffice) may take.", _N),
            _S(
                "RENDER_CHUNK_SIZE",
                "40",
                "Documents one render job renders (one wkhtmltopdf run or LibreOffice conversion with "
                "`RENDER_TOGETHER`); a killed worker redoes at most one chunk.",
                _N,
            ),
            _S(
                "RENDER_TOGETHER",
                "true",
                "Render a chunk's HTML or Word documents in one run, split and checked per recipient "
                "(architecture: HTML and Word rendered together); false: one run per document.",
                _B,
            ),
            _S(
                "CONVERTER_SANDBOX",
                "bwrap",
                "`off` runs wkhtmltopdf and LibreOffice without their bubblewrap sandbox (no network, none of our "
                "files): only where namespaces cannot be had.",
                reader="documents/sandbox.py",
            ),
            _S("BWRAP_PATH", "bwrap", "The bubblewrap program.", reader="documents/sandbox.py, at import"),
            _S(
                "WKHTMLTOPDF_PATH",
                "/usr/bin/wkhtmltopdf",
                "The wkhtmltopdf program.",
                reader="documents/pdf.py, at import",
            ),
            _S("SOFFICE_PATH", "soffice", "The LibreOffice program.", reader="documents/libreoffice.py, at import"),
            _S(
                "UNO_PYTHON",
                "/usr/bin/python3",
                "The Python that has LibreOffice's `uno` module (unoserver runs under it).",
                reader="documents/libreoffice.py, at import",
            ),
            _S(
                "LIBREOFFICE_MAX_DOCUMENTS",
                "500",
                "A warm LibreOffice is restarted after this many conversions.",
                _N,
                reader="documents/libreoffice.py, at import",
            ),
            _S(
                "SEAL_PKCS12_PATH",
                "",
                "The organisation's sealing certificate (PKCS#12); the same file on every host. Empty: a "
                "self-signed one made under `var/seal/`.",
                _O,
            ),
            _S("SEAL_PKCS12_PASSWORD", "", "Its password.", _O),
            _S("TSA_URL", "", "RFC 3161 time-stamp authority: every seal is time-stamped (PAdES B-T); empty: B-B."),
            _S("TSA_USERNAME", "", "The TSA's login, if it asks for one."),
            _S("TSA_PASSWORD", "", "Its password."),
            _S(
                "TSA_CA_CERT_PATH",
                "",
                "The TSA's CA certificates (PEM): seals also embed their validation data (B-LT) and /verify shows the "
                "trusted time.",
            ),
            _S("TSA_TIMEOUT_SECONDS", "10", "How long the TSA may take to answer.", _N),
        ),
    ),
    (
        "Workers and the pipeline",
        (
            _S("SEND_CHUNK_SIZE", "20", "Mails one send job sends.", _N),
            _S(
                "CHUNKS_QUEUED_PER_BATCH",
                "2",
                "Chunk jobs a batch keeps waiting per step, so the workers serve waiting batches in turn; at least "
                "the number of render workers of one host.",
                _N,
            ),
            _S("RETRY_BACKOFF_SECONDS", "10", "Transient failures retry after 1, 2, 4 … × this.", _N),
            _S("RENDER_MAX_ATTEMPTS", "3", "Tries before a document is failed with its reason.", _N),
            _S(
                "MAIL_MAX_ATTEMPTS",
                "5",
                "Tries before a mail is failed; an unreachable mail server uses up none (its mails wait).",
                _N,
            ),
            _S("SEAL_MAX_ATTEMPTS", "3", "Tries before a seal is failed.", _N),
            _S(
                "RECONCILE_AFTER_SECONDS",
                "20",
                "Work younger than this is left to the job being queued for it; older work whose job is dead is "
                "queued again by the reconciler (every 30 s).",
                _N,
            ),
            _S(
                "COUNTERSIGN_DIGEST_HOURS",
                "24",
                "A countersigner gets at most one digest per this many hours while more documents arrive.",
                _N,
            ),
            _S(
                "WORKER_MAX_JOBS",
                "0",
                "A worker process ends cleanly after this many jobs and is replaced (0: never).",
                _N,
            ),
            _S(
                "WORKER_MAX_RSS_MB",
                "1024",
                "… or after a job that left it above this resident size (0: never).",
                _N,
            ),
        ),
    ),
    (
        "Web, limits and security",
        (
            _S(
                "WEB_TIMEOUT_SECONDS",
                "30",
                "gunicorn's `--timeout` (gunicorn.conf.py reads it too).",
                _N,
            ),
            _S("WEB_WORKERS", "4", "gunicorn processes in the container.", _N, reader="scripts/docker-entrypoint.sh"),
            _S(
                "PREVIEW_TIMEOUT_SECONDS",
                "15",
                "A template's PDF preview gives up after this (422); at least 10 s below `WEB_TIMEOUT_SECONDS`.",
                _N,
            ),
            _S("MAX_UPLOAD_MB", "50", "Largest request body, so largest recipients file.", _N),
            _S(
                "UPLOAD_KEEP_HOURS",
                "24",
                "A recipients file never made into a batch, and a Word check, is deleted this long after its upload.",
                _N,
            ),
            _S("ATTACHMENT_MAX_MB", "10", "Largest file a signer attaches to an attachment field.", _N),
            _S("LOGIN_RATE_LIMIT", "10 per minute", "Per visitor IP on the login and password-reset forms."),
            _S("SIGNING_RATE_LIMIT", "60 per minute", "Per visitor IP on `/sign/*` (but page images) and `/verify`."),
            _S("SIGNING_PAGE_IMAGE_RATE_LIMIT", "600 per minute", "Per visitor IP on a document's page images."),
            _S("API_RATE_LIMIT", "600 per minute", "Per API key over `/api/v1`; past it 429 with `Retry-After`."),
            _S(
                "PROXY_HOPS",
                "0",
                "Trusted reverse proxies adding `X-Forwarded-For` (real IPs for rate limits and the audit trail).",
                _N,
            ),
            _S(
                "SESSION_COOKIE_SECURE",
                "",
                "Cookies only over https; empty: on when `APP_URL` is https (`false` opts out).",
            ),
            _S(
                "HSTS_SECONDS", "31536000", "`Strict-Transport-Security` max-age when `APP_URL` is https (0: none).", _N
            ),
            _S("PASSWORD_HASH_METHOD", "scrypt", "How staff passwords are hashed (a Werkzeug method name)."),
            _S(
                "WEBHOOK_ALLOW_LOCAL",
                "false",
                "Let outgoing webhooks reach this host (loopback). Link-local and cloud metadata addresses are "
                "refused always, checked on the connected socket.",
                _B,
            ),
        ),
    ),
    (
        "Monitoring",
        (
            _S("METRICS_TOKEN", "", "Bearer token for `/metrics`; empty: loopback only (set one behind a proxy)."),
            _S("SENTRY_DSN", "", "Send unhandled errors (web, jobs, scheduler) to Sentry; empty: off."),
            _S("SENTRY_ENVIRONMENT", "production", "The environment errors are filed under."),
            _S(
                "SENTRY_SEND_PII",
                "false",
                "Also send recipients' addresses and the staff user; tokens, secrets, cookies and bodies never leave.",
                _B,
            ),
            _S("LOG_JSON", "true", "Log one JSON object a line; false: plain text.", _B),
        ),
    ),
    (
        "Look",
        (
            _S("ORG_NAME", "", "The organisation's name on staff pages, signing pages and mails.", shown="Bulksign"),
            _S(
                "ORG_LOGO",
                "",
                "A logo: an `https://` URL or an image file on the host (.svg .png .jpg .gif .webp).",
                shown="the bundled logo",
            ),
            _S(
                "ORG_COLOR",
                "",
                "A hex colour; text on it and links derived from it keep WCAG AA contrast.",
                shown="#2357d9",
            ),
            _S(
                "ORG_TIMEZONE",
                "UTC",
                "An IANA zone such as `Europe/Berlin`: the new-batch form offers it first (the API's default stays "
                "UTC).",
            ),
        ),
    ),
)

SETTINGS: tuple[Setting, ...] = tuple(s for _, group in SECTIONS for s in group)
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}

"""Unhandled errors to Sentry (``SENTRY_DSN``; off when empty), with secrets and recipients' addresses taken out.
More in docs/architecture/core.md."""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from flask import Flask

from bulksign.core.logs import EMAIL_ADDRESS, current_request_id, redact_query, redact_text
from bulksign.core.version import __version__

if TYPE_CHECKING:
    from sentry_sdk.types import Event

logger = logging.getLogger(__name__)

#: Any key whose name says it holds a secret or a mail body: its value is dropped whole.
SECRET_KEY_NAME = re.compile(r"pass|secret|token|auth|cookie|api.?key|csrf|session|signature|body|html", re.I)
REDACTED = "<redacted>"


def release() -> str:
    return f"bulksign@{__version__}"


def init_app(app: Flask) -> None:
    """Start the SDK for this process when ``SENTRY_DSN`` is set."""
    dsn = app.config.get("SENTRY_DSN") or ""
    if not dsn:
        return
    import sentry_sdk
    from sentry_sdk.integrations.flask import FlaskIntegration
    from sentry_sdk.integrations.logging import LoggingIntegration
    from sentry_sdk.integrations.rq import RqIntegration

    send_pii = bool(app.config.get("SENTRY_SEND_PII"))
    sentry_sdk.init(
        dsn=dsn,
        environment=app.config.get("SENTRY_ENVIRONMENT") or "production",
        release=release(),
        integrations=[
            FlaskIntegration(),
            RqIntegration(),
            # Log lines stay breadcrumbs: errors the code handles (a bounced mail) are not incidents.
            LoggingIntegration(level=logging.INFO, event_level=None),
        ],
        # No request bodies (passwords, signatures, files) and no frame variables (mail bodies, keys), ever.
        data_collection={"user_info": send_pii, "http_bodies": [], "stack_frame_variables": False},
        before_send=lambda event, hint: cast("Event", scrub(cast(dict, event), send_pii=send_pii)),
        traces_sample_rate=None,
    )
    logger.info("error tracking on", extra={"fields": {"environment": app.config.get("SENTRY_ENVIRONMENT")}})


def capture(
    error, *, level: str = "error", fingerprint: Sequence[str] | None = None, extra: dict | None = None, **tags: str
) -> None:
    """Report a caught error, an exception or an ``exc_info`` tuple (no-op when Sentry is off); every event with
    the same ``fingerprint`` is one Sentry issue, whatever its message or stack."""
    import sentry_sdk

    with sentry_sdk.new_scope() as scope:
        scope.level = level
        if fingerprint:
            scope.fingerprint = list(fingerprint)
        for name, value in tags.items():
            scope.set_tag(name, value)
        for name, value in (extra or {}).items():
            scope.set_extra(name, value)
        sentry_sdk.capture_exception(error)


@dataclass(frozen=True)
class Fault:
    """An error the operator must act on, and the kind of failure it is."""

    #: The Sentry fingerprint, e.g. ``("storage-write", "s3")``: what makes failures one issue.
    fingerprint: tuple[str, ...]
    error: BaseException


class OperatorFaults:
    """The faults met while working through one chunk, sent to Sentry once per kind (one fingerprint each) when the
    chunk settles, with how many items each failed."""

    def __init__(self) -> None:
        self._first: dict[tuple[str, ...], BaseException] = {}
        self._counts: Counter[tuple[str, ...]] = Counter()

    def add(self, fault: Fault) -> None:
        self._first.setdefault(fault.fingerprint, fault.error)
        self._counts[fault.fingerprint] += 1

    def report(self, **tags: str) -> None:
        for fingerprint, error in self._first.items():
            capture(error, fingerprint=fingerprint, extra={"failed_items": self._counts[fingerprint]}, **tags)


@contextmanager
def job_scope(job):
    """Around one job: its errors carry its id, and the id of the request that enqueued it, if one did."""
    import sentry_sdk

    with sentry_sdk.isolation_scope() as scope:
        scope.set_tag("job_id", job.id)
        if job.meta.get("request_id"):
            scope.set_tag("request_id", job.meta["request_id"])
        yield


def flush(timeout: float = 2.0) -> None:
    """Send what is queued before a process ends on ``os._exit`` (forked workers)."""
    import sentry_sdk

    sentry_sdk.flush(timeout=timeout)


def scrub(event: dict, *, send_pii: bool) -> dict:
    """``before_send``: tag the request id, then take secrets (and addresses unless ``send_pii``) out."""
    request_id = current_request_id()
    if request_id:
        event.setdefault("tags", {})["request_id"] = request_id
    request = event.get("request")
    if isinstance(request, dict):
        if isinstance(request.get("query_string"), str):
            request["query_string"] = redact_query(request["query_string"])
        for name in ("cookies", "data"):
            if name in request:
                request[name] = REDACTED
    # Our own words, set by ``capture``: the header-pair rule would take ["smtp-auth", host] for a secret.
    fingerprint = event.pop("fingerprint", None)
    event = _clean(event, send_pii=send_pii)
    if fingerprint is not None:
        event["fingerprint"] = fingerprint
    return event


def _clean(value, *, send_pii: bool):
    if isinstance(value, dict):
        return {
            k: REDACTED
            if isinstance(k, str) and SECRET_KEY_NAME.search(k) and v not in (None, "", {}, [])
            else _clean(v, send_pii=send_pii)
            for k, v in value.items()
        }
    if isinstance(value, list):
        # Headers come as [name, value] pairs in some events.
        if len(value) == 2 and isinstance(value[0], str) and SECRET_KEY_NAME.search(value[0]):
            return [value[0], REDACTED]
        return [_clean(v, send_pii=send_pii) for v in value]
    if isinstance(value, str):
        value = redact_text(value)
        return value if send_pii else EMAIL_ADDRESS.sub("<email>", value)
    return value

"""``GET /metrics`` in Prometheus text format: with ``Authorization: Bearer <METRICS_TOKEN>``, or from loopback.

Loopback means the visitor's own address, as ``PROXY_HOPS`` trusted proxies report it.
"""

from __future__ import annotations

import hmac
import ipaddress

from flask import Blueprint, Response, abort, current_app, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from bulksign.core.extensions import db, get_redis
from bulksign.models import utcnow
from bulksign.ops.metrics import registry_for, snapshot
from bulksign.people.auth import public
from bulksign.views._forms import client_ip
from bulksign.work.queues import QUEUE_NAMES, get_queue

bp = Blueprint("metrics", __name__)


def _allowed() -> bool:
    token = current_app.config.get("METRICS_TOKEN", "")
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if token:
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())
    try:
        # Behind PROXY_HOPS proxies on this host every connection is local: judge the visitor they name.
        return ipaddress.ip_address(client_ip()).is_loopback
    except ValueError:
        return False


@bp.get("/metrics")
@public
def metrics():
    if not _allowed():
        abort(403)
    config = current_app.config
    rate = config["MAIL_RATE_PER_MINUTE"]
    snap = snapshot(
        db.session,
        redis=get_redis(),
        queues={name: get_queue(name) for name in QUEUE_NAMES},
        now=utcnow(),
        mail_limit_per_second=rate / config["MAIL_RATE_WINDOW_SECONDS"] if rate else 0.0,
    )
    return Response(generate_latest(registry_for(snap)), mimetype=CONTENT_TYPE_LATEST)

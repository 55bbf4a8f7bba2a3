"""Probes for load balancers and supervisors: ``/healthz`` (the database and Redis answer) and ``/readyz`` (also
the scheduler, the queues' workers and the mail server; docs/architecture/views.md)."""

from __future__ import annotations

from flask import Blueprint, jsonify

from bulksign.core.extensions import db, get_redis
from bulksign.models import utcnow
from bulksign.ops.readiness import check_readiness
from bulksign.ops.services import check_services
from bulksign.people.auth import public
from bulksign.work.queues import QUEUE_NAMES

bp = Blueprint("health", __name__)


@bp.get("/healthz")
@public
def healthz():
    report = check_services(db_engine=db.engine, redis=get_redis())
    return jsonify(status="ok" if report.ok else "unavailable", checks=report.checks), (200 if report.ok else 503)


@bp.get("/readyz")
@public
def readyz():
    report = check_services(db_engine=db.engine, redis=get_redis())
    if not report.ok:
        return jsonify(status="unavailable", checks=report.checks, problems=report.problems()), 503
    ready = check_readiness(redis=get_redis(), queue_names=QUEUE_NAMES, now=utcnow())
    body = {
        "status": "ok" if ready.ok else "unavailable",
        "checks": report.checks,
        "problems": list(ready.problems),
        "scheduler_last_tick": ready.scheduler_tick.isoformat() if ready.scheduler_tick else None,
        "queues": {name: {"waiting": waiting, "workers": workers} for name, (waiting, workers) in ready.queues.items()},
        "mail_server_down_since": ready.mail_server_outage.since.isoformat() if ready.mail_server_outage else None,
    }
    return jsonify(body), (200 if ready.ok else 503)
